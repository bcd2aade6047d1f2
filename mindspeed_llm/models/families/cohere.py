"""Cohere's decoders: Command-R (``cohere``), Command-R7B (``cohere2``) and Compass text (``cohere_compass_text``).

All three share one layer: a LayerNorm without bias feeding attention and MLP
in parallel (``x + attn(ln(x)) + mlp(ln(x))``: ``--parallel-residual
--parallel-residual-shared-norm --no-layernorm-bias``), a SwiGLU MLP, tied
embeddings by default and logits multiplied by ``logit_scale``
(``--output-multiplier-scale``). They differ in position and attention pattern:

* Cohere: interleaved RoPE (``--rope-interleaved``) on every layer; optional
  q/k LayerNorms with a weight per head (``use_qk_norm``:
  ``--qk-layernorm --qk-layernorm-per-head-weights``); ``attention_bias`` puts
  biases on q/k/v and o.
* Cohere2: ``layer_types`` of sliding-window layers with interleaved RoPE and
  full-attention layers without RoPE (``--full-attention-layers`` and the same
  layers in ``--no-rope-layers``).
* CohereCompass text: Cohere2's layer with half-rotation RoPE (its M-RoPE is
  plain RoPE for text, where the three position streams coincide) configured
  per layer type in ``rope_parameters``: a ``null`` entry makes that type NoPE,
  a sliding type may have its own base (``--local-rotary-base``);
  ``logit_scale`` null means 1.

The weights use the Llama names (one norm per layer, ``input_layernorm``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    ROPE_KEYS,
    Family,
    RegistryError,
    _common_config,
    _common_hf_config,
    _layer_types,
    _rope_settings,
    _rope_to_hf,
    _window_layers,
    register,
)

COHERE_LAYER = dict(normalization="LayerNorm", layernorm_bias=False, parallel_residual=True,
                    parallel_residual_shared_norm=True)


def _cohere_layer(hf: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The layer every Cohere decoder shares, from the keys they share (``rope_*`` handled by the caller)."""
    if hf.get("hidden_act", "silu") != "silu":
        raise RegistryError(f"{name} hidden_act {hf.get('hidden_act')!r} is not supported (only silu)")
    kwargs = {**_common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS}), **COHERE_LAYER,
              "norm_epsilon": float(hf.get("layer_norm_eps") or 1e-5),
              "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}
    if hf.get("attention_bias", False):  # q/k/v and o, no MLP bias
        kwargs.update(add_qkv_bias=True, add_dense_bias=True)
    return kwargs


def _check_cohere_layer(cfg: TransformerConfig, name: str) -> None:
    layer = {key: getattr(cfg, key) for key in COHERE_LAYER}
    if layer != COHERE_LAYER or cfg.add_bias_linear or cfg.add_mlp_bias or cfg.activation != "swiglu":
        raise RegistryError(f"{name} needs --normalization LayerNorm --no-layernorm-bias --parallel-residual "
                            "--parallel-residual-shared-norm --swiglu and no MLP bias")
    if cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError(f"{name} attention_bias puts biases on q/k/v and o together: set both --add-qkv-bias "
                            "and --add-dense-bias, or neither")


def _cohere_layer_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    out = {k: v for k, v in _common_hf_config(cfg).items() if k not in ("rms_norm_eps",) + ROPE_KEYS}
    return {**out, "layer_norm_eps": cfg.norm_epsilon, "attention_bias": cfg.add_qkv_bias,
            "logit_scale": cfg.output_multiplier_scale or 1.0}


def _logit_scale(hf: Dict[str, Any], name: str, default: float, null_means_one: bool = False) -> Dict[str, Any]:
    """``--output-multiplier-scale`` from ``logit_scale`` (None when it is 1)."""
    scale = hf.get("logit_scale", default)
    if scale is None and null_means_one:
        scale = 1.0
    if scale is None or float(scale) <= 0:
        raise RegistryError(f"{name} logit_scale {scale!r} must be a positive number")
    return {"output_multiplier_scale": None if float(scale) == 1.0 else float(scale)}


# ---------------------------------------------------------------------------------------------- Cohere


def _cohere_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Command-R: interleaved RoPE (theta 500000 when absent), optional per-head q/k LayerNorms."""
    out = {**_cohere_layer(hf, "cohere"), **_rope_settings({"rope_theta": 500000.0, **hf}), "rope_interleaved": True,
           **_logit_scale(hf, "cohere", 0.0625)}
    if hf.get("use_qk_norm", False):
        out["qk_norm"] = "per_head_weights"
    return out


def _cohere_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_cohere_layer(cfg, "cohere")
    if not cfg.rope_interleaved or cfg.sliding_window is not None or cfg.no_rope_layers:
        raise RegistryError("cohere needs --rope-interleaved on every layer (no --sliding-window, --no-rope-layers)")
    if cfg.qk_norm not in ("none", "per_head_weights"):
        raise RegistryError("cohere q/k norms (use_qk_norm) need --qk-layernorm --qk-layernorm-per-head-weights")
    return {**_cohere_layer_hf(cfg), **_rope_to_hf(cfg), "use_qk_norm": cfg.qk_norm == "per_head_weights"}


# --------------------------------------------------------------------------------------------- Cohere2


def _legacy_layer_types(hf: Dict[str, Any], default_pattern: int) -> List[str]:
    """``layer_types``, or the Hub's legacy ``sliding_window_pattern`` (every Nth layer full)."""
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    pattern = int(hf.get("sliding_window_pattern") or default_pattern)
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(hf["num_hidden_layers"])]


def _full_layers(cfg: TransformerConfig) -> Tuple[int, ...]:
    return tuple(i for i in range(cfg.num_layers) if cfg.layer_window(i) is None)


def _cohere2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Command-R7B: sliding-window layers with interleaved RoPE, full layers without RoPE (every 4th by default);
    head_dim is always hidden / heads."""
    if hf.get("use_qk_norm", False):
        raise RegistryError("cohere2 use_qk_norm=True is not supported (Cohere2 has no q/k norms)")
    heads = int(hf["num_attention_heads"])
    hf = {**hf, "head_dim": int(hf["hidden_size"]) // heads}
    windows = _window_layers(_legacy_layer_types(hf, 4), hf.get("sliding_window", 4096), "cohere2")
    full = windows["full_attention_layers"] if windows["sliding_window"] else tuple(range(hf["num_hidden_layers"]))
    return {**_cohere_layer(hf, "cohere2"), **_rope_settings({"rope_theta": 10000.0, **hf}),
            "rope_interleaved": True, **windows, "no_rope_layers": full, **_logit_scale(hf, "cohere2", 0.0625)}


def _cohere2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_cohere_layer(cfg, "cohere2")
    if not cfg.rope_interleaved or cfg.qk_norm != "none" \
            or cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size:
        raise RegistryError("cohere2 needs --rope-interleaved, no --qk-layernorm and --kv-channels = hidden / heads")
    if cfg.no_rope_layers != _full_layers(cfg):
        raise RegistryError(f"cohere2 uses RoPE on exactly its sliding-window layers: --no-rope-layers "
                            f"{list(cfg.no_rope_layers)} must be the full-attention layers {list(_full_layers(cfg))}")
    out = {k: v for k, v in _cohere_layer_hf(cfg).items() if k != "head_dim"}
    return {**out, **_rope_to_hf(cfg), "sliding_window": cfg.sliding_window or 4096, "layer_types": _layer_types(cfg)}


# ----------------------------------------------------------------------------------- CohereCompass text


def _compass_rope(hf: Dict[str, Any], types: List[str], windows: Dict[str, Any]) -> Dict[str, Any]:
    """Our rope kwargs from per-layer-type ``rope_parameters`` (a null entry: that layer type has no RoPE)."""
    params = hf.get("rope_parameters") or {}
    missing = sorted(set(types) - set(params))
    if missing:
        raise RegistryError(f"cohere_compass_text rope_parameters lack layer types {missing}")
    for kind in set(types):
        extra = sorted(set(params[kind] or {}) - {"rope_type", "rope_theta", "mrope_section", "mrope_interleaved"})
        if extra or (params[kind] or {}).get("rope_type", "default") != "default":
            raise RegistryError(f"cohere_compass_text rope_parameters[{kind!r}] {params[kind]} is not supported "
                                "(only default RoPE with rope_theta)")
    full, sliding = params.get("full_attention"), params.get("sliding_attention")
    nope = tuple(i for i, kind in enumerate(types) if params[kind] is None)
    if len(nope) == len(types):
        return {"position_embedding_type": "none", "no_rope_layers": ()}
    global_theta = float((full or sliding)["rope_theta"])
    out: Dict[str, Any] = {"rotary_base": global_theta, "no_rope_layers": nope}
    if windows["sliding_window"] and full and sliding and float(sliding["rope_theta"]) != global_theta:
        out["local_rotary_base"] = float(sliding["rope_theta"])
    return out


def _compass_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """CohereCompass text: Cohere2's layer with half-rotation RoPE per layer type (null: NoPE); every layer full
    when ``layer_types`` is absent."""
    if hf.get("use_qk_norm", False):
        raise RegistryError("cohere_compass_text use_qk_norm=True is not supported (it has no q/k norms)")
    heads = int(hf["num_attention_heads"])
    hf = {**hf, "head_dim": int(hf["hidden_size"]) // heads}
    types = list(hf.get("layer_types") or ["full_attention"] * int(hf["num_hidden_layers"]))
    windows = _window_layers(types, hf.get("sliding_window", 4096), "cohere_compass_text")
    return {**_cohere_layer(hf, "cohere_compass_text"), **windows, **_compass_rope(hf, types, windows),
            **_logit_scale(hf, "cohere_compass_text", 1.0, null_means_one=True)}


def _compass_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_cohere_layer(cfg, "cohere_compass_text")
    if cfg.rope_interleaved or cfg.qk_norm != "none" or cfg.rope_scaling_type or cfg.rotary_percent != 1.0:
        raise RegistryError("cohere_compass_text needs half-rotation RoPE without scaling or --rotary-percent, "
                            "and no --qk-layernorm")
    if cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size:
        raise RegistryError("cohere_compass_text needs --kv-channels = hidden / heads")
    types = _layer_types(cfg)
    no_rope = [cfg.position_embedding_type == "none" or i in cfg.no_rope_layers for i in range(cfg.num_layers)]
    nope = {kind for kind, off in zip(types, no_rope) if off}
    if any(off != (kind in nope) for kind, off in zip(types, no_rope)):
        raise RegistryError("cohere_compass_text sets RoPE per layer type: --no-rope-layers must hold all the "
                            "sliding-window layers, all the full-attention ones, or both kinds")
    bases = {"full_attention": cfg.rotary_base,
             "sliding_attention": cfg.local_rotary_base if cfg.local_rotary_base is not None else cfg.rotary_base}
    rope = {kind: None if kind in nope else {"rope_type": "default", "rope_theta": bases[kind]} for kind in set(types)}
    out = {k: v for k, v in _cohere_layer_hf(cfg).items() if k != "head_dim"}
    return {**out, "rope_parameters": rope, "sliding_window": cfg.sliding_window or 4096, "layer_types": types}


COHERE = register(Family("cohere", "cohere", "CohereForCausalLM", _cohere_config, _cohere_hf_config))
COHERE2 = register(Family("cohere2", "cohere2", "Cohere2ForCausalLM", _cohere2_config, _cohere2_hf_config))
COHERE_COMPASS = register(Family("cohere_compass", "cohere_compass_text", "CohereCompassForCausalLM",
                                 _compass_config, _compass_hf_config), "cohere_compass_text")
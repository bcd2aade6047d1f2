"""Llama-like families: Seed-OSS, HunYuan dense, ERNIE 4.5, CWM, GLM, GLM-4, Emu3 (text), Ministral3, EXAONE 4,
GraniteSWA and HyperCLOVAX.

Each is Llama's layout (``registry.LLAMA_WEIGHTS``) with a few behaviour flags:

* ``seed_oss``: biases by place, ``attention_bias`` (q/k/v, ``--add-qkv-bias``), ``attention_out_bias``
  (``--add-dense-bias``) and ``mlp_bias`` (``--add-mlp-bias``);
* ``hunyuan_v1_dense``: per-head q/k RMSNorms after RoPE (``--qk-layernorm --qk-layernorm-after-rope``,
  tensors ``query_layernorm``/``key_layernorm``); its ``dynamic`` RoPE with a fixed ``alpha`` is NTK
  scaling of the base, ``theta * alpha ** (d / (d - 2))`` (``--rope-ntk-alpha``);
* ``ernie4_5``: interleaved RoPE pairs (``--rope-interleaved``), ``use_bias`` on every linear, tied;
* ``cwm``: Llama-3 RoPE, sliding-window layers with every 4th layer (from 0) full
  (``--full-attention-layers``);
* ``glm``: half the head dims rotate, in interleaved pairs (``--rotary-percent 0.5 --rope-interleaved``),
  fused ``gate_up_proj``, q/k/v bias only;
* ``glm4``: GLM with sandwich norms (``--post-norm``: ``post_self_attn_layernorm``, ``post_mlp_layernorm``);
* ``emu3_text_model``: the text-only ``Emu3ForCausalLM`` (``Emu3TextConfig``); the composite ``emu3``
  config (``text_config`` + ``vq_config``, weights under ``model.text_model``) is refused;
* ``ministral3``: YaRN RoPE (``--rope-scaling-type yarn``) and the Llama-4 query temperature
  (``--attn-temperature-beta`` / ``--attn-temperature-length`` from ``llama_4_scaling_beta`` and
  ``original_max_position_embeddings``), optional sliding window over every layer;
* ``exaone4``: Olmo2's post-only norms (``--post-norm-only``), per-head q/k RMSNorm, sliding-window layers
  (``--full-attention-layers``) where, when a window is configured, only the sliding layers use RoPE
  (``--no-rope-layers`` = the full-attention layers);
* ``granite_swa``: Granite with sliding-window layers (``--full-attention-layers``), a learnable attention
  sink per head (``--softmax-type learnable``) and a RoPE base per layer (``layer_rope_theta``: one base on
  the full layers, another on the sliding ones as ``--local-rotary-base``, 0 for NoPE layers);
* ``hyperclovax``: Granite's multipliers plus Gemma2's sandwich norms (``use_post_norm``); its logits are
  multiplied by ``logits_scaling`` (Granite divides).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    LLAMA_WEIGHTS, OLMO2_WEIGHTS, ROPE_KEYS, Family, RegistryError, _common_config, _common_hf_config,
    _granite_config, _granite_hf_config, _layer, _layer_types, _layer_windows, _renamed, _rope_settings, register,
    require_config,
)

# --------------------------------------------------------------------------- shared helpers


def _biases(qkv: bool, dense: bool, mlp: bool) -> Dict[str, bool]:
    """Our bias flags for HF biases by place (q/k/v, attention output, MLP)."""
    return {"add_bias_linear": False, "add_qkv_bias": bool(qkv), "add_dense_bias": bool(dense),
            "add_mlp_bias": bool(mlp)}


def _bias_places(cfg: TransformerConfig) -> Tuple[bool, bool, bool]:
    """Which of (q/k/v, attention output, MLP) carry biases in ``cfg``."""
    return cfg.qkv_bias, cfg.add_bias_linear or cfg.add_dense_bias, cfg.mlp_bias


def _refuse(name: str, hf: Dict[str, Any], **unsupported: Any) -> None:
    """A RegistryError when ``hf`` sets a key of ``unsupported`` to anything but its listed value."""
    for key, allowed in unsupported.items():
        if key in hf and hf[key] not in (allowed, None):
            raise RegistryError(f"{name} {key}={hf[key]!r} is not supported (only {allowed!r})")


def _no_extras(name: str, cfg: TransformerConfig, *allowed: str) -> None:
    """Refuse decoder behaviours family ``name`` lacks (but ``allowed``): its HF config could not express them."""
    extras = ["qk_norm"] if cfg.qk_norm != "none" else []
    extras += [key for key in ("post_norm", "post_norm_only", "apply_layernorm_1p",
                               "input_embeds_norm", "parallel_residual", "embed_layernorm", "non_parametric_norm",
                               "add_output_layer_bias")
               if getattr(cfg, key)]
    extras += [key for key in ("attn_logit_softcapping", "output_logit_softcapping", "query_pre_attn_scalar",
                               "softmax_scale", "embedding_multiplier", "residual_multiplier",
                               "output_multiplier_scale", "qkv_clip", "local_rotary_base", "attn_temperature_beta",
                               "rope_ntk_alpha")
               if getattr(cfg, key) is not None]
    if cfg.no_rope_layers:
        extras.append("no_rope_layers")
    extras = [key for key in extras if key not in allowed]
    if extras:
        raise RegistryError(f"{name} has no equivalent of {', '.join(extras)}")


def _check_common(name: str, cfg: TransformerConfig, **needed: Any) -> None:
    """What every family here needs: RMSNorm, SwiGLU, no other behaviour than ``needed`` (defaults off)."""
    defaults = dict(normalization="RMSNorm", activation="swiglu", rope_interleaved=False, rotary_percent=1.0,
                    sliding_window=None)
    require_config(cfg, name, **{**defaults, **needed})


# --------------------------------------------------------------------------- Seed-OSS


def _seed_oss_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Seed-OSS: Llama with biases by place (q/k/v on by default)."""
    return {**_common_config(hf), **_biases(hf.get("attention_bias", True), hf.get("attention_out_bias", False),
                                            hf.get("mlp_bias", False))}


def _seed_oss_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("seed_oss", cfg)
    _no_extras("seed_oss", cfg)
    qkv, dense, mlp = _bias_places(cfg)
    return {**_common_hf_config(cfg), "attention_bias": qkv, "attention_out_bias": dense, "mlp_bias": mlp,
            "attention_dropout": 0.0, "residual_dropout": 0.0, "pretraining_tp": 1}


# --------------------------------------------------------------------------- HunYuan dense


def _hunyuan_rope(hf: Dict[str, Any], family: str = "hunyuan_v1_dense") -> Dict[str, Any]:
    """HunYuan's RoPE: plain, or ``dynamic`` with a fixed ``alpha`` (``--rope-ntk-alpha``; transformers'
    ``ntk_alpha``, independent of the sequence length)."""
    params = {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}
    out: Dict[str, Any] = {"rotary_base": float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))}
    kind = params.get("rope_type", params.get("type")) or "default"
    if kind == "dynamic" and params.get("alpha"):
        return {**out, "rope_ntk_alpha": float(params["alpha"])}
    if kind != "default":
        raise RegistryError(f"{family} rope_type {kind!r} is not supported (default, or dynamic with alpha)")
    return out


def _hunyuan_rope_to_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.rope_ntk_alpha is None:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": cfg.rotary_base}}
    # "type" as well: the published checkpoints spell it so (transformers keeps both keys)
    return {"rope_parameters": {"rope_type": "dynamic", "type": "dynamic", "alpha": cfg.rope_ntk_alpha,
                                "factor": 1.0, "rope_theta": cfg.rotary_base}}


def _hunyuan_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """HunYuan dense: per-head q/k RMSNorm after RoPE; ``attention_bias`` on q/k/v and o. The original
    checkpoints' switches that transformers' model does not implement (cross-layer attention, no q/k norm)
    are refused."""
    _refuse("hunyuan_v1_dense", hf, use_cla=False, use_qk_norm=True, mlp_bias=False)
    without_rope = {k: v for k, v in hf.items() if k not in ROPE_KEYS}
    out = _common_config(without_rope)
    bias = hf.get("attention_bias", False)
    return {**out, **_biases(bias, bias, False), "qk_norm": "per_head", "qk_layernorm_after_rope": True,
            **_hunyuan_rope(hf)}


def _hunyuan_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("hunyuan_v1_dense", cfg, qk_norm="per_head", qk_layernorm_after_rope=True, rope_scaling_type=None)
    _no_extras("hunyuan_v1_dense", cfg, "qk_norm", "rope_ntk_alpha")
    qkv, dense, mlp = _bias_places(cfg)
    if qkv != dense or mlp:
        raise RegistryError("hunyuan_v1_dense has one attention_bias for q/k/v and o and no MLP bias")
    out = {k: v for k, v in _common_hf_config(cfg).items() if k not in ROPE_KEYS}
    return {**out, **_hunyuan_rope_to_hf(cfg), "attention_bias": qkv, "pretraining_tp": 1}


HUNYUAN_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"self_attention.q_layernorm.weight": "self_attn.query_layernorm.weight",
                                           "self_attention.k_layernorm.weight": "self_attn.key_layernorm.weight"})

# --------------------------------------------------------------------------- ERNIE 4.5


def _ernie_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """ERNIE 4.5: interleaved RoPE, ``use_bias`` on every linear, tied by default (theta 500000)."""
    hf = {"rope_theta": 500000.0, "tie_word_embeddings": True, **hf}
    bias = hf.get("use_bias", False)
    return {**_common_config(hf), **_biases(bias, bias, bias), "rope_interleaved": True}


def _ernie_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("ernie4_5", cfg, rope_interleaved=True)
    _no_extras("ernie4_5", cfg)
    places = _bias_places(cfg)
    if len(set(places)) != 1:
        raise RegistryError("ernie4_5 has one use_bias for every linear; biases by place are not expressible")
    return {**_common_hf_config(cfg), "use_bias": places[0]}


# --------------------------------------------------------------------------- CWM


CWM_ROPE = {"rope_type": "llama3", "rope_theta": 1_000_000.0, "factor": 16.0, "high_freq_factor": 4.0,
            "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}


def _cwm_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """CWM: Llama-3 RoPE, sliding-window layers with every 4th layer (from layer 0) attending fully."""
    layers = int(hf["num_hidden_layers"])
    if not any(key in hf for key in ROPE_KEYS):
        hf = {**hf, "rope_parameters": CWM_ROPE}
    types = hf.get("layer_types") or ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(layers)]
    window = hf.get("sliding_window", 8192)
    return {**_common_config(hf), **_biases(False, False, hf.get("mlp_bias", False)),
            **_layer_windows(types, window, layers)}


def _cwm_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("cwm", cfg, sliding_window=cfg.sliding_window)
    _no_extras("cwm", cfg)
    qkv, dense, mlp = _bias_places(cfg)
    if qkv or dense:
        raise RegistryError("cwm has no attention biases (only mlp_bias)")
    return {**_common_hf_config(cfg), "mlp_bias": mlp, "sliding_window": cfg.sliding_window,
            "layer_types": _layer_types(cfg), "pretraining_tp": 1}


# --------------------------------------------------------------------------- GLM, GLM-4


def _glm_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GLM: half the head dims rotate in interleaved pairs, fused gate/up, q/k/v bias (no o bias)."""
    hf = {"partial_rotary_factor": 0.5, "rms_norm_eps": 1.5625e-07, **hf}
    return {**_common_config(hf), **_biases(hf.get("attention_bias", True), False, False), "rope_interleaved": True}


def _glm_hf_config(cfg: TransformerConfig, name: str = "glm", post_norm: bool = False) -> Dict[str, Any]:
    _check_common(name, cfg, rope_interleaved=True, rotary_percent=cfg.rotary_percent)
    _no_extras(name, cfg, *(("post_norm",) if post_norm else ()))
    require_config(cfg, name, post_norm=post_norm)
    qkv, dense, mlp = _bias_places(cfg)
    if dense or mlp:
        raise RegistryError(f"{name} has biases on q/k/v only (attention_bias)")
    # written even at 1.0: a config.json without it means 0.5
    return {**_common_hf_config(cfg), "attention_bias": qkv, "partial_rotary_factor": cfg.rotary_percent}


def _glm4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GLM-4: GLM with sandwich norms on the attention and MLP outputs."""
    return {**_glm_config(hf), "post_norm": True}


def _glm4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return _glm_hf_config(cfg, "glm4", post_norm=True)


GLM_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"mlp.linear_fc1.weight": "mlp.gate_up_proj.weight"})
GLM4_WEIGHTS = GLM_WEIGHTS + (
    _layer("post_self_attn_layernorm.weight", ["post_self_attn_layernorm.weight"]),
    _layer("post_mlp_layernorm.weight", ["post_mlp_layernorm.weight"]),
)

# --------------------------------------------------------------------------- Emu3 text


def _emu3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Emu3's text model: Llama (theta 1e6) with ``attention_bias`` on q/k/v/o and ``mlp_bias``."""
    if "text_config" in hf or hf.get("model_type") == "emu3":
        raise RegistryError("emu3: the composite Emu3Config (text_config + vq_config) is not supported; convert "
                            "the text-only Emu3ForCausalLM (model_type emu3_text_model)")
    hf = {"rope_theta": 1_000_000.0, **hf}
    bias = hf.get("attention_bias", False)
    return {**_common_config(hf), **_biases(bias, bias, hf.get("mlp_bias", False))}


def _emu3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("emu3", cfg)
    _no_extras("emu3", cfg)
    qkv, dense, mlp = _bias_places(cfg)
    if qkv != dense:
        raise RegistryError("emu3 has one attention_bias for q/k/v and o")
    return {**_common_hf_config(cfg), "attention_bias": qkv, "mlp_bias": mlp}


# --------------------------------------------------------------------------- Ministral3


MINISTRAL3_ROPE = {"rope_type": "yarn", "rope_theta": 1_000_000.0, "factor": 16.0,
                   "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0,
                   "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}


def _ministral3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Ministral3: Mistral (one window over every layer) with YaRN RoPE and the Llama-4 query temperature
    (``llama_4_scaling_beta`` over ``original_max_position_embeddings``)."""
    if hf.get("layer_types"):
        raise RegistryError("ministral3 layer_types is not supported (transformers' Ministral3 ignores it)")
    if not hf.get("rope_parameters") and not hf.get("rope_scaling"):
        hf = {**hf, "rope_parameters": MINISTRAL3_ROPE}
    params = {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}
    out = {**_common_config(hf), "sliding_window": hf.get("sliding_window")}
    beta = params.get("llama_4_scaling_beta")
    if beta:
        length = params.get("original_max_position_embeddings")
        if not length:
            raise RegistryError("ministral3 llama_4_scaling_beta needs rope_parameters original_max_position_embeddings")
        out.update(attn_temperature_beta=float(beta), attn_temperature_length=int(length))
    return out


def _ministral3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("ministral3", cfg, sliding_window=cfg.sliding_window)
    if cfg.sliding_window_pattern or cfg.full_attention_layers:
        raise RegistryError("ministral3 has one sliding window over every layer")
    _no_extras("ministral3", cfg, "attn_temperature_beta")
    if any(_bias_places(cfg)):
        raise RegistryError("ministral3 has no linear biases")
    out = _common_hf_config(cfg)
    params = {**(out.pop("rope_scaling") or {"rope_type": "default"}), "rope_theta": out.pop("rope_theta")}
    length = params.get("original_max_position_embeddings", cfg.attn_temperature_length)
    if cfg.attn_temperature_beta is not None and length != cfg.attn_temperature_length:
        raise RegistryError("ministral3 needs --attn-temperature-length equal to --original-max-position-embeddings")
    # transformers reads both keys whatever the rope type
    params.update(llama_4_scaling_beta=cfg.attn_temperature_beta or 0.0,
                  original_max_position_embeddings=length or cfg.rope_original_max_position_embeddings)
    return {**out, "rope_parameters": params, "sliding_window": cfg.sliding_window}


# --------------------------------------------------------------------------- registration

SEED_OSS = register(Family("seed_oss", "seed_oss", "SeedOssForCausalLM", _seed_oss_config, _seed_oss_hf_config),
                    "seed-oss")
HUNYUAN = register(Family("hunyuan_v1_dense", "hunyuan_v1_dense", "HunYuanDenseV1ForCausalLM", _hunyuan_config,
                          _hunyuan_hf_config, HUNYUAN_WEIGHTS), "hunyuan", "hunyuan-dense")
ERNIE = register(Family("ernie4_5", "ernie4_5", "Ernie4_5ForCausalLM", _ernie_config, _ernie_hf_config),
                 "ernie4.5", "ernie")
CWM = register(Family("cwm", "cwm", "CwmForCausalLM", _cwm_config, _cwm_hf_config))
GLM = register(Family("glm", "glm", "GlmForCausalLM", _glm_config, _glm_hf_config, GLM_WEIGHTS))
GLM4 = register(Family("glm4", "glm4", "Glm4ForCausalLM", _glm4_config, _glm4_hf_config, GLM4_WEIGHTS))
EMU3 = register(Family("emu3", "emu3_text_model", "Emu3ForCausalLM", _emu3_config, _emu3_hf_config))
MINISTRAL3 = register(Family("ministral3", "ministral3", "Ministral3ForCausalLM", _ministral3_config,
                             _ministral3_hf_config))


# --------------------------------------------------------------------------- EXAONE 4


def _exaone4_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or as transformers derives them: every ``sliding_window_pattern``-th layer full."""
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    layers = int(hf["num_hidden_layers"])
    if hf.get("sliding_window", 4096) is None:
        return ["full_attention"] * layers
    pattern = hf.get("sliding_window_pattern", 4)
    if not isinstance(pattern, int) or pattern < 1:
        raise RegistryError(f"exaone4 sliding_window_pattern {pattern!r} without layer_types is not supported")
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]


def _exaone4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """EXAONE 4: post-only norms, per-head q/k norms; with a window, full layers attend without RoPE."""
    types = _exaone4_layer_types(hf)
    window = hf.get("sliding_window", 4096)
    out = {**_common_config(hf), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)), "qk_norm": "per_head",
           "post_norm_only": True}
    if window is None:
        return out
    full = tuple(i for i, kind in enumerate(types) if kind != "sliding_attention")
    return {**out, "sliding_window": int(window), "full_attention_layers": full, "no_rope_layers": full}


def _exaone4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear or cfg.add_qkv_bias or cfg.add_dense_bias or cfg.add_mlp_bias:
        raise RegistryError("exaone4 has no linear biases; the config sets one")
    if not (cfg.qk_norm == "per_head" and cfg.post_norm_only) or cfg.post_norm:
        raise RegistryError("exaone4 needs --qk-layernorm --post-norm-only (no --qk-layernorm-full-width, --post-norm)")
    full = tuple(i for i in range(cfg.num_layers) if cfg.layer_window(i) is None)
    expected_nope = full if cfg.sliding_window is not None else ()
    if cfg.no_rope_layers != expected_nope or cfg.sliding_window_pattern is not None:
        raise RegistryError(f"exaone4 skips RoPE exactly on the full-attention layers when a window is set "
                            f"(--no-rope-layers {list(expected_nope)}, --full-attention-layers)")
    # sliding_window_pattern is left as it was: transformers reads it only without layer_types
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "layer_types": _layer_types(cfg)}


_EXAONE4 = register(Family("exaone4", "exaone4", "Exaone4ForCausalLM", _exaone4_config, _exaone4_hf_config,
                           OLMO2_WEIGHTS))

# --------------------------------------------------------------------------- GraniteSWA


def _granite_swa_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or transformers' default: layers 0, 4, 8, ... attend fully."""
    layers = int(hf["num_hidden_layers"])
    return list(hf.get("layer_types") or ["full_attention" if i % 4 == 0 else "sliding_attention"
                                          for i in range(layers)])


def _granite_swa_rope(hf: Dict[str, Any], types: Sequence[str]) -> Dict[str, Any]:
    """Our rope fields from ``layer_rope_theta``: one base on full layers, one on sliding layers, 0 = NoPE."""
    rope = _rope_settings(hf)
    thetas = hf.get("layer_rope_theta") or [rope["rotary_base"]] * len(types)
    full = {float(t) for t, kind in zip(thetas, types) if t and kind != "sliding_attention"}
    sliding = {float(t) for t, kind in zip(thetas, types) if t and kind == "sliding_attention"}
    if len(full) > 1 or len(sliding) > 1:
        raise RegistryError(f"granite_swa layer_rope_theta {list(thetas)}: more than one base per layer type "
                            "is not supported")
    base = next(iter(full or sliding), rope["rotary_base"])
    out = {**rope, "rotary_base": base, "no_rope_layers": tuple(i for i, t in enumerate(thetas) if not t)}
    if sliding and sliding != {base}:
        if rope.get("rope_scaling_type") is not None:
            raise RegistryError("granite_swa with two layer_rope_theta bases and rope scaling is not supported")
        out["local_rotary_base"] = sliding.pop()
    return out


def granite_swa_fields(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """GraniteSWA's attention (GraniteMoeSWA's too): sliding-window layers by ``layer_types``, learnable sinks and
    per-layer RoPE bases (``layer_rope_theta``)."""
    types = _granite_swa_layer_types(hf)
    window = hf.get("sliding_window", 128)
    if window is None and "sliding_attention" in types:
        raise RegistryError(f"{family} sliding_attention layers without sliding_window are not supported")
    out = {**_granite_swa_rope(hf, types), "softmax_type": "learnable"}
    if window is not None and "sliding_attention" in types:
        out.update(sliding_window=int(window),
                   full_attention_layers=tuple(i for i, kind in enumerate(types) if kind != "sliding_attention"))
    return out


def granite_swa_hf_fields(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    """The inverse of :func:`granite_swa_fields`: ``sliding_window``, ``layer_types``, ``layer_rope_theta``."""
    if cfg.softmax_type != "learnable" or cfg.sliding_window_pattern is not None:
        raise RegistryError(f"{family} needs --softmax-type learnable and its full layers as --full-attention-layers")
    types = _layer_types(cfg)
    if cfg.local_rotary_base is not None and cfg.rope_scaling_type is not None:
        raise RegistryError(f"{family} with --local-rotary-base and rope scaling is not supported")
    thetas = [0.0 if i in cfg.no_rope_layers else
              (cfg.local_rotary_base or cfg.rotary_base) if kind == "sliding_attention" else cfg.rotary_base
              for i, kind in enumerate(types)]
    return {"sliding_window": cfg.sliding_window or 128, "layer_types": types, "layer_rope_theta": thetas}


def _granite_swa_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GraniteSWA: Granite with sliding-window layers, attention sinks and per-layer RoPE bases."""
    return {**_granite_config({k: v for k, v in hf.items() if k != "layer_rope_theta"}),
            **granite_swa_fields(hf, "granite_swa"),
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}


def _granite_swa_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_granite_hf_config(cfg), **granite_swa_hf_fields(cfg, "granite_swa")}


_GRANITE_SWA = register(Family("granite_swa", "granite_swa", "GraniteSWAForCausalLM", _granite_swa_config,
                               _granite_swa_hf_config,
                               LLAMA_WEIGHTS + (_layer("self_attention.softmax_offset", ["self_attn.sinks"]),)))

# --------------------------------------------------------------------------- HyperCLOVAX


def _hyperclovax_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """HyperCLOVAX: Granite with sandwich norms (``use_post_norm``) and logits times ``logits_scaling``."""
    head_dim = int(hf.get("head_dim") or int(hf["hidden_size"]) // int(hf["num_attention_heads"]))
    multiplier = hf.get("attention_multiplier")
    hf = {**hf, "attention_multiplier": head_dim ** -0.5 if multiplier is None else multiplier}
    return {**_granite_config(hf), "post_norm": bool(hf.get("use_post_norm", True)),
            "output_multiplier_scale": float(hf.get("logits_scaling", 1.0))}


def _hyperclovax_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.post_norm_only:
        raise RegistryError("hyperclovax has norms before attention and MLP; drop --post-norm-only")
    return {**_granite_hf_config(cfg), "logits_scaling": cfg.output_multiplier_scale or 1.0,
            "use_post_norm": cfg.post_norm}


HYPERCLOVAX_WEIGHTS = LLAMA_WEIGHTS + (
    _layer("post_self_attn_layernorm.weight", ["post_norm1.weight"]),
    _layer("post_mlp_layernorm.weight", ["post_norm2.weight"]),
)
_HYPERCLOVAX = register(Family("hyperclovax", "hyperclovax", "HyperCLOVAXForCausalLM", _hyperclovax_config,
                               _hyperclovax_hf_config, HYPERCLOVAX_WEIGHTS))

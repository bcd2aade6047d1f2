"""Gemma-style decoders: GeGLU MLPs and local (sliding-window) layers beside global ones, each kind with its
own RoPE base where the family has two: VaultGemma, Gemma4 (text and unified text) and the ModernBERT decoder.

* VaultGemma (``vaultgemma``): Gemma2 without the norms on the attention and MLP outputs.
* ModernBERT decoder (``modernbert-decoder``): bias-free LayerNorms on the
  embeddings (``--embed-layernorm``), before attention except in layer 0
  (``--no-first-input-layernorm``) and MLP, GeGLU (``Wi`` = [activated input;
  gate], our [gate; up]), local layers with a causal window of
  ``local_attention // 2`` and their own RoPE base, a prediction head
  (``--prediction-head``) and a tied decoder with its own bias.
* Gemma4 unified text (``gemma4_unified_text``): Gemma3's sandwich layer with
  plain RMSNorm weights, softmax scale 1, a weightless RMSNorm on V
  (``--value-norm``), a learned scalar on each layer's output
  (``--layer-scalar``), full-attention layers with their own head dim and KV
  heads (``--global-kv-channels``, ``--global-num-query-groups``), values equal
  to their keys' projection (``--global-attention-k-eq-v``) and proportional
  RoPE (``--rope-scaling-type proportional``). KV sharing across layers
  (``num_kv_shared_layers``) and bidirectional attention are refused. Gemma4
  text (``gemma4_text``, Gemma4ForCausalLM) is the same decoder when it has
  no per-layer inputs and no MoE block (both refused otherwise).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    GEMMA2_WEIGHTS,
    LLAMA_WEIGHTS,
    ROPE_KEYS,
    Family,
    RegistryError,
    WeightRule,
    _activation_to_hf,
    _common_config,
    _common_hf_config,
    _gemma2_config,
    _gemma2_hf_config,
    _layer,
    _layer_types,
    _renamed,
    _window_layers,
    register,
)

# --------------------------------------------------------------------------- VaultGemma


def _vaultgemma_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """VaultGemma: Gemma2 without the norms on the attention and MLP outputs."""
    return {**_gemma2_config(hf), "post_norm": False}


def _vaultgemma_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.post_norm or cfg.post_norm_only:
        raise RegistryError("vaultgemma has no norms on the attention and MLP outputs; drop --post-norm")
    out = _gemma2_hf_config(cfg)
    out.pop("use_bidirectional_attention", None)
    return out


VAULTGEMMA_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"pre_mlp_layernorm.weight": "pre_feedforward_layernorm.weight"})
_VAULTGEMMA = register(Family("vaultgemma", "vaultgemma", "VaultGemmaForCausalLM", _vaultgemma_config,
                              _vaultgemma_hf_config, VAULTGEMMA_WEIGHTS))


# ----------------------------------------------------------------------------------- ModernBERT decoder

_MB = "model.layers.{i}."
MODERNBERT_DECODER_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.embeddings.tok_embeddings.weight",), "vocab"),
    WeightRule("embedding.embedding_layernorm.weight", ("model.embeddings.norm.weight",)),
    WeightRule("embedding.embedding_layernorm.bias", ("model.embeddings.norm.bias",)),
    *(WeightRule("decoder.layers.{i}." + ours, tuple(_MB + n for n in hf), transform) for ours, hf, transform in (
        ("input_layernorm.weight", ["attn_norm.weight"], "copy"),
        ("input_layernorm.bias", ["attn_norm.bias"], "copy"),
        ("self_attention.linear_qkv.weight", ["attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"],
         "fuse_rows"),
        ("self_attention.linear_qkv.bias", ["attn.q_proj.bias", "attn.k_proj.bias", "attn.v_proj.bias"], "fuse_rows"),
        ("self_attention.linear_proj.weight", ["attn.Wo.weight"], "copy"),
        ("self_attention.linear_proj.bias", ["attn.Wo.bias"], "copy"),
        ("pre_mlp_layernorm.weight", ["mlp_norm.weight"], "copy"),
        ("pre_mlp_layernorm.bias", ["mlp_norm.bias"], "copy"),
        # Wi is [activated input; gate], as our fused [gate; up] whose first half is activated
        ("mlp.linear_fc1.weight", ["mlp.Wi.weight"], "copy"),
        ("mlp.linear_fc1.bias", ["mlp.Wi.bias"], "copy"),
        ("mlp.linear_fc2.weight", ["mlp.Wo.weight"], "copy"),
        ("mlp.linear_fc2.bias", ["mlp.Wo.bias"], "copy"))),
    WeightRule("decoder.final_layernorm.weight", ("model.final_norm.weight",)),
    WeightRule("decoder.final_layernorm.bias", ("model.final_norm.bias",)),
    WeightRule("prediction_head.dense.weight", ("lm_head.dense.weight",)),
    WeightRule("prediction_head.dense.bias", ("lm_head.dense.bias",)),
    WeightRule("prediction_head.norm.weight", ("lm_head.norm.weight",)),
    WeightRule("prediction_head.norm.bias", ("lm_head.norm.bias",)),
    WeightRule("output_layer.weight", ("decoder.weight",), "vocab"),
    WeightRule("output_layer.bias", ("decoder.bias",), "vocab"),
    WeightRule("output_layer_bias", ("decoder.bias",), "vocab"),
)

# HF activation name -> --prediction-head
HEAD_ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "relu": "relu",
                    "silu": "silu", "swish": "silu"}
MODERNBERT_DECODER_DEFAULTS = dict(hidden_activation="gelu", norm_eps=1e-5, norm_bias=False, attention_bias=False,
                                   mlp_bias=False, decoder_bias=True, classifier_bias=False,
                                   classifier_activation="gelu", local_attention=128, tie_word_embeddings=True,
                                   max_position_embeddings=8192)


def _modernbert_rope(hf: Dict[str, Any]) -> Tuple[float, float]:
    """(global, local) RoPE bases from per-layer-type ``rope_parameters`` or the legacy ``global_rope_theta`` /
    ``local_rope_theta``; only unscaled RoPE."""
    params = hf.get("rope_parameters") or {}
    if hf.get("rope_scaling"):
        raise RegistryError("modernbert-decoder rope_scaling is not supported (only default RoPE)")
    bases = {"full_attention": float(hf.get("global_rope_theta", 160000.0)),
             "sliding_attention": float(hf.get("local_rope_theta", 10000.0))}
    for kind, entry in params.items():
        if kind not in bases or not isinstance(entry, dict) or entry.get("rope_type", "default") != "default":
            raise RegistryError(f"modernbert-decoder rope_parameters[{kind!r}] {entry} is not supported "
                                "(full_attention/sliding_attention with default RoPE)")
        bases[kind] = float(entry.get("rope_theta", bases[kind]))
    return bases["full_attention"], bases["sliding_attention"]


def _modernbert_decoder_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """ModernBERT decoder: bias-free LayerNorms (``norm_bias``) on the embeddings, before attention (not in layer
    0) and MLP, at the end and in the prediction head; GeGLU; local layers attend causally to the last
    ``local_attention // 2`` tokens with their own RoPE base; a tied decoder with a bias of its own."""
    hf = {**MODERNBERT_DECODER_DEFAULTS, **hf}
    if hf["classifier_activation"] not in HEAD_ACTIVATIONS:
        raise RegistryError(f"modernbert-decoder classifier_activation {hf['classifier_activation']!r} is not "
                            f"supported (supported: {', '.join(HEAD_ACTIVATIONS)})")
    heads, layers = int(hf["num_attention_heads"]), int(hf["num_hidden_layers"])
    every = int(hf.get("global_attn_every_n_layers", 3))
    types = list(hf.get("layer_types") or ["full_attention" if i % every == 0 else "sliding_attention"
                                            for i in range(layers)])
    window = int(hf["local_attention"]) // 2 if hf["local_attention"] else None
    windows = _window_layers(types, window, "modernbert-decoder")
    global_base, local_base = _modernbert_rope(hf)
    out = {**_common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS + ("head_dim", "num_key_value_heads")}),
           "normalization": "LayerNorm", "norm_epsilon": float(hf["norm_eps"]), "layernorm_bias": bool(hf["norm_bias"]),
           "embed_layernorm": True, "first_input_layernorm": False, "kv_channels": int(hf["hidden_size"]) // heads,
           "num_query_groups": heads, **windows, "rotary_base": global_base,
           "local_rotary_base": local_base if windows["sliding_window"] else None,
           "add_qkv_bias": bool(hf["attention_bias"]), "add_dense_bias": bool(hf["attention_bias"]),
           "add_mlp_bias": bool(hf["mlp_bias"]), "add_output_layer_bias": bool(hf["decoder_bias"]),
           "prediction_head": HEAD_ACTIVATIONS[hf["classifier_activation"]],
           "prediction_head_bias": bool(hf["classifier_bias"]),
           "untie_embeddings_and_output_weights": not hf["tie_word_embeddings"]}
    return out


def _modernbert_decoder_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    name = "modernbert-decoder"
    if not (cfg.normalization == "LayerNorm" and cfg.embed_layernorm and not cfg.first_input_layernorm
            and cfg.prediction_head and cfg.gated_linear_unit and not cfg.parallel_residual and not cfg.output_norm):
        raise RegistryError(f"{name} needs --normalization LayerNorm --embed-layernorm --no-first-input-layernorm "
                            "--prediction-head ACT and a gated MLP (--geglu or --swiglu)")
    if cfg.add_bias_linear or cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError(f"{name} attention_bias puts biases on q/k/v and o together (--add-qkv-bias "
                            "--add-dense-bias), mlp_bias on the MLP (--add-mlp-bias); no --add-bias-linear")
    if (cfg.num_query_groups != cfg.num_attention_heads or cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size
            or cfg.no_rope_layers or cfg.rope_scaling_type or cfg.rope_interleaved or cfg.rotary_percent != 1.0):
        raise RegistryError(f"{name} needs multi-head attention with --kv-channels = hidden / heads and plain RoPE "
                            "on every layer")
    head = {v: k for k, v in HEAD_ACTIVATIONS.items() if k in ("gelu", "gelu_pytorch_tanh", "relu", "silu")}
    base = {k: v for k, v in _common_hf_config(cfg).items()
            if k not in ("rms_norm_eps", "head_dim", "num_key_value_heads", "hidden_act") + ROPE_KEYS}
    local = cfg.local_rotary_base if cfg.local_rotary_base is not None else 10000.0
    return {**base, "hidden_activation": _activation_to_hf(cfg), "norm_eps": cfg.norm_epsilon,
            "norm_bias": cfg.layernorm_bias, "attention_bias": cfg.add_qkv_bias, "mlp_bias": cfg.add_mlp_bias,
            "decoder_bias": cfg.add_output_layer_bias, "classifier_bias": cfg.prediction_head_bias,
            "classifier_activation": head[cfg.prediction_head], "layer_types": _layer_types(cfg),
            "local_attention": 2 * (cfg.sliding_window or 64),
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": cfg.rotary_base},
                                "sliding_attention": {"rope_type": "default", "rope_theta": local}}}


# ------------------------------------------------------------------------------ Gemma4 unified text

GEMMA4_WEIGHTS = GEMMA2_WEIGHTS + (
    _layer("layer_scalar", ["layer_scalar"]),
    # full-attention layers whose values are their keys (attention_k_eq_v): no v_proj
    _layer("self_attention.linear_qk.weight", ["self_attn.q_proj.weight", "self_attn.k_proj.weight"], "fuse_rows"),
    _layer("self_attention.linear_qk.bias", ["self_attn.q_proj.bias", "self_attn.k_proj.bias"], "fuse_rows"),
)
GEMMA4_DEFAULTS = dict(head_dim=256, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, sliding_window=1024,
                       tie_word_embeddings=True, max_position_embeddings=262144)
GEMMA4_DEFAULT_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                       "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                          "rope_theta": 1000000.0}}
_G4 = "gemma4_unified_text"


def _gemma4_refuse_unmodelled(hf: Dict[str, Any]) -> None:
    """One-line errors for the Gemma4 settings the decoder does not model."""
    if hf.get("use_bidirectional_attention") == "all":
        raise RegistryError(f"{_G4} use_bidirectional_attention='all' is not supported (causal decoder only)")
    if int(hf.get("num_kv_shared_layers") or 0):
        raise RegistryError(f"{_G4} num_kv_shared_layers={hf['num_kv_shared_layers']} (keys/values shared across "
                            "layers) is not supported")


def _gemma4_global_shape(hf: Dict[str, Any], types: List[str]) -> Dict[str, Any]:
    """The full-attention layers' own head dim and KV heads, from ``per_layer_config`` (a saved config) or
    ``global_head_dim`` / ``num_global_key_value_heads`` (as transformers builds it: 512 by default; the KV
    heads only with ``attention_k_eq_v``)."""
    head_dim, groups = int(hf["head_dim"]), int(hf.get("num_key_value_heads") or hf["num_attention_heads"])
    full = {str(i) for i, kind in enumerate(types) if kind == "full_attention"}
    overrides = hf.get("per_layer_config")
    if overrides is None:
        shape = {"head_dim": int(hf.get("global_head_dim", 512))}
        if hf.get("attention_k_eq_v", False) and hf.get("num_global_key_value_heads") is not None:
            shape["num_key_value_heads"] = int(hf["num_global_key_value_heads"])
        overrides = {layer: shape for layer in full}
    shapes = {str(layer): (int(v.get("head_dim", head_dim)), int(v.get("num_key_value_heads", groups)))
              for layer, v in overrides.items()}
    global_shape = shapes.get(min(full, key=int), (head_dim, groups)) if full else (head_dim, groups)
    if any(shapes.get(layer, (head_dim, groups)) != global_shape for layer in full) or any(
            shapes[layer] != (head_dim, groups) for layer in set(shapes) - full):
        raise RegistryError(f"{_G4} per_layer_config {overrides} is not one shape for all full-attention layers and "
                            "none for the sliding ones")
    return {"global_kv_channels": global_shape[0] if global_shape[0] != head_dim else None,
            "global_num_query_groups": global_shape[1] if global_shape[1] != groups else None}


def per_kind_rope(hf: Dict[str, Any], types: List[str], name: str = _G4,
                  defaults: Dict[str, Dict[str, Any]] = GEMMA4_DEFAULT_ROPE) -> Dict[str, Any]:
    """RoPE kwargs from HF's per-kind ``rope_parameters`` (Gemma4, LFM3): the full layers' (default, or
    proportional: ``--rope-scaling-type proportional`` with its partial_rotary_factor and factor) and the sliding
    layers' base (default RoPE only); ``defaults`` stand for an absent entry."""
    params = hf.get("rope_parameters") or defaults
    full = params.get("full_attention") or defaults["full_attention"]
    sliding = params.get("sliding_attention") or defaults["sliding_attention"]
    if "sliding_attention" in types and sliding.get("rope_type", "default") != "default":
        raise RegistryError(f"{name} rope_parameters['sliding_attention'] {sliding} is not supported (default RoPE)")
    out: Dict[str, Any] = {"rotary_base": float(full["rope_theta"]), "local_rotary_base": float(sliding["rope_theta"])}
    kind = full.get("rope_type", "default")
    if kind == "proportional":
        out.update(rope_scaling_type="proportional", rotary_percent=float(full.get("partial_rotary_factor", 1.0)),
                   rope_scaling_factor=float(full.get("factor", 1.0)))
    elif kind != "default":
        raise RegistryError(f"{name} rope_parameters['full_attention'] rope_type {kind!r} is not supported "
                            "(default, proportional)")
    return out


def per_kind_rope_hf(cfg: TransformerConfig, name: str = _G4) -> Dict[str, Dict[str, Any]]:
    """The inverse of :func:`per_kind_rope`: HF's ``rope_parameters`` per layer kind."""
    if cfg.rope_scaling_type not in (None, "proportional") or (cfg.rope_scaling_type is None and cfg.rotary_percent != 1):
        raise RegistryError(f"{name} full layers use default or proportional RoPE (--rope-scaling-type proportional "
                            "for a --rotary-percent below 1)")
    local = cfg.local_rotary_base if cfg.local_rotary_base is not None else cfg.rotary_base
    full: Dict[str, Any] = {"rope_type": "default", "rope_theta": cfg.rotary_base}
    if cfg.rope_scaling_type == "proportional":
        full = {**full, "rope_type": "proportional", "partial_rotary_factor": cfg.rotary_percent}
        if cfg.rope_scaling_factor != 1.0:
            full["factor"] = cfg.rope_scaling_factor
    return {"sliding_attention": {"rope_type": "default", "rope_theta": local}, "full_attention": full}


def _gemma4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Gemma4 text: Gemma3's sandwich layer with plain RMSNorm weights, softmax scale 1, a weightless RMSNorm on V,
    a scalar per layer output, sliding layers with their own RoPE base (the last layer is always full)."""
    hf = {**GEMMA4_DEFAULTS, **hf}
    _gemma4_refuse_unmodelled(hf)
    layers = int(hf["num_hidden_layers"])
    types = list(hf.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                            for i in range(layers)])
    types[-1] = "full_attention"  # as transformers forces
    windows = _window_layers(types, hf["sliding_window"], _G4)
    rope, shape = per_kind_rope(hf, types), _gemma4_global_shape(hf, types)
    if not windows["sliding_window"]:
        rope["local_rotary_base"] = None
        if any(value is not None for value in shape.values()) or hf.get("attention_k_eq_v", False):
            raise RegistryError(f"{_G4} without sliding layers: a full-attention shape of its own (per_layer_config, "
                                "global_head_dim, attention_k_eq_v) is not supported")
    cap = hf.get("final_logit_softcapping")
    out = {**_common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS + ("hidden_act",)}), **windows,
           **rope, **shape,
           "global_attention_k_eq_v": bool(hf.get("attention_k_eq_v", False)) and bool(windows["sliding_window"]),
           "qk_norm": "per_head", "post_norm": True, "input_embeds_norm": True, "softmax_scale": 1.0,
           "value_norm": True, "layer_scalar": True, "output_logit_softcapping": float(cap) if cap else None,
           "untie_embeddings_and_output_weights": not hf["tie_word_embeddings"]}
    if hf.get("attention_bias", False):  # q/k/v and o
        out.update(add_qkv_bias=True, add_dense_bias=True)
    return out


def _gemma4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    wanted = dict(normalization="RMSNorm", apply_layernorm_1p=False, qk_norm="per_head", post_norm=True,
                  input_embeds_norm=True, softmax_scale=1.0, value_norm=True, layer_scalar=True,
                  rope_interleaved=False, no_rope_layers=())
    wrong = sorted(key for key, value in wanted.items() if getattr(cfg, key) != value)
    if cfg.activation not in ("geglu", "geglu_tanh"):  # a gated GELU, exact or tanh
        wrong.append("activation")
    if wrong or cfg.add_bias_linear or cfg.add_mlp_bias or cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError(f"{_G4} needs {wanted} and biases on q/k/v and o together or none; differs in {wrong}")
    types = _layer_types(cfg)
    if types[-1] != "full_attention":
        raise RegistryError(f"{_G4} needs the last layer to attend fully (--full-attention-layers)")
    rope_parameters = per_kind_rope_hf(cfg)
    if cfg.global_num_query_groups is not None and not cfg.global_attention_k_eq_v:
        raise RegistryError(f"{_G4} sets the full layers' KV heads only with attention_k_eq_v "
                            "(--global-num-query-groups needs --global-attention-k-eq-v)")
    out = {k: v for k, v in _common_hf_config(cfg).items() if k not in ROPE_KEYS + ("hidden_act",)}
    shape = {"head_dim": cfg.global_kv_channels or cfg.kv_channels}
    if cfg.global_num_query_groups is not None:
        shape["num_key_value_heads"] = cfg.global_num_query_groups
    return {**out, "hidden_activation": _activation_to_hf(cfg), "layer_types": types,
            "sliding_window": cfg.sliding_window or GEMMA4_DEFAULTS["sliding_window"],
            "rope_parameters": rope_parameters,
            "per_layer_config": {str(i): dict(shape) for i, kind in enumerate(types) if kind == "full_attention"},
            "final_logit_softcapping": cfg.output_logit_softcapping, "attention_bias": cfg.add_qkv_bias,
            "attention_k_eq_v": cfg.global_attention_k_eq_v, "num_kv_shared_layers": 0,
            "use_double_wide_mlp": False}


def _gemma4_text_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Gemma4 text (``gemma4_text``, Gemma4ForCausalLM): the unified text decoder when it has neither per-layer
    inputs (``hidden_size_per_layer_input`` 0; transformers' default is 256) nor MoE blocks."""
    per_layer = int(hf.get("hidden_size_per_layer_input", 256) or 0)
    if per_layer:
        raise RegistryError(f"gemma4_text hidden_size_per_layer_input={per_layer} (per-layer input embeddings) is "
                            "not supported")
    if hf.get("enable_moe_block", False):
        raise RegistryError("gemma4_text enable_moe_block=True (a MoE block beside the MLP) is not supported")
    return _gemma4_config({"max_position_embeddings": 131072, "sliding_window": 512, **hf})


def _gemma4_text_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_gemma4_hf_config(cfg), "hidden_size_per_layer_input": 0, "enable_moe_block": False}


MODERNBERT_DECODER = register(Family("modernbert_decoder", "modernbert-decoder", "ModernBertDecoderForCausalLM",
                                     _modernbert_decoder_config, _modernbert_decoder_hf_config,
                                     MODERNBERT_DECODER_WEIGHTS), "modernbert-decoder")
GEMMA4_UNIFIED = register(Family("gemma4_unified", _G4, "Gemma4UnifiedForCausalLM", _gemma4_config, _gemma4_hf_config,
                                 GEMMA4_WEIGHTS))
GEMMA4_TEXT = register(Family("gemma4", "gemma4_text", "Gemma4ForCausalLM", _gemma4_text_config, _gemma4_text_hf_config,
                              GEMMA4_WEIGHTS), "gemma4_text")

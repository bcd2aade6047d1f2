"""Mixture-of-experts variants of covered decoders: EXAONE-MoE (``exaone_moe``), Cohere2-MoE (``cohere2_moe``)
and MiniCPM5-MoE (``minicpm5_moe``).

Each keeps the attention and layer of a covered family and swaps its MLP for an MoE layer; the checkpoints keep
one tensor per expert (``mlp.experts.{e}.gate_proj/up_proj/down_proj``, stacked by the "stack_experts_gated" /
"stack_experts" transforms), the router ``mlp.gate.weight`` and the shared expert
``mlp.shared_experts.{gate,up,down}_proj``. Leading dense layers (``mlp_layer_types``: a run of "dense" then
"sparse", or ``first_k_dense_replace``) are ``--first-k-dense-replace`` with the dense FFN's own size.

* ``exaone_moe`` (K-EXAONE): EXAONE 4's attention (per-head q/k RMSNorm, ``--qk-layernorm``; sliding-window
  layers from ``layer_types`` or every ``sliding_window_pattern``-th layer full, ``--full-attention-layers``;
  with a window only the sliding layers use RoPE, ``--no-rope-layers`` = the full ones) in a pre-norm layer
  (``input_layernorm``, ``post_attention_layernorm``: not EXAONE 4's post-only norms). DeepSeek-V3's router:
  sigmoid, ``e_score_correction_bias`` for the choice (``--moe-router-enable-expert-bias``), ``n_group`` /
  ``topk_group`` (a group scored by its best two), ``norm_topk_prob``, ``routed_scaling_factor``
  (``--moe-router-topk-scaling-factor``); ``num_shared_experts`` x ``moe_intermediate_size`` shared experts
  (``--moe-shared-expert-intermediate-size``). transformers saves the bias as ``mlp.e_score_correction_bias``
  (and also reads ``mlp.gate.e_score_correction_bias``, an alias here); the MTP layers (``mtp.*``), which
  transformers does not load, are left out.
* ``cohere2_moe``: Cohere2's parallel layer (one norm feeding attention and MLP, ``--parallel-residual
  --parallel-residual-shared-norm``): a LayerNorm without bias (``layer_norm_eps``) or, when ``rms_norm_eps`` is
  set, an RMSNorm; interleaved RoPE (``--rope-interleaved``) on the sliding-window layers, none on the
  full-attention ones, except that with ``prefix_dense_sliding_window_pattern`` 1 every dense layer uses RoPE;
  ``head_dim`` (128 by default); ``attention_bias`` on q/k/v and o; logits times ``logit_scale``
  (``--output-multiplier-scale``); tied by default. Router ``expert_selection_fn``: ``softmax`` over the top-k
  logits (Mixtral's, our default) or ``sigmoid`` of the top-k logits, renormalised with ``norm_topk_prob``
  (``--moe-router-score-function sigmoid``, no expert bias). Experts of ``intermediate_size``; dense layers of
  ``prefix_dense_intermediate_size`` (``--ffn-hidden-size``); ``num_shared_experts`` x ``intermediate_size``
  shared experts added with ``shared_expert_combination_strategy`` "sum", or "average" ``(routed + shared) / 2``:
  both halves times 0.5 (``--moe-router-topk-scaling-factor 0.5 --moe-shared-expert-scale 0.5``).
* ``minicpm5_moe``: Llama's attention with a sigmoid output gate per channel (``--attention-output-gate``;
  transformers' ``q_gate_proj`` is saved as ``q_proj``, per head ``[q_h; g_h]``, regrouped by the
  "qkv_output_gate" transform); ``attention_bias`` on q/gate/k/v and o; GLM-4.5's router (as ``exaone_moe``,
  bias ``mlp.gate.e_score_correction_bias``) with ``n_shared_experts``; RoPE base 5e6, ``head_dim`` 128 and two
  KV heads by default.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.families.cohere import _logit_scale
from mindspeed_llm.models.families import linear_attention  # noqa: F401 (registers "qkv_output_gate")
from mindspeed_llm.models.families.llama_like import _bias_places, _check_common, _no_extras
from mindspeed_llm.models.families.moe_common import (check_bias_router_hf, dense_run, group_routing_hf,
                                                      mlp_layer_types, per_expert_weights)
from mindspeed_llm.models.families.moe_sigmoid import (bias_router_weights, moe_sizes, moe_sizes_hf, scaling_factor,
                                                       scaling_factor_hf, shared_experts, shared_experts_hf,
                                                       sigmoid_router)
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, ROPE_KEYS, Family, RegistryError, WeightRule,
                                           _common_config, _common_hf_config, _layer, _layer_types, _rope_settings,
                                           _rope_to_hf, _window_layers, register, require_config)

MOE_KEYS = ("output_router_logits",)  # HF keys our config does not model, kept for the inverse


def _dense_layers(hf: Dict[str, Any], family: str, default: int) -> int:
    """The leading dense layers: ``mlp_layer_types`` (a run of "dense" then "sparse"), else
    ``first_k_dense_replace`` (``default`` when absent)."""
    layers = int(hf["num_hidden_layers"])
    first = hf.get("first_k_dense_replace")
    count = default if first is None else int(first)
    return dense_run(hf.get("mlp_layer_types") or mlp_layer_types(count, layers), layers, family)


def _expert_bias_router(hf: Dict[str, Any], family: str, experts_key: str) -> Dict[str, Any]:
    """DeepSeek-V3's router with its routed scaling factor, shared experts and leading dense layers."""
    return {**moe_sizes(hf), **sigmoid_router(hf, family, experts_key, norm_topk_prob=bool(hf["norm_topk_prob"])),
            "moe_router_topk_scaling_factor": scaling_factor(hf["routed_scaling_factor"])}


def _expert_bias_router_hf(cfg: TransformerConfig, family: str, experts_key: str, shared_key: str) -> Dict[str, Any]:
    check_bias_router_hf(cfg, family)
    return {**moe_sizes_hf(cfg), experts_key: cfg.num_experts, **group_routing_hf(cfg, family),
            "routed_scaling_factor": scaling_factor_hf(cfg), **shared_experts_hf(cfg, family, shared_key),
            "mlp_layer_types": mlp_layer_types(cfg.first_k_dense_replace, cfg.num_layers)}


# --------------------------------------------------------------------------- EXAONE-MoE (exaone_moe)

EXAONE_MOE_DEFAULTS = dict(rms_norm_eps=1e-5, sliding_window=4096, sliding_window_pattern=4, num_experts=64,
                           num_experts_per_tok=8, num_shared_experts=1, norm_topk_prob=True,
                           routed_scaling_factor=2.5, n_group=1, topk_group=1)


def _exaone_moe_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or as transformers derives them: every ``sliding_window_pattern``-th layer full."""
    layers = int(hf["num_hidden_layers"])
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    if hf["sliding_window"] is None:
        return ["full_attention"] * layers
    pattern = hf["sliding_window_pattern"]
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise RegistryError(f"exaone_moe sliding_window_pattern {pattern!r} without layer_types is not supported "
                            "(only an integer: every Nth layer full)")
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]


def _exaone_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """K-EXAONE: EXAONE 4's attention in a pre-norm layer, DeepSeek-V3's router; with a window, the full layers
    attend without RoPE."""
    hf = {**EXAONE_MOE_DEFAULTS, **hf}
    types = _exaone_moe_layer_types(hf)
    out = {**_common_config(hf), "qk_norm": "per_head", **_expert_bias_router(hf, "exaone_moe", "num_experts"),
           **shared_experts(hf, "exaone_moe", "num_shared_experts", int(hf["moe_intermediate_size"])),
           "first_k_dense_replace": _dense_layers(hf, "exaone_moe", 1)}
    if hf["sliding_window"] is None:  # every layer full, with RoPE
        return out
    _window_layers(types, hf["sliding_window"], "exaone_moe")  # refuses other layer types
    full = tuple(i for i, kind in enumerate(types) if kind == "full_attention")  # all of them: every layer NoPE
    return {**out, "sliding_window": int(hf["sliding_window"]), "full_attention_layers": full, "no_rope_layers": full}


def _exaone_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("exaone_moe", cfg, sliding_window=cfg.sliding_window)
    _no_extras("exaone_moe", cfg, "qk_norm", "no_rope_layers")
    if any(_bias_places(cfg)) or cfg.qk_norm != "per_head" or cfg.qk_layernorm_after_rope:
        raise RegistryError("exaone_moe needs per-head q/k norms before RoPE (--qk-layernorm) and no linear biases")
    full = tuple(i for i in range(cfg.num_layers) if cfg.layer_window(i) is None)
    expected = full if cfg.sliding_window is not None else ()
    if tuple(cfg.no_rope_layers) != expected:
        raise RegistryError(f"exaone_moe skips RoPE exactly on the full-attention layers when a window is set "
                            f"(--no-rope-layers {list(expected)}, not {list(cfg.no_rope_layers)})")
    # sliding_window_pattern is left as it was: transformers reads it only without layer_types
    return {**_common_hf_config(cfg), **_expert_bias_router_hf(cfg, "exaone_moe", "num_experts", "num_shared_experts"),
            "first_k_dense_replace": cfg.first_k_dense_replace, "sliding_window": cfg.sliding_window,
            "layer_types": _layer_types(cfg)}


def _exaone_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return LLAMA_WEIGHTS + bias_router_weights(cfg, bias="e_score_correction_bias")


EXAONE_MOE = register(Family("exaone_moe", "exaone_moe", "ExaoneMoeForCausalLM", _exaone_moe_config,
                             _exaone_moe_hf_config, LLAMA_WEIGHTS, preserved_keys=MOE_KEYS,
                             weights_for=_exaone_moe_weights,
                             hf_tensor_aliases=((r"\.mlp\.gate\.e_score_correction_bias$",
                                                 ".mlp.e_score_correction_bias"),),
                             unloaded_hf_prefixes=("mtp.",)), "exaone-moe", "k-exaone")


# --------------------------------------------------------------------------- Cohere2-MoE (cohere2_moe)

COHERE2_MOE_DEFAULTS = dict(head_dim=128, layer_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=10000.0,
                            sliding_window=4096, sliding_window_pattern=4, prefix_dense_sliding_window_pattern=1,
                            num_experts=8, num_experts_per_tok=2, num_shared_experts=0,
                            shared_expert_combination_strategy="average", expert_selection_fn="softmax",
                            norm_topk_prob=True)
COHERE2_MOE_LAYER = dict(parallel_residual=True, parallel_residual_shared_norm=True, rope_interleaved=True,
                         activation="swiglu", add_bias_linear=False, add_mlp_bias=False)


def _cohere2_moe_types(hf: Dict[str, Any], dense: int) -> List[str]:
    """``layer_types``, or as transformers derives them: the dense layers by their own pattern, then the rest."""
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    prefix, pattern = int(hf["prefix_dense_sliding_window_pattern"]), int(hf["sliding_window_pattern"])
    rest = int(hf["num_hidden_layers"]) - dense
    return (["sliding_attention" if (i + 1) % prefix else "full_attention" for i in range(dense)]
            + ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(rest)])


def _cohere2_moe_norm(hf: Dict[str, Any]) -> Dict[str, Any]:
    """An RMSNorm when ``rms_norm_eps`` is set, else Cohere's LayerNorm without bias."""
    if hf.get("rms_norm_eps") is not None:
        return {"normalization": "RMSNorm", "norm_epsilon": float(hf["rms_norm_eps"])}
    return {"normalization": "LayerNorm", "norm_epsilon": float(hf["layer_norm_eps"]), "layernorm_bias": False}


def _cohere2_moe_router(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Top-k of the router logits weighed by their softmax, or by their sigmoids (renormalised when
    ``norm_topk_prob``); shared experts of ``num_shared_experts`` x ``intermediate_size`` added as they are."""
    selection, shared = hf["expert_selection_fn"], int(hf["num_shared_experts"] or 0)
    out = dict(num_experts=int(hf["num_experts"]), moe_router_topk=int(hf["num_experts_per_tok"]),
               moe_ffn_hidden_size=int(hf["intermediate_size"]),
               moe_shared_expert_intermediate_size=shared * int(hf["intermediate_size"]) or None)
    if selection == "softmax":
        out.update(moe_router_score_function="softmax", moe_router_pre_softmax=False, norm_topk_prob=False)
    elif selection == "sigmoid":
        out.update(moe_router_score_function="sigmoid", norm_topk_prob=bool(hf["norm_topk_prob"]))
    else:
        raise RegistryError(f"cohere2_moe expert_selection_fn {selection!r} is not supported (softmax, sigmoid)")
    strategy = hf["shared_expert_combination_strategy"]
    if strategy not in ("sum", "average"):
        raise RegistryError(f"cohere2_moe shared_expert_combination_strategy={strategy!r} is not supported (sum, "
                            "average)")
    if shared and strategy == "average":  # (routed + shared) / 2: both halves times 0.5
        out.update(moe_router_topk_scaling_factor=0.5, moe_shared_expert_scale=0.5)
    return out


def _cohere2_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Cohere2-MoE: Cohere2's parallel layer with a top-k MoE MLP after the dense prefix layers."""
    hf = {**COHERE2_MOE_DEFAULTS, **hf}
    if hf.get("use_qk_norm", False):
        raise RegistryError("cohere2_moe use_qk_norm=True is not supported (Cohere2-MoE has no q/k norms)")
    if hf.get("hidden_act", "silu") != "silu":
        raise RegistryError(f"cohere2_moe hidden_act {hf['hidden_act']!r} is not supported (only silu)")
    dense = _dense_layers(hf, "cohere2_moe", 0)
    types = _cohere2_moe_types(hf, dense)
    window = hf["sliding_window"]
    windows = _window_layers(types, window, "cohere2_moe") if window else {"sliding_window": None,
                                                                          "full_attention_layers": ()}
    forced = int(hf["prefix_dense_sliding_window_pattern"]) == 1  # every dense layer rotates
    rope = [(kind == "sliding_attention" and window is not None) or (i < dense and forced)
            for i, kind in enumerate(types)]
    bias = bool(hf.get("attention_bias", False))
    common = _common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS + ("rms_norm_eps",)})
    return {**common, **COHERE2_MOE_LAYER, **_cohere2_moe_norm(hf), **_rope_settings(hf), **windows,
            "ffn_hidden_size": int(hf.get("prefix_dense_intermediate_size") or hf["intermediate_size"]),
            "add_qkv_bias": bias, "add_dense_bias": bias,
            "no_rope_layers": tuple(i for i, on in enumerate(rope) if not on),
            **_cohere2_moe_router(hf), "first_k_dense_replace": dense, **_logit_scale(hf, "cohere2_moe", 0.0625)}


def _cohere2_moe_rope_hf(cfg: TransformerConfig) -> int:
    """``prefix_dense_sliding_window_pattern``: 1 when the dense layers all rotate (transformers then forces RoPE
    on them), 0 when only their sliding layers do (any value but 1: ``layer_types`` is written, so transformers
    reads this only for that choice)."""
    sliding = {i for i in range(cfg.num_layers) if cfg.layer_window(i) is not None}
    rotated = set(range(cfg.num_layers)) - set(cfg.no_rope_layers)
    if cfg.position_embedding_type == "rope":
        for pattern, extra in ((1, set(range(cfg.first_k_dense_replace))), (0, set())):
            if rotated == sliding | extra:
                return pattern
    raise RegistryError(f"cohere2_moe uses RoPE on its sliding-window layers (and, optionally, every dense layer) "
                        f"only; --no-rope-layers {list(cfg.no_rope_layers)} does not match")


def _cohere2_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, "cohere2_moe", "--parallel-residual --parallel-residual-shared-norm --rope-interleaved "
                   "--swiglu", **COHERE2_MOE_LAYER, qk_norm="none", rotary_percent=1.0,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_layer_freq=1, moe_expert_capacity_factor=None,
                   shared_expert_gate=False)
    _no_extras("cohere2_moe", cfg, "parallel_residual", "output_multiplier_scale", "no_rope_layers")
    if cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError("cohere2_moe attention_bias puts biases on q/k/v and o together: set both "
                            "--add-qkv-bias and --add-dense-bias, or neither")
    softmax = cfg.moe_router_score_function == "softmax"
    if cfg.moe_router_score_function not in ("softmax", "sigmoid") or (softmax and (cfg.moe_router_pre_softmax
                                                                                    or cfg.norm_topk_prob)):
        raise RegistryError("cohere2_moe routes by the top-k logits: their softmax (no --moe-router-pre-softmax, "
                            "--norm-topk-prob) or their sigmoids (--moe-router-score-function sigmoid)")
    shared = cfg.moe_shared_expert_intermediate_size or 0
    if shared % cfg.moe_expert_ffn_hidden_size:
        raise RegistryError(f"cohere2_moe shared experts are num_shared_experts x intermediate_size; "
                            f"--moe-shared-expert-intermediate-size {shared} is not a multiple of "
                            f"{cfg.moe_expert_ffn_hidden_size}")
    rms = cfg.normalization == "RMSNorm"
    if not rms and cfg.layernorm_bias:
        raise RegistryError("cohere2_moe's LayerNorm has no bias: it needs --no-layernorm-bias")
    out = {k: v for k, v in _common_hf_config(cfg).items() if k not in ("rms_norm_eps",) + ROPE_KEYS}
    return {**out, **_rope_to_hf(cfg), "rms_norm_eps": cfg.norm_epsilon if rms else None,
            "layer_norm_eps": 1e-5 if rms else cfg.norm_epsilon, "attention_bias": cfg.add_qkv_bias,
            "logit_scale": cfg.output_multiplier_scale or 1.0, "intermediate_size": cfg.moe_expert_ffn_hidden_size,
            "prefix_dense_intermediate_size": cfg.ffn_hidden_size, "num_experts": cfg.num_experts,
            "num_experts_per_tok": cfg.moe_router_topk, "expert_selection_fn": cfg.moe_router_score_function,
            "norm_topk_prob": cfg.norm_topk_prob if not softmax else True,
            "num_shared_experts": shared // cfg.moe_expert_ffn_hidden_size,
            "shared_expert_combination_strategy": _cohere2_moe_combination(cfg), "sliding_window": cfg.sliding_window,
            "layer_types": _layer_types(cfg), "prefix_dense_sliding_window_pattern": _cohere2_moe_rope_hf(cfg),
            "mlp_layer_types": mlp_layer_types(cfg.first_k_dense_replace, cfg.num_layers)}


def _cohere2_moe_combination(cfg: TransformerConfig) -> str:
    """``shared_expert_combination_strategy``: "average" is both halves times 0.5, "sum" neither scaled."""
    scales = (cfg.moe_router_topk_scaling_factor, cfg.moe_shared_expert_scale)
    if scales == (0.5, 0.5) and cfg.moe_shared_expert_intermediate_size:
        return "average"
    if scales != (None, None):
        raise RegistryError("cohere2_moe adds the routed and shared experts (sum) or averages them (average: "
                            "--moe-router-topk-scaling-factor 0.5 with --moe-shared-expert-scale 0.5); drop the scales "
                            "or set both to 0.5")
    return "sum"


def _cohere2_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    shared = (_layer("mlp.shared_experts.linear_fc1.weight",
                     ["mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"], "fuse_rows"),
              _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_experts.down_proj.weight"]))
    return LLAMA_WEIGHTS + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") + shared


COHERE2_MOE = register(Family("cohere2_moe", "cohere2_moe", "Cohere2MoeForCausalLM", _cohere2_moe_config,
                              _cohere2_moe_hf_config, LLAMA_WEIGHTS, preserved_keys=MOE_KEYS,
                              weights_for=_cohere2_moe_weights), "cohere2-moe")


# --------------------------------------------------------------------------- MiniCPM5-MoE (minicpm5_moe)

MINICPM5_MOE_DEFAULTS = dict(rope_theta=5_000_000.0, head_dim=128, num_key_value_heads=2, n_routed_experts=160,
                             num_experts_per_tok=16, n_shared_experts=1, norm_topk_prob=True,
                             routed_scaling_factor=3.66, n_group=1, topk_group=1)
MINICPM5_GATED_QKV = (
    _layer("self_attention.linear_qkv.weight",
           ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"], "qkv_output_gate"),
    _layer("self_attention.linear_qkv.bias",
           ["self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"], "qkv_output_gate"),
)


def _minicpm5_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """MiniCPM5-MoE: Llama attention with a per-channel sigmoid output gate, GLM-4.5's MoE."""
    hf = {**MINICPM5_MOE_DEFAULTS, **hf}
    if hf.get("use_gated_attention", True) is False:
        raise RegistryError("minicpm5_moe use_gated_attention=False is not supported (transformers refuses it too)")
    partial = (hf.get("rope_parameters") or {}).get("partial_rotary_factor", hf.get("partial_rotary_factor"))
    if partial not in (None, 1, 1.0):
        raise RegistryError(f"minicpm5_moe partial_rotary_factor={partial!r} is not supported (its RoPE rotates whole "
                            "heads)")
    bias = bool(hf.get("attention_bias", False))
    return {**_common_config(hf), "add_qkv_bias": bias, "add_dense_bias": bias, "attention_output_gate": True,
            **_expert_bias_router(hf, "minicpm5_moe", "n_routed_experts"),
            **shared_experts(hf, "minicpm5_moe", "n_shared_experts", int(hf["moe_intermediate_size"])),
            "first_k_dense_replace": _dense_layers(hf, "minicpm5_moe", 1)}


def _minicpm5_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("minicpm5_moe", cfg)
    _no_extras("minicpm5_moe", cfg)
    require_config(cfg, "minicpm5_moe", "--attention-output-gate", attention_output_gate=True,
                   attention_output_gate_per_head=False)
    qkv, dense, mlp = _bias_places(cfg)
    if qkv != dense or mlp:
        raise RegistryError("minicpm5_moe has one attention_bias for q/gate/k/v and o, and no MLP bias")
    return {**_common_hf_config(cfg), "attention_bias": qkv,
            **_expert_bias_router_hf(cfg, "minicpm5_moe", "n_routed_experts", "n_shared_experts")}


def _minicpm5_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return MINICPM5_GATED_QKV + LLAMA_WEIGHTS + bias_router_weights(cfg)


MINICPM5_MOE = register(Family("minicpm5_moe", "minicpm5_moe", "MiniCPM5MoeForCausalLM", _minicpm5_moe_config,
                               _minicpm5_moe_hf_config, MINICPM5_GATED_QKV + LLAMA_WEIGHTS, preserved_keys=MOE_KEYS,
                               weights_for=_minicpm5_moe_weights), "minicpm5-moe")

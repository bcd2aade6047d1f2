"""Qwen3-MoE-style mixtures of experts with sliding-window layers: Mellum (``mellum``, JetBrains' Mellum2), Flint
(``flint``, Recursive's) and Kolibri-1 (``kolibri1``, Aleph Alpha's).

Both are Llama's layout with per-head q/k RMSNorms before RoPE (``--qk-layernorm``), ``attention_bias`` on
q/k/v and o (``--add-qkv-bias --add-dense-bias``), and MoE layers of experts saved one tensor per expert
(``mlp.experts.{e}.{gate,up,down}_proj``, stacked into our fused experts) with the router ``mlp.gate``.

Mellum (MindSpeed-style alias ``mellum2``), what each HF key maps to:

* ``layer_types`` with ``sliding_window``: ``--sliding-window`` with ``--sliding-window-pattern`` (every Nth
  layer full) or ``--full-attention-layers`` (default: every layer full);
* ``rope_parameters``: one dict per layer type. ``full_attention``'s (any rope type our RoPE has) is the
  model's RoPE; ``sliding_attention``'s plain base is ``--local-rotary-base`` (a scaled one is refused).
  Without full-attention layers the sliding layers' dict is the model's RoPE. ``partial_rotary_factor`` is
  refused: transformers' Mellum computes a shorter table but rotates the whole head (it fails);
* ``mlp_layer_types``: a leading run of ``dense`` layers (``--first-k-dense-replace``, dense FFN
  ``intermediate_size``), then ``sparse`` ones;
* the router: softmax over all experts then top-k (``--moe-router-pre-softmax``), ``norm_topk_prob``
  (``--norm-topk-prob``); ``num_experts`` (saved ``num_local_experts``), ``num_experts_per_tok``,
  ``moe_intermediate_size``; ``router_aux_loss_coef`` is ``--moe-aux-loss-coeff``;
* ``num_mtp_layers`` (saved ``num_nextn_predict_layers``): transformers does not build the MTP layers and drops
  their ``mtp.*`` tensors on load; so does the converter (kept in config.json).

Flint, what each HF key maps to:

* ``layer_types`` (default: full attention on layers 0 and 1, every 4th layer from 1 and the last layer) with
  ``sliding_window``: as Mellum's; only the sliding layers rotate q/k, the full-attention layers are NoPE
  (``--no-rope-layers``);
* ``self_attn.softmax_offset`` (transformers' ``sinks``, the name it also reads): a learned extra softmax logit
  per head (``--softmax-type learnable``, our ``softmax_offset``);
* ``mlp_only_layers`` (default ``[0, 1]``): a leading run of dense layers (``--first-k-dense-replace``);
  ``decoder_sparse_step`` other than 1 is refused (as Qwen3-MoE's);
* the router: sigmoid scores, top-k, no selection bias (``--moe-router-score-function sigmoid``), the top-k
  divided by their sum with ``norm_topk_prob`` (HF by the plain sum, ours by the sum + 1e-20);
* ``shared_expert_intermediate_size``: an ungated shared expert added in full
  (``--moe-shared-expert-intermediate-size``), tensors ``mlp.shared_expert.{gate,up,down}_proj``.

Flint's RMSNorm multiplies by its weight before casting back to the activation dtype (GPT-OSS's), ours after:
the same in fp32, one rounding apart in bf16. Its router weight and sinks are fp32 in transformers; ours keep
the model's dtype (the router's logits are fp32 either way).

Kolibri-1 (MindSpeed-style alias ``kolibri``) is Qwen3-MoE's attention without biases, what each HF key maps to:

* ``layer_types`` (default: every 5th layer full) with ``sliding_window``: EXAONE 4's attention,
  ``--sliding-window`` with ``--sliding-window-pattern`` or ``--full-attention-layers``, the full-attention
  layers NoPE (``--no-rope-layers``; every layer when none slides). ``sliding_window: null`` is refused
  (transformers' Kolibri-1 then fails building its sliding mask). ``rope_parameters``: one RoPE (any type ours
  has); ``partial_rotary_factor`` is refused (transformers' Kolibri-1 rotates the whole head);
* GLM-4's sandwich norms (``--post-norm``): ``post_self_attn_layernorm`` and ``post_mlp_layernorm``, saved as
  ``post_attn_norm`` and ``post_ffn_norm`` (the in-memory names are read too);
* every layer MoE (no dense layer; ``--ffn-hidden-size`` is ``moe_intermediate_size``), experts saved one tensor
  per expert; ``num_experts`` (saved ``num_local_experts``), ``num_experts_per_tok``, ``moe_intermediate_size``;
* the router (``mlp.gate``): the top-k of the raw logits + ``e_score_correction_bias``, weighed by
  sigmoid(logit) (``--moe-router-score-function sigmoid --moe-router-enable-expert-bias
  --moe-router-expert-bias-on-logits``), divided by their sum with ``norm_topk_prob`` (default off); the bias,
  our ``mlp.router.expert_bias``, is saved as ``moe.router.expert_bias`` (in memory
  ``mlp.gate.e_score_correction_bias``). Its config has no aux-loss key: ``--moe-aux-loss-coeff`` is not
  exported;
* ``shared_expert_intermediate_size``: an ungated shared expert added in full
  (``--moe-shared-expert-intermediate-size``), tensors ``mlp.shared_experts.{gate,up,down}_proj``; zero is refused.

Its router computes the logits in fp32 from an fp32 copy of the weight; ours runs the linear in the model dtype
(``--moe-router-dtype fp32`` matches it in bf16).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, ROPE_KEYS, Family, RegistryError, WeightRule, _checked,
                                           _common_config, _common_hf_config, _layer, _layer_types, _layer_windows,
                                           _rope_settings, _rope_to_hf, register, require_config)
from mindspeed_llm.models.families.llama_like import _check_common, _no_extras
from mindspeed_llm.models.families.moe_common import (DENSE_ATTENTION_WEIGHTS, _moe_common, dense_run, mlp_layer_types,
                                                      per_expert_weights)
from mindspeed_llm.models.families.moe_softmax import _attention_bias_hf, _attention_biases, _dense_layers

SLIDING, FULL = "sliding_attention", "full_attention"
# Routing options neither family's HF config can express (their defaults)
NO_ROUTING_EXTRAS = dict(moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                         moe_router_enable_expert_bias=False, moe_layer_freq=1, moe_expert_capacity_factor=None,
                         shared_expert_gate=False)


# --------------------------------------------------------------------------- shared helpers


def _windows(types: Sequence[str], window: Optional[int], family: str, layers: int) -> Dict[str, Any]:
    """``--sliding-window`` and its full layers from ``layer_types``; sliding layers need a window."""
    if SLIDING in types and not window:
        raise RegistryError(f"{family} has sliding_attention layers but no sliding_window")
    return _layer_windows(types, int(window) if window else None, layers)


def _experts(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """Experts, top-k, expert FFN ``moe_intermediate_size`` and the aux-loss coefficient."""
    return {**_moe_common(hf, family, "num_experts"), "moe_ffn_hidden_size": int(hf["moe_intermediate_size"])}


def _experts_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return {"num_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "moe_intermediate_size": cfg.moe_expert_ffn_hidden_size, "intermediate_size": cfg.ffn_hidden_size,
            "norm_topk_prob": cfg.norm_topk_prob, "router_aux_loss_coef": cfg.moe_aux_loss_coeff}


def _check_attention(cfg: TransformerConfig, family: str, *allowed: str) -> bool:
    """Qwen3-MoE's attention (per-head q/k norms before RoPE, SwiGLU, RMSNorm); the one ``attention_bias``."""
    _check_common(family, cfg, sliding_window=cfg.sliding_window, rotary_percent=cfg.rotary_percent)
    _no_extras(family, cfg, "qk_norm", *allowed)
    require_config(cfg, family, "--qk-layernorm", qk_norm="per_head", qk_layernorm_after_rope=False)
    if cfg.num_experts is None:
        raise RegistryError(f"{family} is an MoE family: needs --num-experts")
    return _attention_bias_hf(cfg, family)


def _without_rope_keys(out: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in out.items() if k not in ROPE_KEYS + ("partial_rotary_factor",)}


# --------------------------------------------------------------------------- Mellum

MELLUM = "mellum"
# MellumConfig's defaults for the keys a config.json may leave out
MELLUM_DEFAULTS: Dict[str, Any] = dict(head_dim=128, num_key_value_heads=4, intermediate_size=7168,
                                       max_position_embeddings=131072, sliding_window=1024, norm_topk_prob=True,
                                       num_experts_per_tok=8, router_aux_loss_coef=0.001, rms_norm_eps=1e-6,
                                       tie_word_embeddings=False)
MELLUM_DEFAULT_ROPE: Dict[str, Dict[str, Any]] = {FULL: {"rope_type": "default", "rope_theta": 500000.0},
                                                  SLIDING: {"rope_type": "default", "rope_theta": 10000.0}}


def _mellum_rope(hf: Dict[str, Any], types: Sequence[str]) -> Dict[str, Any]:
    """The full-attention layers' RoPE as ours, the sliding layers' plain base as ``--local-rotary-base``."""
    params = hf.get("rope_parameters") or MELLUM_DEFAULT_ROPE
    missing = sorted(kind for kind in set(types) if not isinstance(params.get(kind), dict))
    if missing:
        raise RegistryError(f"mellum rope_parameters lacks a dict for the layer types {missing} (one per type)")
    for kind in sorted(set(types)):
        if float(params[kind].get("partial_rotary_factor", 1.0)) != 1.0:
            raise RegistryError(f"mellum {kind} partial_rotary_factor={params[kind]['partial_rotary_factor']} is not "
                                "supported (transformers' Mellum rotates the whole head)")
    if FULL not in types:
        return _rope_settings({"rope_parameters": params[SLIDING]})
    out = _rope_settings({"rope_parameters": params[FULL]})
    if SLIDING not in types:
        return out
    local = params[SLIDING]
    kind = local.get("rope_type", local.get("type")) or "default"
    if kind != "default":
        raise RegistryError(f"mellum sliding_attention rope_type {kind!r} is not supported (a plain rope_theta, "
                            "--local-rotary-base)")
    return {**out, "local_rotary_base": float(local.get("rope_theta", 10000.0))}


def _mellum_rope_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    """``rope_parameters`` per layer type: ours on full layers, ``--local-rotary-base`` (or ours) on sliding ones."""
    rope = _rope_to_hf(cfg)
    full = {**(rope["rope_scaling"] or {"rope_type": "default"}), "rope_theta": cfg.rotary_base}
    sliding = dict(full) if cfg.local_rotary_base is None else \
        {"rope_type": "default", "rope_theta": cfg.local_rotary_base}
    return {"rope_parameters": {FULL: full, SLIDING: sliding}}


def _mellum_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Mellum: Qwen3-MoE attention with sliding-window layers and a RoPE base per layer type, pre-softmax routing,
    leading dense layers."""
    hf = {**MELLUM_DEFAULTS, **hf}
    layers = int(hf["num_hidden_layers"])
    types = list(hf.get("layer_types") or [FULL] * layers)
    dense = dense_run(hf.get("mlp_layer_types") or mlp_layer_types(0, layers), layers, MELLUM)
    without_rope = {k: v for k, v in hf.items() if k not in ROPE_KEYS}
    return {**_common_config(without_rope), **_mellum_rope(hf, types), **_attention_biases(hf),
            "qk_norm": "per_head", **_windows(types, hf.get("sliding_window"), MELLUM, layers), **_experts(hf, MELLUM),
            "moe_router_pre_softmax": True, "norm_topk_prob": bool(hf["norm_topk_prob"]),
            "first_k_dense_replace": dense}


def _mellum_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    bias = _check_attention(cfg, MELLUM, "local_rotary_base")
    require_config(cfg, MELLUM, rotary_percent=1.0, moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   moe_shared_expert_intermediate_size=None, **NO_ROUTING_EXTRAS)
    types = _layer_types(cfg)
    out = {**_without_rope_keys(_common_hf_config(cfg)), **_mellum_rope_hf(cfg), "attention_bias": bias,
           **_experts_hf(cfg), "layer_types": types,
           "mlp_layer_types": mlp_layer_types(cfg.first_k_dense_replace, cfg.num_layers)}
    return {**out, "sliding_window": cfg.sliding_window} if SLIDING in types else out


def _mellum_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Llama's attention and dense MLP rules (dense layers) plus the experts' (MoE layers)."""
    return LLAMA_WEIGHTS + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")


MELLUM_FAMILY = register(Family(MELLUM, MELLUM, "MellumForCausalLM", _mellum_config,
                                _checked(MELLUM, _mellum_config, _mellum_hf_config), LLAMA_WEIGHTS,
                                preserved_keys=("output_router_logits",), weights_for=_mellum_weights,
                                unloaded_hf_prefixes=("mtp.",)), "mellum2")


# --------------------------------------------------------------------------- Flint

FLINT = "flint"
# FlintConfig's defaults for the keys a config.json may leave out
FLINT_DEFAULTS: Dict[str, Any] = dict(head_dim=128, num_key_value_heads=4, intermediate_size=6144,
                                      max_position_embeddings=262144, sliding_window=513, norm_topk_prob=True,
                                      num_experts_per_tok=6, router_aux_loss_coef=0.0005, rms_norm_eps=1e-6,
                                      tie_word_embeddings=False, shared_expert_intermediate_size=1024,
                                      attention_bias=False)
FLINT_DENSE_LAYERS = [0, 1]  # FlintConfig's mlp_only_layers when unset


def flint_layer_types(layers: int) -> List[str]:
    """FlintConfig's default: full attention on layers 0 and 1, every 4th layer from 1 and the last layer."""
    return [FULL if i < 2 or i % 4 == 1 or i == layers - 1 else SLIDING for i in range(layers)]


def _flint_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Flint: Qwen3-MoE attention with sinks, sliding RoPE layers and NoPE full layers; sigmoid routing without
    bias plus an ungated shared expert; leading dense layers."""
    hf = {**FLINT_DEFAULTS, **hf}
    if hf.get("mlp_only_layers") is None:
        hf["mlp_only_layers"] = FLINT_DENSE_LAYERS
    layers = int(hf["num_hidden_layers"])
    types = list(hf.get("layer_types") or flint_layer_types(layers))
    windows = _windows(types, hf.get("sliding_window"), FLINT, layers)
    shared = int(hf["shared_expert_intermediate_size"] or 0)
    return {**_common_config(hf), **_attention_biases(hf), "qk_norm": "per_head", "softmax_type": "learnable",
            **windows, "no_rope_layers": tuple(i for i, kind in enumerate(types) if kind == FULL),
            **_experts(hf, FLINT), "moe_router_score_function": "sigmoid", "norm_topk_prob": bool(hf["norm_topk_prob"]),
            "moe_shared_expert_intermediate_size": shared or None, **_dense_layers(hf, FLINT)}


def _flint_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    bias = _check_attention(cfg, FLINT, "no_rope_layers")
    require_config(cfg, FLINT, moe_router_score_function="sigmoid", softmax_type="learnable", **NO_ROUTING_EXTRAS)
    types = _layer_types(cfg)
    full = tuple(i for i, kind in enumerate(types) if kind == FULL)
    if cfg.no_rope_layers != full:
        raise RegistryError(f"flint rotates exactly its sliding-window layers: needs --no-rope-layers {list(full)} "
                            f"(the full-attention layers), not {list(cfg.no_rope_layers)}")
    out = {**_common_hf_config(cfg), "attention_bias": bias, **_experts_hf(cfg), "layer_types": types,
           "shared_expert_intermediate_size": cfg.moe_shared_expert_intermediate_size or 0,
           "mlp_only_layers": list(range(cfg.first_k_dense_replace)), "decoder_sparse_step": 1}
    return {**out, "sliding_window": cfg.sliding_window} if cfg.sliding_window is not None else out


def _flint_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Llama's attention (plus the sinks) and dense MLP rules, the experts and the ungated shared expert."""
    shared = (_layer("mlp.shared_experts.linear_fc1.weight",
                     ["mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"], "fuse_rows"),
              _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_expert.down_proj.weight"]))
    return FLINT_WEIGHTS + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") + shared


FLINT_WEIGHTS = LLAMA_WEIGHTS + (_layer("self_attention.softmax_offset", ["self_attn.softmax_offset"]),)
FLINT_FAMILY = register(Family(FLINT, FLINT, "FlintForCausalLM", _flint_config,
                               _checked(FLINT, _flint_config, _flint_hf_config), FLINT_WEIGHTS,
                               preserved_keys=("output_router_logits",), weights_for=_flint_weights,
                               hf_tensor_aliases=((r"\.self_attn\.sinks$", ".self_attn.softmax_offset"),)))


# --------------------------------------------------------------------------- Kolibri-1

KOLIBRI1 = "kolibri1"
# Kolibri1Config's defaults for the keys a config.json may leave out
KOLIBRI1_DEFAULTS: Dict[str, Any] = dict(head_dim=128, num_key_value_heads=4, max_position_embeddings=262144,
                                         sliding_window=513, norm_topk_prob=False, num_experts_per_tok=6,
                                         rms_norm_eps=1e-6, tie_word_embeddings=False, moe_intermediate_size=512,
                                         shared_expert_intermediate_size=512)
KOLIBRI1_FULL_EVERY = 5  # Kolibri1Config's layer_types when unset: every 5th layer full, the others sliding
# Kolibri-1's router as ours: top-k of logits + expert bias, weighed by sigmoid(logit); no groups or scaling
KOLIBRI1_ROUTER = dict(moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
                       moe_router_expert_bias_on_logits=True)


def kolibri1_layer_types(layers: int) -> List[str]:
    """Kolibri1Config's default ``layer_types``: every 5th layer full attention, the others sliding."""
    return [FULL if (i + 1) % KOLIBRI1_FULL_EVERY == 0 else SLIDING for i in range(layers)]


def _kolibri1_windows(types: Sequence[str], window: Optional[int], layers: int) -> Dict[str, Any]:
    """EXAONE 4's attention pattern with a window: the sliding layers slide and rotate, the full layers are NoPE
    (every layer, when none slides). Without a window (EXAONE 4's RoPE on every layer) transformers' Kolibri-1
    fails: it builds the sliding mask on every forward."""
    if window is None or int(window) <= 0:
        raise RegistryError(f"{KOLIBRI1} sliding_window={window} is not supported (a positive window: transformers' "
                            "Kolibri-1 builds a sliding-window mask on every forward)")
    full = tuple(i for i, kind in enumerate(types) if kind == FULL)
    windows = _layer_windows(types, int(window), layers)
    if windows["sliding_window"] is None:  # no sliding layer: the window only switches RoPE off everywhere
        windows = {"sliding_window": int(window), "sliding_window_pattern": None, "full_attention_layers": full}
    return {**windows, "no_rope_layers": full}


def _kolibri1_experts(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Experts, top-k, their FFN (also ``--ffn-hidden-size``: no dense layer), the ungated shared expert."""
    experts = hf.get("num_experts", hf.get("num_local_experts", 384))  # transformers saves num_local_experts
    shared = int(hf["shared_expert_intermediate_size"] or 0)
    if shared <= 0:
        raise RegistryError(f"{KOLIBRI1} shared_expert_intermediate_size={shared} is not supported (every layer "
                            "has a shared expert; a zero-width one is saved as empty tensors)")
    moe_ffn = int(hf["moe_intermediate_size"])
    return dict(num_experts=int(experts), moe_router_topk=int(hf["num_experts_per_tok"]), moe_ffn_hidden_size=moe_ffn,
                ffn_hidden_size=moe_ffn, moe_shared_expert_intermediate_size=shared)


def _kolibri1_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Kolibri-1: EXAONE 4's attention (per-head q/k norms, NoPE full layers beside sliding ones) in GLM-4's
    sandwich-norm layer, every layer MoE: sigmoid router choosing by logits + bias, an ungated shared expert."""
    hf = {**KOLIBRI1_DEFAULTS, **hf}
    layers = int(hf["num_hidden_layers"])
    types = list(hf.get("layer_types") or kolibri1_layer_types(layers))
    out = _common_config({**hf, "intermediate_size": hf["moe_intermediate_size"]})
    if out.get("rotary_percent", 1.0) != 1.0:
        raise RegistryError(f"{KOLIBRI1} partial_rotary_factor={out['rotary_percent']} is not supported "
                            "(transformers' Kolibri-1 rotates the whole head)")
    return {**out, **_attention_biases({}), "qk_norm": "per_head", "post_norm": True,
            **_kolibri1_windows(types, hf.get("sliding_window"), layers), **_kolibri1_experts(hf), **KOLIBRI1_ROUTER,
            "norm_topk_prob": bool(hf["norm_topk_prob"])}


def _kolibri1_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if _check_attention(cfg, KOLIBRI1, "post_norm", "no_rope_layers"):
        raise RegistryError(f"{KOLIBRI1} has no linear biases; the config sets attention biases")
    require_config(cfg, KOLIBRI1, "--post-norm --moe-router-score-function sigmoid --moe-router-enable-expert-bias "
                   "--moe-router-expert-bias-on-logits, MoE in every layer with a shared expert",
                   rotary_percent=1.0, post_norm=True, moe_router_pre_softmax=False, first_k_dense_replace=0,
                   **{**NO_ROUTING_EXTRAS, **KOLIBRI1_ROUTER})
    if cfg.moe_shared_expert_intermediate_size is None:
        raise RegistryError(f"{KOLIBRI1} has a shared expert in every MoE layer: needs "
                            "--moe-shared-expert-intermediate-size")
    if cfg.sliding_window is None:
        raise RegistryError(f"{KOLIBRI1} needs --sliding-window (transformers' Kolibri-1 builds a sliding-window "
                            "mask on every forward; its full-attention layers are NoPE)")
    types = _layer_types(cfg)
    nope = tuple(i for i, kind in enumerate(types) if kind == FULL)
    if tuple(cfg.no_rope_layers) != nope:
        raise RegistryError(f"{KOLIBRI1} skips RoPE exactly on the full-attention layers when a window is set "
                            f"(--no-rope-layers {list(nope)}, not {list(cfg.no_rope_layers)})")
    out = {k: v for k, v in _common_hf_config(cfg).items() if k != "intermediate_size"}  # no dense MLP
    return {**out, "num_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "moe_intermediate_size": cfg.moe_expert_ffn_hidden_size, "norm_topk_prob": cfg.norm_topk_prob,
            "shared_expert_intermediate_size": cfg.moe_shared_expert_intermediate_size,
            "sliding_window": cfg.sliding_window, "layer_types": types}


# Tensor names as transformers saves Kolibri-1 (its conversion mapping, reversed); the in-memory names are read too
KOLIBRI1_NORMS = (_layer("post_self_attn_layernorm.weight", ["post_attn_norm.weight"]),
                  _layer("post_mlp_layernorm.weight", ["post_ffn_norm.weight"]))
KOLIBRI1_ALIASES = ((r"\.mlp\.gate\.e_score_correction_bias$", ".moe.router.expert_bias"),
                    (r"\.post_self_attn_layernorm\.", ".post_attn_norm."),
                    (r"\.post_mlp_layernorm\.", ".post_ffn_norm."))


def _kolibri1_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Llama's attention and norms, the sandwich norms, the experts, the router bias and the shared expert."""
    moe = (_layer("mlp.router.expert_bias", ["moe.router.expert_bias"]),
           _layer("mlp.shared_experts.linear_fc1.weight",
                  ["mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"], "fuse_rows"),
           _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_experts.down_proj.weight"]))
    return (DENSE_ATTENTION_WEIGHTS + KOLIBRI1_NORMS
            + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") + moe)


KOLIBRI1_FAMILY = register(Family(KOLIBRI1, KOLIBRI1, "Kolibri1ForCausalLM", _kolibri1_config,
                                  _checked(KOLIBRI1, _kolibri1_config, _kolibri1_hf_config),
                                  DENSE_ATTENTION_WEIGHTS + KOLIBRI1_NORMS, preserved_keys=("output_router_logits",),
                                  weights_for=_kolibri1_weights, hf_tensor_aliases=KOLIBRI1_ALIASES), "kolibri")

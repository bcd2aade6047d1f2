"""Softmax-routed mixture-of-experts families: Mixtral, Qwen3Moe, OLMoE, Qwen2Moe, GraniteMoe,
GraniteMoeShared, FlexOlmo, HunYuan-MoE, DBRX, PhiMoE; JetMoE is refused.

Every layer's MLP is an MoE layer (core/transformer/moe/); attention and norms reuse the dense families' flags.
Mixtral, Qwen-MoE, OLMoE, FlexOlmo, HunYuan-MoE and PhiMoE keep one tensor per expert (Mixtral:
``block_sparse_moe.experts.{e}.w1/w3/w2`` = gate/up/down); the "stack_experts_gated" transform stacks the
(gate, up) pairs into our ``mlp.experts.linear_fc1.weight`` [experts, 2 x ffn, h] and "stack_experts" the
downs into ``mlp.experts.linear_fc2.weight`` [experts, h, ffn]; ``block_sparse_moe.gate`` is the router.

* ``mixtral``: softmax over the experts, top-k, the k weights renormalised: the top-k softmax of the
  logits (Megatron's default, no ``--moe-router-pre-softmax``); ``router_aux_loss_coef`` is
  ``--moe-aux-loss-coeff`` (the loss only acts in training); ``router_jitter_noise`` is refused.
* ``qwen3_moe``: Qwen3's attention (per-head q/k norms); softmax over all experts then top-k
  (``--moe-router-pre-softmax``), ``norm_topk_prob`` (``--norm-topk-prob``); expert FFN
  ``moe_intermediate_size``; dense layers ``mlp_only_layers`` = the first k (``--first-k-dense-replace``,
  dense FFN ``intermediate_size``); ``decoder_sparse_step`` other than 1 is refused (HF counts
  ``(i + 1) % step``, Megatron's ``--moe-layer-freq`` ``i % freq``).
* ``qwen2_moe``: Qwen2's attention (q/k/v bias) and Qwen3Moe's routing, plus a shared expert of
  ``shared_expert_intermediate_size`` (``--moe-shared-expert-intermediate-size``) times
  ``sigmoid(shared_expert_gate(x))`` (``--shared-expert-gate``).
* ``olmoe``: q/k RMSNorms over all heads' channels (``--qk-layernorm-full-width``), ``clip_qkv``
  (``--qkv-clip``), pre-softmax routing with ``norm_topk_prob``.
* ``granitemoe``: Granite's multipliers (``--embedding-multiplier``, ``--residual-multiplier``,
  ``--softmax-scale`` = ``attention_multiplier``, ``--output-multiplier-scale`` = 1 / ``logits_scaling``),
  ``attention_bias`` on q/k/v and o (``--add-qkv-bias --add-dense-bias``), Mixtral's routing (softmax over
  the top-k logits). Experts are saved fused: ``block_sparse_moe.input_linear.weight`` [E, 2 ffn, h]
  (``[gate; up]`` rows, our ``linear_fc1`` layout) and ``output_linear.weight`` [E, h, ffn]; the router is
  ``block_sparse_moe.router.layer``.
* ``granitemoeshared``: GraniteMoe plus an ungated shared expert of ``shared_intermediate_size``
  (``--moe-shared-expert-intermediate-size``; 0: none), ``shared_mlp.input_linear`` = fused ``[gate; up]``.
* ``granitemoe_swa``: GraniteMoeShared with GraniteSWA's attention (sliding-window layers by ``layer_types``,
  learnable sinks, per-layer RoPE bases), its experts under transformers' ``gate_up_proj`` / ``down_proj`` names.
* ``flex_olmo``: Olmo2's attention and post-only norms (``--qk-layernorm --qk-layernorm-full-width
  --post-norm-only``) with OLMoE's routing (softmax over all experts, ``norm_topk_prob``).
* ``hunyuan_v1_moe``: HunYuan dense attention (q/k norms after RoPE, NTK-alpha RoPE) and pre-softmax
  routing with the top-k renormalised, plus an ungated shared expert; experts and the shared expert all
  of ``intermediate_size`` (transformers reads nothing else). Per-layer lists (``num_experts``,
  ``moe_topk``, ``num_shared_expert``, ``moe_intermediate_size``) are accepted when uniform.
* ``dbrx``: LayerNorm without bias (eps 1e-5, ``--no-layernorm-bias``), fused ``Wqkv`` ([q; k; v] rows)
  clamped by ``clip_qkv`` (``--qkv-clip``), pre-softmax routing, ``moe_normalize_expert_weights`` 1 (the
  top-k divided by their sum, ``--norm-topk-prob``) or None; experts fused 2-D, ``w1``/``v1``/``w2``
  [E x ffn, h] ("dbrx_experts_gated", "dbrx_experts_down": ``w2`` holds each expert's down projection
  transposed).
* ``phimoe``: LayerNorm with bias, q/k/v/o biases, optional ``lm_head`` bias (``--add-output-layer-bias``),
  sliding window, SparseMixer top-2 routing (``--moe-router-score-function sparsemixer``,
  ``router_jitter_noise`` = ``--moe-router-sparsemixer-eps``; exact in eval mode, see TransformerConfig).
* ``jetmoe``: refused. Its attention is a mixture of attention heads (each token routes to top-k query /
  output projection experts sharing one k/v projection), which the one decoder's attention cannot express.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, OLMO2_WEIGHTS, ROPE_KEYS, TRANSFORMS, Family,
                                           RegistryError, TensorContext, WeightRule, _common_config,
                                           _common_hf_config, _granite_scales, _granite_scales_hf, _layer,
                                           _reject_biases, _rope_settings, refuse, register, require_config)
from mindspeed_llm.models.families.llama_like import (HUNYUAN_WEIGHTS, _hunyuan_rope, _hunyuan_rope_to_hf, _refuse,
                                                      granite_swa_fields, granite_swa_hf_fields)
from mindspeed_llm.models.families.moe_common import (DENSE_ATTENTION_WEIGHTS, _moe_common, _moe_common_hf,
                                                      per_expert_weights)

# Routing options none of these families' HF configs can express (their defaults)
NO_ROUTING_EXTRAS = dict(moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                         moe_router_enable_expert_bias=False, moe_layer_freq=1, first_k_dense_replace=0,
                         moe_expert_capacity_factor=None, shared_expert_gate=False)


def _without_mlp(rules: Sequence[WeightRule]) -> Tuple[WeightRule, ...]:
    return tuple(rule for rule in rules if ".mlp." not in rule.ours)


def _attention_biases(hf: Dict[str, Any]) -> Dict[str, bool]:
    """HF ``attention_bias`` (q/k/v and o, the experts without) as our bias flags."""
    bias = bool(hf.get("attention_bias", False))
    return {"add_bias_linear": False, "add_qkv_bias": bias, "add_dense_bias": bias, "add_mlp_bias": False}


def _attention_bias_hf(cfg: TransformerConfig, family: str, mlp_bias: bool = False) -> bool:
    """The one HF ``attention_bias`` of ``cfg``; refuses biases HF cannot place (an MLP bias unless the family
    has its own ``mlp_bias`` key)."""
    qkv, dense = cfg.qkv_bias, cfg.add_bias_linear or cfg.add_dense_bias or bool(cfg.dense_bias_layers)
    if qkv != dense or (cfg.mlp_bias and not mlp_bias) or cfg.dense_bias_layers:
        what = "" if mlp_bias else " and no MLP bias"
        raise RegistryError(f"{family} has one attention_bias for q/k/v and o{what}; the config sets "
                            f"qkv bias={qkv}, output bias={dense}, MLP bias={cfg.mlp_bias}")
    return qkv


def _uniform(hf: Dict[str, Any], key: str, family: str, default: Any = None) -> Any:
    """``hf[key]``, or its one value when it is a per-layer list (a non-uniform list is refused)."""
    value = hf.get(key, default)
    if isinstance(value, (list, tuple)):
        if len(set(value)) != 1:
            raise RegistryError(f"{family} {key}={list(value)} differs by layer; only one value for all layers is "
                                "supported")
        value = value[0]
    return value


# --------------------------------------------------------------------------- Mixtral, Qwen3Moe, OLMoE, Qwen2Moe


def _mixtral_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + per_expert_weights(cfg, "block_sparse_moe", "w1", "w3", "w2", "gate")


def _mixtral_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_config(hf), "sliding_window": hf.get("sliding_window"),
            **_moe_common(hf, "mixtral", "num_local_experts")}


def _mixtral_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "mixtral")
    require_config(cfg, "mixtral", moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_shared_expert_intermediate_size=None,
                   moe_layer_freq=1, first_k_dense_replace=0, moe_expert_capacity_factor=None)
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "num_local_experts": cfg.num_experts,
            **_moe_common_hf(cfg)}


MIXTRAL = register(Family("mixtral", "mixtral", "MixtralForCausalLM", _mixtral_config, _mixtral_hf_config,
                          DENSE_ATTENTION_WEIGHTS, preserved_keys=("output_router_logits",),
                          weights_for=_mixtral_weights), "mixtral")


def _dense_layers(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """HF's ``mlp_only_layers`` / ``decoder_sparse_step`` as --first-k-dense-replace (a leading run only)."""
    step = int(hf.get("decoder_sparse_step", 1) or 1)
    if step != 1:
        raise RegistryError(f"{family} decoder_sparse_step={step} is not supported (only 1: every layer sparse)")
    dense = sorted(int(i) for i in (hf.get("mlp_only_layers") or []))
    if dense != list(range(len(dense))):
        raise RegistryError(f"{family} mlp_only_layers={dense} is not supported (only the first k layers, "
                            "--first-k-dense-replace)")
    return {"first_k_dense_replace": len(dense)} if dense else {}


def _pre_softmax_router(hf: Dict[str, Any], family: str, experts_key: str) -> Dict[str, Any]:
    """Softmax over all experts, top-k, optional renormalisation (Qwen-MoE, OLMoE)."""
    norm = bool(hf.get("norm_topk_prob", False))
    return {**_moe_common(hf, family, experts_key), "moe_router_pre_softmax": True, "norm_topk_prob": norm}


def _pre_softmax_router_hf(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    require_config(cfg, family, moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_layer_freq=1, moe_expert_capacity_factor=None)
    out = {**_moe_common_hf(cfg), "num_experts": cfg.num_experts, "norm_topk_prob": cfg.norm_topk_prob,
           "decoder_sparse_step": 1, "mlp_only_layers": list(range(cfg.first_k_dense_replace))}
    out.pop("router_jitter_noise")
    out["intermediate_size"] = cfg.ffn_hidden_size
    out["moe_intermediate_size"] = cfg.moe_expert_ffn_hidden_size
    return out


def _moe_layer_weights(cfg: TransformerConfig, block: str, gate: str, up: str, down: str,
                       router: str) -> Tuple[WeightRule, ...]:
    """Llama's attention and dense MLP rules (dense layers) plus per-expert rules (MoE layers): the
    converter uses the rules whose tensors a layer has."""
    return LLAMA_WEIGHTS + per_expert_weights(cfg, block, gate, up, down, router)


def _qwen3_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("attention_bias", False):
        raise RegistryError("qwen3_moe attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    if hf.get("use_sliding_window", False):
        raise RegistryError("qwen3_moe use_sliding_window=True is not supported yet; set it to false")
    kwargs = {**_common_config(hf), "qk_norm": "per_head", **_pre_softmax_router(hf, "qwen3_moe", "num_experts"),
              **_dense_layers(hf, "qwen3_moe")}
    kwargs["moe_ffn_hidden_size"] = int(hf["moe_intermediate_size"])
    return kwargs


def _qwen3_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "qwen3_moe")
    require_config(cfg, "qwen3_moe", moe_shared_expert_intermediate_size=None, sliding_window=None)
    return {**_common_hf_config(cfg), "attention_bias": False, "use_sliding_window": False,
            **_pre_softmax_router_hf(cfg, "qwen3_moe")}


def _qwen3_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return _moe_layer_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")


def _olmoe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("attention_bias", False):
        raise RegistryError("olmoe attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    clip = hf.get("clip_qkv")
    kwargs = {**_common_config(hf), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)), "qk_norm": "full_width",
              "qkv_clip": float(clip) if clip is not None else None,
              **_pre_softmax_router(hf, "olmoe", "num_experts")}
    return kwargs


def _olmoe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "olmoe")
    require_config(cfg, "olmoe", moe_shared_expert_intermediate_size=None, first_k_dense_replace=0,
                   qk_norm="full_width")
    out = {**_common_hf_config(cfg), "attention_bias": False, "clip_qkv": cfg.qkv_clip,
           **_pre_softmax_router_hf(cfg, "olmoe")}
    for key in ("decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size"):
        out.pop(key)
    out["intermediate_size"] = cfg.moe_expert_ffn_hidden_size
    return out


def _olmoe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")


QWEN3_MOE = register(Family("qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM", _qwen3_moe_config, _qwen3_moe_hf_config,
                            LLAMA_WEIGHTS, preserved_keys=("output_router_logits",),
                            weights_for=_qwen3_moe_weights), "qwen3-moe")
OLMOE = register(Family("olmoe", "olmoe", "OlmoeForCausalLM", _olmoe_config, _olmoe_hf_config, DENSE_ATTENTION_WEIGHTS,
                        preserved_keys=("output_router_logits",), weights_for=_olmoe_weights))


def _qwen2_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("use_sliding_window", False):
        raise RegistryError("qwen2_moe use_sliding_window=True is not supported yet; set it to false")
    kwargs = {**_common_config(hf), "add_qkv_bias": bool(hf.get("qkv_bias", True)),
              **_pre_softmax_router(hf, "qwen2_moe", "num_experts"), **_dense_layers(hf, "qwen2_moe"),
              "moe_shared_expert_intermediate_size": int(hf["shared_expert_intermediate_size"]),
              "shared_expert_gate": True}
    kwargs["moe_ffn_hidden_size"] = int(hf["moe_intermediate_size"])
    return kwargs


def _qwen2_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear:
        raise RegistryError("qwen2_moe has q/k/v biases at most; the config sets add_bias_linear")
    if cfg.moe_shared_expert_intermediate_size is None or not cfg.shared_expert_gate:
        raise RegistryError("qwen2_moe needs a gated shared expert (--moe-shared-expert-intermediate-size and "
                            "--shared-expert-gate)")
    require_config(cfg, "qwen2_moe", sliding_window=None)
    return {**_common_hf_config(cfg), "qkv_bias": cfg.add_qkv_bias, "use_sliding_window": False,
            "shared_expert_intermediate_size": cfg.moe_shared_expert_intermediate_size,
            **_pre_softmax_router_hf(cfg, "qwen2_moe")}


def _qwen2_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    shared = (_layer("mlp.shared_experts.linear_fc1.weight",
                     ["mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"], "fuse_rows"),
              _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_expert.down_proj.weight"]),
              _layer("mlp.shared_expert_gate", ["mlp.shared_expert_gate.weight"]))
    return _moe_layer_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") + shared


QWEN2_MOE = register(Family("qwen2_moe", "qwen2_moe", "Qwen2MoeForCausalLM", _qwen2_moe_config, _qwen2_moe_hf_config,
                            LLAMA_WEIGHTS, preserved_keys=("output_router_logits",),
                            weights_for=_qwen2_moe_weights), "qwen2-moe")

# --------------------------------------------------------------------------- GraniteMoe, GraniteMoeShared


def _granitemoe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GraniteMoe: Granite's scales and biases, Mixtral's routing."""
    kwargs = {**_common_config(hf), **_attention_biases(hf), **_granite_scales(hf),
              **_moe_common(hf, "granitemoe", "num_local_experts")}
    shared = int(hf.get("shared_intermediate_size", 0) or 0)
    if shared:
        kwargs["moe_shared_expert_intermediate_size"] = shared
    return kwargs


def _granite_moe_hf(cfg: TransformerConfig, family: str, windows: bool = False) -> Dict[str, Any]:
    """GraniteMoe's keys; ``windows``: the family has sliding-window layers (GraniteMoeSWA)."""
    require_config(cfg, family, moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   **({} if windows else {"sliding_window": None}), **NO_ROUTING_EXTRAS)
    return {**_common_hf_config(cfg), "attention_bias": _attention_bias_hf(cfg, family), **_granite_scales_hf(cfg),
            "num_local_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "intermediate_size": cfg.moe_expert_ffn_hidden_size, "router_aux_loss_coef": cfg.moe_aux_loss_coeff}


def _granitemoe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, "granitemoe", moe_shared_expert_intermediate_size=None)
    return _granite_moe_hf(cfg, "granitemoe")


def _granitemoeshared_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_granite_moe_hf(cfg, "granitemoeshared"),
            "shared_intermediate_size": cfg.moe_shared_expert_intermediate_size or 0}


GRANITEMOE_WEIGHTS = _without_mlp(LLAMA_WEIGHTS) + (
    _layer("mlp.router.weight", ["block_sparse_moe.router.layer.weight"]),
    _layer("mlp.experts.linear_fc1.weight", ["block_sparse_moe.input_linear.weight"]),  # [E, 2 ffn, h] [gate; up]
    _layer("mlp.experts.linear_fc2.weight", ["block_sparse_moe.output_linear.weight"]),  # [E, h, ffn]
    _layer("mlp.shared_experts.linear_fc1.weight", ["shared_mlp.input_linear.weight"]),  # [2 shared, h] [gate; up]
    _layer("mlp.shared_experts.linear_fc2.weight", ["shared_mlp.output_linear.weight"]),
)

def _granitemoe_swa_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GraniteMoeSWA: GraniteMoeShared's layers with GraniteSWA's attention (windows, sinks, per-layer bases)."""
    return {**_granitemoe_config({k: v for k, v in hf.items() if k != "layer_rope_theta"}),
            **granite_swa_fields(hf, "granitemoe_swa")}


def _granitemoe_swa_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_granite_moe_hf(cfg, "granitemoe_swa", windows=True),
            "shared_intermediate_size": cfg.moe_shared_expert_intermediate_size or 0,
            **granite_swa_hf_fields(cfg, "granitemoe_swa")}


# GraniteMoeSWA names its experts' fused tensors as transformers holds them (the same [E, 2 ffn, h] gate-then-up and
# [E, h, ffn] layouts as GraniteMoe's input_linear / output_linear) and its router weight directly
GRANITEMOE_SWA_WEIGHTS = _without_mlp(LLAMA_WEIGHTS) + (
    _layer("mlp.router.weight", ["block_sparse_moe.router.weight"]),
    _layer("mlp.experts.linear_fc1.weight", ["block_sparse_moe.experts.gate_up_proj"]),
    _layer("mlp.experts.linear_fc2.weight", ["block_sparse_moe.experts.down_proj"]),
    _layer("mlp.shared_experts.linear_fc1.weight", ["shared_mlp.input_linear.weight"]),
    _layer("mlp.shared_experts.linear_fc2.weight", ["shared_mlp.output_linear.weight"]),
    _layer("self_attention.softmax_offset", ["self_attn.sinks"]),
)

register(Family("granitemoe", "granitemoe", "GraniteMoeForCausalLM", _granitemoe_config, _granitemoe_hf_config,
                GRANITEMOE_WEIGHTS, preserved_keys=("output_router_logits",)))
register(Family("granitemoeshared", "granitemoeshared", "GraniteMoeSharedForCausalLM", _granitemoe_config,
                _granitemoeshared_hf_config, GRANITEMOE_WEIGHTS, preserved_keys=("output_router_logits",)))
register(Family("granitemoe_swa", "granitemoe_swa", "GraniteMoeSWAForCausalLM", _granitemoe_swa_config,
                _granitemoe_swa_hf_config, GRANITEMOE_SWA_WEIGHTS, preserved_keys=("output_router_logits",)))


# --------------------------------------------------------------------------- FlexOlmo


def _flex_olmo_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """FlexOlmo: Olmo2's attention and post-only norms, OLMoE's routing."""
    if hf.get("attention_bias", False):
        raise RegistryError("flex_olmo attention_bias=True is not supported (its experts have no biases)")
    return {**_common_config(hf), "qk_norm": "full_width", "post_norm_only": True,
            **_pre_softmax_router(hf, "flex_olmo", "num_experts")}


def _flex_olmo_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers:
        raise RegistryError("flex_olmo has no linear biases; the config sets q/k/v or output biases")
    if not (cfg.qk_norm == "full_width" and cfg.post_norm_only) or cfg.post_norm:
        raise RegistryError("flex_olmo needs --qk-layernorm --qk-layernorm-full-width --post-norm-only "
                            "(no --post-norm)")
    require_config(cfg, "flex_olmo", moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   moe_shared_expert_intermediate_size=None, sliding_window=None, **NO_ROUTING_EXTRAS)
    return {**_common_hf_config(cfg), "attention_bias": False, "num_experts": cfg.num_experts,
            "num_experts_per_tok": cfg.moe_router_topk, "intermediate_size": cfg.moe_expert_ffn_hidden_size,
            "norm_topk_prob": cfg.norm_topk_prob, "router_aux_loss_coef": cfg.moe_aux_loss_coeff}


def _flex_olmo_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return _without_mlp(OLMO2_WEIGHTS) + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")


register(Family("flex_olmo", "flex_olmo", "FlexOlmoForCausalLM", _flex_olmo_config, _flex_olmo_hf_config,
                _without_mlp(OLMO2_WEIGHTS), preserved_keys=("output_router_logits",),
                weights_for=_flex_olmo_weights), "flex-olmo", "flexolmo")


# --------------------------------------------------------------------------- HunYuan MoE

HUNYUAN_MOE = "hunyuan_v1_moe"


def _hunyuan_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """HunYuan-MoE: HunYuan dense attention, pre-softmax renormalised top-k, an ungated shared expert; the
    original checkpoints' switches transformers' model does not implement are refused."""
    _refuse(HUNYUAN_MOE, hf, use_cla=False, use_qk_norm=True, use_mixed_mlp_moe=True, moe_layer_num_skipped=0,
            mlp_bias=False, use_rotary_pos_emb=True)
    ffn = int(hf["intermediate_size"])
    for key, expected in (("num_shared_expert", 1), ("moe_intermediate_size", ffn)):
        value = _uniform(hf, key, HUNYUAN_MOE)
        if value is not None and int(value) != expected:
            raise RegistryError(f"{HUNYUAN_MOE} {key}={hf[key]!r} is not supported (transformers' model uses "
                                f"{expected}: one shared expert, experts of intermediate_size)")
    return {**_common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS}), **_attention_biases(hf),
              "qk_norm": "per_head", "qk_layernorm_after_rope": True, **_hunyuan_rope(hf, HUNYUAN_MOE),
              "num_experts": int(_uniform(hf, "num_experts", HUNYUAN_MOE)),
              "moe_router_topk": int(_uniform(hf, "moe_topk", HUNYUAN_MOE, 1)), "moe_ffn_hidden_size": ffn,
              "moe_router_pre_softmax": True, "norm_topk_prob": True,
              "moe_aux_loss_coeff": float(hf.get("router_aux_loss_coef", 0.0) or 0.0),
              "moe_shared_expert_intermediate_size": ffn}


def _hunyuan_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if not (cfg.qk_norm == "per_head" and cfg.qk_layernorm_after_rope):
        raise RegistryError(f"{HUNYUAN_MOE} needs --qk-layernorm --qk-layernorm-after-rope (per head)")
    ffn = cfg.moe_expert_ffn_hidden_size
    require_config(cfg, HUNYUAN_MOE, moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   norm_topk_prob=True, moe_shared_expert_intermediate_size=ffn, sliding_window=None,
                   rope_scaling_type=None, **NO_ROUTING_EXTRAS)
    out = {k: v for k, v in _common_hf_config(cfg).items() if k not in ROPE_KEYS}
    return {**out, **_hunyuan_rope_to_hf(cfg), "attention_bias": _attention_bias_hf(cfg, HUNYUAN_MOE),
            "intermediate_size": ffn, "num_experts": cfg.num_experts, "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
            "use_cla": False, "use_qk_norm": True, "use_mixed_mlp_moe": True, "pretraining_tp": 1,
            # per layer, as the published checkpoints write them
            "moe_topk": [cfg.moe_router_topk] * cfg.num_layers, "num_shared_expert": [1] * cfg.num_layers,
            "moe_intermediate_size": [ffn] * cfg.num_layers}


def _hunyuan_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    shared = (_layer("mlp.shared_experts.linear_fc1.weight",
                     ["mlp.shared_mlp.gate_proj.weight", "mlp.shared_mlp.up_proj.weight"], "fuse_rows"),
              _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_mlp.down_proj.weight"]))
    return (_without_mlp(HUNYUAN_WEIGHTS) + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj",
                                                                "gate.wg") + shared)


register(Family(HUNYUAN_MOE, HUNYUAN_MOE, "HunYuanMoEV1ForCausalLM", _hunyuan_moe_config, _hunyuan_moe_hf_config,
                _without_mlp(HUNYUAN_WEIGHTS), preserved_keys=("output_router_logits", "eod_token_id", "sep_token_id"),
                weights_for=_hunyuan_moe_weights), "hunyuan-moe", "hunyuan_moe")


# --------------------------------------------------------------------------- DBRX


def _dbrx_experts(tensor: torch.Tensor, ctx: TensorContext) -> torch.Tensor:
    """A fused 2-D expert tensor [E x ffn, h] as [E, ffn, h]."""
    return tensor.view(-1, ctx.config.moe_expert_ffn_hidden_size, tensor.shape[-1])


def _dbrx_experts_gated_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    gate, up = (_dbrx_experts(t, ctx) for t in tensors)  # w1, v1: [E, ffn, h] each
    return torch.cat([gate, up], dim=1)  # [E, 2 ffn, h], [gate; up] per expert


def _dbrx_experts_gated_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [part.reshape(-1, tensor.shape[-1]).contiguous() for part in tensor.chunk(2, dim=1)]  # w1, v1


def _dbrx_experts_down_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return _dbrx_experts(tensors[0], ctx).transpose(1, 2).contiguous()  # w2 [E x ffn, h] -> [E, h, ffn]


def _dbrx_experts_down_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor.transpose(1, 2).reshape(-1, tensor.shape[1]).contiguous()]  # [E, h, ffn] -> [E x ffn, h]


# DBRX's experts as fused 2-D tensors [E x ffn, h]: w1 (gate) and v1 (up) -> [E, 2 ffn, h]; w2 (down, transposed)
TRANSFORMS["dbrx_experts_gated"] = (_dbrx_experts_gated_to_ours, _dbrx_experts_gated_to_hf)
TRANSFORMS["dbrx_experts_down"] = (_dbrx_experts_down_to_ours, _dbrx_experts_down_to_hf)


def _dbrx_layer(ours: str, hf: Sequence[str], transform: str = "copy") -> WeightRule:
    return WeightRule("decoder.layers.{i}." + ours, tuple("transformer.blocks.{i}." + n for n in hf), transform)


DBRX_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("transformer.wte.weight",), "vocab"),
    _dbrx_layer("input_layernorm.weight", ["norm_attn_norm.norm_1.weight"]),
    _dbrx_layer("self_attention.linear_qkv.weight", ["norm_attn_norm.attn.Wqkv.weight"]),  # [q; k; v] rows
    _dbrx_layer("self_attention.linear_proj.weight", ["norm_attn_norm.attn.out_proj.weight"]),
    _dbrx_layer("pre_mlp_layernorm.weight", ["norm_attn_norm.norm_2.weight"]),
    _dbrx_layer("mlp.router.weight", ["ffn.router.layer.weight"]),
    _dbrx_layer("mlp.experts.linear_fc1.weight", ["ffn.experts.mlp.w1", "ffn.experts.mlp.v1"], "dbrx_experts_gated"),
    _dbrx_layer("mlp.experts.linear_fc2.weight", ["ffn.experts.mlp.w2"], "dbrx_experts_down"),
    WeightRule("decoder.final_layernorm.weight", ("transformer.norm_f.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)

DBRX_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; DBRX's config has no eps key


def _dbrx_rope_theta(hf: Dict[str, Any], attn: Dict[str, Any]) -> float:
    """transformers reads the top-level ``rope_parameters``/``rope_theta``; the original checkpoints keep
    the base in ``attn_config.rope_theta`` only. Both present and different is ambiguous: refused."""
    top = _rope_settings(hf) if any(key in hf for key in ROPE_KEYS) else None
    if top is not None and set(top) != {"rotary_base"}:
        raise RegistryError(f"dbrx rope scaling {hf.get('rope_parameters') or hf.get('rope_scaling')} is not supported")
    inner = attn.get("rope_theta")
    if top is not None and inner is not None and float(inner) != top["rotary_base"]:
        raise RegistryError(f"dbrx attn_config.rope_theta={inner} differs from rope_parameters' "
                            f"{top['rotary_base']}; set them equal")
    return top["rotary_base"] if top is not None else float(inner if inner is not None else 10000.0)


def _dbrx_routing(ffn: Dict[str, Any]) -> Dict[str, Any]:
    if float(ffn.get("moe_jitter_eps") or 0.0) != 0.0:
        raise RegistryError(f"dbrx ffn_config.moe_jitter_eps={ffn['moe_jitter_eps']} is not supported; set it to null")
    norm = ffn.get("moe_normalize_expert_weights", 1.0)
    if norm not in (None, 1, 1.0):
        raise RegistryError(f"dbrx ffn_config.moe_normalize_expert_weights={norm} is not supported (1: divide the "
                            "top-k weights by their sum, or null)")
    act = (ffn.get("ffn_act_fn") or {}).get("name", "silu")
    if act != "silu":
        raise RegistryError(f"dbrx ffn_config.ffn_act_fn name={act!r} is not supported (only 'silu')")
    return {"num_experts": int(ffn.get("moe_num_experts", 4)), "moe_router_topk": int(ffn.get("moe_top_k", 1)),
            "moe_ffn_hidden_size": int(ffn.get("ffn_hidden_size", 3584)), "moe_router_pre_softmax": True,
            "norm_topk_prob": norm is not None, "moe_aux_loss_coeff": float(ffn.get("moe_loss_weight", 0.01))}


def _dbrx_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """DBRX: bias-free LayerNorm, fused Wqkv clamped by clip_qkv, pre-softmax routing over fused experts."""
    attn, ffn = dict(hf.get("attn_config") or {}), dict(hf.get("ffn_config") or {})
    if hf.get("tie_word_embeddings", False):
        raise RegistryError("dbrx tie_word_embeddings=True is not supported (transformers refuses it too)")
    heads, hidden = int(hf["n_heads"]), int(hf["d_model"])
    clip = attn.get("clip_qkv")
    flat = {"num_hidden_layers": hf["n_layers"], "hidden_size": hidden,
            "intermediate_size": ffn.get("ffn_hidden_size", 3584),
            "num_attention_heads": heads, "num_key_value_heads": attn.get("kv_n_heads", 1),
            "head_dim": hidden // heads, "vocab_size": hf["vocab_size"],
            "max_position_embeddings": hf.get("max_seq_len", 2048),
            "initializer_range": hf.get("initializer_range", 0.02), "dtype": hf.get("dtype") or hf.get("torch_dtype")}
    return {**_common_config(flat), "rotary_base": _dbrx_rope_theta(hf, attn), "normalization": "LayerNorm",
            "norm_epsilon": DBRX_NORM_EPSILON, "layernorm_bias": False, "untie_embeddings_and_output_weights": True,
            "qkv_clip": float(clip) if clip is not None else None, **_dbrx_routing(ffn)}


def _dbrx_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.normalization != "LayerNorm" or cfg.layernorm_bias or cfg.norm_epsilon != DBRX_NORM_EPSILON:
        raise RegistryError("dbrx needs --normalization LayerNorm --no-layernorm-bias --norm-epsilon 1e-5")
    if cfg.qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers or cfg.activation != "swiglu":
        raise RegistryError("dbrx has no linear biases and SwiGLU experts; the config differs")
    if cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size or not cfg.untie_embeddings_and_output_weights:
        raise RegistryError("dbrx needs kv_channels x heads == hidden size and untied embeddings")
    require_config(cfg, "dbrx", moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   moe_shared_expert_intermediate_size=None, sliding_window=None, rope_scaling_type=None,
                   **NO_ROUTING_EXTRAS)
    attn = {"clip_qkv": cfg.qkv_clip, "kv_n_heads": cfg.num_query_groups, "rope_theta": cfg.rotary_base,
            "attn_pdrop": 0.0}
    ffn = {"ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": cfg.moe_expert_ffn_hidden_size,
           "moe_num_experts": cfg.num_experts, "moe_top_k": cfg.moe_router_topk,
           "moe_loss_weight": cfg.moe_aux_loss_coeff,
           "moe_normalize_expert_weights": 1.0 if cfg.norm_topk_prob else None}
    return {"d_model": cfg.hidden_size, "n_heads": cfg.num_attention_heads, "n_layers": cfg.num_layers,
            "max_seq_len": cfg.max_position_embeddings, "vocab_size": cfg.vocab_size, "attn_config": attn,
            "ffn_config": ffn, "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rotary_base},
            "resid_pdrop": 0.0, "emb_pdrop": 0.0, "tie_word_embeddings": False,
            "initializer_range": cfg.init_method_std, "use_cache": True,
            "torch_dtype": str(cfg.params_dtype).replace("torch.", "")}


@dataclass(frozen=True)
class NestedConfigFamily(Family):
    """A family whose config.json nests sub-configs (DBRX's ``attn_config``/``ffn_config``): the written
    sub-configs keep the original's keys our config does not model, as the top level does."""

    nested_keys: Tuple[str, ...] = ()

    def to_hf_config(self, cfg: TransformerConfig, original: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        out = super().to_hf_config(cfg, original)
        for key in self.nested_keys:
            if original and isinstance(original.get(key), dict):
                out[key] = {**original[key], **out[key]}
        return out


register(NestedConfigFamily("dbrx", "dbrx", "DbrxForCausalLM", _dbrx_config, _dbrx_hf_config, DBRX_WEIGHTS,
                            preserved_keys=("output_router_logits",), nested_keys=("attn_config", "ffn_config")))


# --------------------------------------------------------------------------- PhiMoE


def _phimoe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """PhiMoE: LayerNorm with bias, q/k/v/o biases, SparseMixer top-2 routing."""
    if float(hf.get("input_jitter_noise", 0.0) or 0.0) != 0.0:
        raise RegistryError(f"phimoe input_jitter_noise={hf['input_jitter_noise']} is not supported; set it to 0")
    if int(hf.get("num_experts_per_tok", 2)) != 2:
        raise RegistryError(f"phimoe num_experts_per_tok={hf['num_experts_per_tok']} is not supported (SparseMixer "
                            "in transformers always picks 2)")
    routing = _moe_common({**hf, "router_jitter_noise": 0.0}, "phimoe", "num_local_experts")
    return {**_common_config(hf), "normalization": "LayerNorm", "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)),
            **_attention_biases(hf), "add_output_layer_bias": bool(hf.get("lm_head_bias", False)),
            "sliding_window": hf.get("sliding_window"), **routing, "moe_router_score_function": "sparsemixer",
            "moe_router_sparsemixer_eps": float(hf.get("router_jitter_noise", 0.01))}


def _phimoe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.normalization != "LayerNorm" or not cfg.layernorm_bias:
        raise RegistryError("phimoe needs --normalization LayerNorm with its bias")
    if cfg.moe_router_topk != 2:
        raise RegistryError(f"phimoe routes to 2 experts; the config sets --moe-router-topk {cfg.moe_router_topk}")
    require_config(cfg, "phimoe", moe_router_score_function="sparsemixer",
                   moe_shared_expert_intermediate_size=None, **NO_ROUTING_EXTRAS)
    out = {k: v for k, v in _common_hf_config(cfg).items() if k != "rms_norm_eps"}
    return {**out, "rms_norm_eps": cfg.norm_epsilon, "attention_bias": _attention_bias_hf(cfg, "phimoe"),
            "lm_head_bias": cfg.add_output_layer_bias, "sliding_window": cfg.sliding_window,
            "num_local_experts": cfg.num_experts, "num_experts_per_tok": 2,
            "intermediate_size": cfg.moe_expert_ffn_hidden_size, "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
            "router_jitter_noise": cfg.moe_router_sparsemixer_eps, "input_jitter_noise": 0.0}


def _phimoe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    head_bias = (WeightRule("output_layer.bias", ("lm_head.bias",)),)
    return (_without_mlp(LLAMA_WEIGHTS) + head_bias
            + per_expert_weights(cfg, "block_sparse_moe", "w1", "w3", "w2", "gate"))


register(Family("phimoe", "phimoe", "PhimoeForCausalLM", _phimoe_config, _phimoe_hf_config,
                _without_mlp(LLAMA_WEIGHTS), preserved_keys=("output_router_logits",), weights_for=_phimoe_weights),
         "phi3.5-moe", "phi35_moe")


# --------------------------------------------------------------------------- JetMoE (refused)

refuse("jetmoe", "its attention is a mixture of attention heads (per-token top-k query/output projection experts "
       "over one shared k/v projection), which the one decoder's attention cannot express", "jet-moe")

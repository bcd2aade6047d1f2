"""Mixture-of-experts families of the model zoo (issue 10): Mixtral, Qwen2Moe, Qwen3Moe, Olmoe.

Layout: Llama's (``registry.LLAMA_WEIGHTS``) with every layer's MLP an MoE layer
(core/transformer/moe/). Checkpoints keep one tensor per expert (Mixtral:
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
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, Family, RegistryError, WeightRule, _common_config,
                                           _common_hf_config, _layer, _reject_biases, register)

DENSE_ATTENTION_WEIGHTS = tuple(rule for rule in LLAMA_WEIGHTS if ".mlp." not in rule.ours)


def per_expert_weights(cfg: TransformerConfig, block: str, gate: str, up: str, down: str,
                       router: str) -> Tuple[WeightRule, ...]:
    """Rules for experts saved one tensor per expert, ``{block}.experts.{e}.{gate|up|down}.weight``."""
    experts = range(cfg.num_experts)
    gated = [f"{block}.experts.{e}.{name}.weight" for e in experts for name in (gate, up)]
    return (_layer("mlp.router.weight", [f"{block}.{router}.weight"]),
            _layer("mlp.experts.linear_fc1.weight", gated, "stack_experts_gated"),
            _layer("mlp.experts.linear_fc2.weight", [f"{block}.experts.{e}.{down}.weight" for e in experts],
                   "stack_experts"))


def _mixtral_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + per_expert_weights(cfg, "block_sparse_moe", "w1", "w3", "w2", "gate")


def _moe_common(hf: Dict[str, Any], family: str, experts_key: str) -> Dict[str, Any]:
    """Experts, top-k, expert FFN size and the aux-loss coefficient; refuses router jitter."""
    if float(hf.get("router_jitter_noise", 0.0) or 0.0) != 0.0:
        raise RegistryError(f"{family} router_jitter_noise={hf['router_jitter_noise']} is not supported; set it to 0")
    experts = hf.get(experts_key, hf.get("num_local_experts", hf.get("num_experts")))  # transformers saves either
    if experts is None:
        raise RegistryError(f"config.json lacks {experts_key!r} needed by family {family!r}")
    return dict(num_experts=int(experts), moe_router_topk=int(hf.get("num_experts_per_tok", 2)),
                moe_ffn_hidden_size=int(hf["intermediate_size"]),
                moe_aux_loss_coeff=float(hf.get("router_aux_loss_coef", 0.0) or 0.0))


def _moe_common_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return dict(num_experts_per_tok=cfg.moe_router_topk, intermediate_size=cfg.moe_expert_ffn_hidden_size,
                router_aux_loss_coef=cfg.moe_aux_loss_coeff, router_jitter_noise=0.0)


def _reject_unmapped_moe(cfg: TransformerConfig, family: str, **expected: Any) -> None:
    """MoE settings this family's HF model does not have, as one-line RegistryErrors."""
    for name, value in expected.items():
        if getattr(cfg, name) != value:
            raise RegistryError(f"{family} has no equivalent of {name}={getattr(cfg, name)!r} (needs {value!r})")


def _mixtral_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_config(hf), "sliding_window": hf.get("sliding_window"),
            **_moe_common(hf, "mixtral", "num_local_experts")}


def _mixtral_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "mixtral")
    _reject_unmapped_moe(cfg, "mixtral", moe_router_score_function="softmax", moe_router_pre_softmax=False,
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
    _reject_unmapped_moe(cfg, family, moe_router_score_function="softmax", moe_router_pre_softmax=True,
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
    kwargs = {**_common_config(hf), "qk_layernorm": True, **_pre_softmax_router(hf, "qwen3_moe", "num_experts"),
              **_dense_layers(hf, "qwen3_moe")}
    kwargs["moe_ffn_hidden_size"] = int(hf["moe_intermediate_size"])
    return kwargs


def _qwen3_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "qwen3_moe")
    _reject_unmapped_moe(cfg, "qwen3_moe", moe_shared_expert_intermediate_size=None, sliding_window=None)
    return {**_common_hf_config(cfg), "attention_bias": False, "use_sliding_window": False,
            **_pre_softmax_router_hf(cfg, "qwen3_moe")}


def _qwen3_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return _moe_layer_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")


def _olmoe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("attention_bias", False):
        raise RegistryError("olmoe attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    clip = hf.get("clip_qkv")
    kwargs = {**_common_config(hf), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)), "qk_layernorm": True,
              "qk_layernorm_full_width": True, "qkv_clip": float(clip) if clip is not None else None,
              **_pre_softmax_router(hf, "olmoe", "num_experts")}
    return kwargs


def _olmoe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "olmoe")
    _reject_unmapped_moe(cfg, "olmoe", moe_shared_expert_intermediate_size=None, first_k_dense_replace=0,
                         qk_layernorm_full_width=True)
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
    _reject_unmapped_moe(cfg, "qwen2_moe", sliding_window=None)
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

"""Mixture-of-experts families of the model zoo (issue 10): Mixtral.

Layout: Llama's (``registry.LLAMA_WEIGHTS``) with every layer's MLP an MoE layer
(core/transformer/moe/). Checkpoints keep one tensor per expert (Mixtral:
``block_sparse_moe.experts.{e}.w1/w3/w2`` = gate/up/down); the "stack_experts_gated" transform stacks the
(gate, up) pairs into our ``mlp.experts.linear_fc1.weight`` [experts, 2 x ffn, h] and "stack_experts" the
downs into ``mlp.experts.linear_fc2.weight`` [experts, h, ffn]; ``block_sparse_moe.gate`` is the router.

* ``mixtral``: softmax over the experts, top-k, the k weights renormalised: the top-k softmax of the
  logits (Megatron's default, no ``--moe-router-pre-softmax``); ``router_aux_loss_coef`` is
  ``--moe-aux-loss-coeff`` (the loss only acts in training); ``router_jitter_noise`` is refused.
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
    return dict(num_experts=int(hf[experts_key]), moe_router_topk=int(hf.get("num_experts_per_tok", 2)),
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

"""What the mixture-of-experts family modules share: Mixtral's HF keys for the experts and the router loss,
Llama's attention without its MLP, and the rules of experts saved one tensor per expert.

Checkpoints that keep one tensor per expert (``{block}.experts.{e}.gate_proj/up_proj/down_proj``) map through
the "stack_experts_gated" transform, which stacks the (gate, up) pairs into our
``mlp.experts.linear_fc1.weight`` [experts, 2 x ffn, h], and "stack_experts", which stacks the downs into
``mlp.experts.linear_fc2.weight`` [experts, h, ffn].
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import LLAMA_WEIGHTS, RegistryError, WeightRule, _layer

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

"""What the mixture-of-experts family modules share: Mixtral's HF keys for the experts and the router loss,
Llama's attention without its MLP, the rules of experts saved one tensor per expert, and DeepSeek-V3's sigmoid
router with its group-limited routing (one mapping for every family that has them, MLA or not).

Checkpoints that keep one tensor per expert (``{block}.experts.{e}.gate_proj/up_proj/down_proj``) map through
the "stack_experts_gated" transform, which stacks the (gate, up) pairs into our
``mlp.experts.linear_fc1.weight`` [experts, 2 x ffn, h], and "stack_experts", which stacks the downs into
``mlp.experts.linear_fc2.weight`` [experts, h, ffn].
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import LLAMA_WEIGHTS, RegistryError, WeightRule, _layer, require_config

HF_GROUP_SCORE_TOPK = 2  # DeepSeek-V3-style HF routers score a group by the sum of its best two scores
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


def dense_run(types: Sequence[str], layers: int, family: str) -> int:
    """How many leading layers HF's ``mlp_layer_types`` makes dense (--first-k-dense-replace); anything but a run
    of ``dense`` then ``sparse``, one per layer, is refused."""
    types = list(types)
    dense = types.count("dense")
    if types != mlp_layer_types(dense, layers):
        raise RegistryError(f"{family} mlp_layer_types={types} is not supported (only a leading run of dense "
                            "layers then sparse ones, --first-k-dense-replace)")
    return dense


def mlp_layer_types(dense: int, layers: int) -> List[str]:
    """HF's ``mlp_layer_types`` of ``dense`` leading dense layers out of ``layers``."""
    return ["dense"] * dense + ["sparse"] * (layers - dense)


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


# --------------------------------------------------------------------------- sigmoid and group routing


def sigmoid_routing(norm_topk_prob: bool) -> Dict[str, Any]:
    """DeepSeek-V3's router: sigmoid scores, the experts chosen by score + ``e_score_correction_bias`` (our
    router's ``expert_bias``) and weighed by the unbiased scores, renormalised when ``norm_topk_prob``."""
    return dict(moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
                norm_topk_prob=norm_topk_prob)


def check_bias_router_hf(cfg: TransformerConfig, family: str, score_function: str = "sigmoid", fix: str = "",
                         **expected: Any) -> None:
    """What every expert-bias router needs from our config (``expected``: more fixed settings; ``fix``: the
    flags that give them)."""
    require_config(cfg, family, fix, moe_router_score_function=score_function,
                   moe_router_pre_softmax=score_function == "softmax", moe_router_enable_expert_bias=True,
                   moe_layer_freq=1, moe_expert_capacity_factor=None, shared_expert_gate=False, **expected)


def group_routing(hf: Dict[str, Any], family: str, score_topk: int = HF_GROUP_SCORE_TOPK) -> Dict[str, Any]:
    """HF's ``n_group`` / ``topk_group`` as group-limited routing (``--moe-router-num-groups`` /
    ``--moe-router-group-topk``), a group scored as HF scores it: by the sum of its best ``score_topk``
    experts (``--moe-router-group-score-topk``; DeepSeek-V3 style: two, DeepSeek-V2: one). ``topk_group``
    equal to ``n_group`` keeps every group: no group limit."""
    groups, group_topk = int(hf.get("n_group") or 1), int(hf.get("topk_group") or 1)
    if group_topk > groups:
        raise RegistryError(f"{family} topk_group={group_topk} needs n_group >= {group_topk} (n_group={groups})")
    if group_topk == groups:
        return {"moe_router_num_groups": None, "moe_router_group_topk": None}
    return {"moe_router_num_groups": groups, "moe_router_group_topk": group_topk,
            "moe_router_group_score_topk": score_topk}


def group_routing_hf(cfg: TransformerConfig, family: str, score_topk: int = HF_GROUP_SCORE_TOPK) -> Dict[str, Any]:
    """The inverse of :func:`group_routing`; our group score is ``--moe-router-group-score-topk`` or, unset,
    the best ``topk / group_topk``."""
    if cfg.moe_router_num_groups is None:
        return {"n_group": 1, "topk_group": 1}
    scored = cfg.moe_router_group_score_topk or cfg.moe_router_topk // cfg.moe_router_group_topk
    if scored != score_topk:
        raise RegistryError(f"{family} scores a group by the sum of its best {score_topk}; set "
                            f"--moe-router-group-score-topk {score_topk}")
    return {"n_group": cfg.moe_router_num_groups, "topk_group": cfg.moe_router_group_topk}

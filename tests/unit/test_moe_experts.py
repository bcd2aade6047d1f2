"""Expert MLPs and token permutation against a per-token formula.

The reference computes every token's output as sum_j w_tj * expert_{e_tj}(x_t), each expert
SwiGLU written out from its full weights; the module path permutes, runs the stacked experts
(loop or torch._grouped_mm) and unpermutes. TP is checked by sharding the full weights with their
param metadata and summing the ranks' partial outputs in one process.

    python -m pytest -q tests/unit/test_moe_experts.py
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional, Tuple

import pytest
import torch
import torch.nn.functional as F

from core.tensor_parallel.param_meta import param_meta
from core.transformer.config import TransformerConfig
from core.transformer.moe.experts import ExpertMLPs, grouped_mm_available
from core.transformer.moe.token_dispatcher import capacity_keep_mask, expert_capacity, permute, unpermute

EXPERTS, TOPK, HIDDEN, FFN, TOKENS = 4, 2, 16, 8, 13


def _config(**overrides: Any) -> TransformerConfig:
    return TransformerConfig(num_layers=2, hidden_size=HIDDEN, num_attention_heads=4, vocab_size=64,
                             normalization="RMSNorm", add_bias_linear=False, activation="swiglu", num_experts=EXPERTS,
                             moe_router_topk=TOPK, moe_ffn_hidden_size=FFN, **overrides)


def _state(tp: int) -> SimpleNamespace:
    return SimpleNamespace(tp_group=SimpleNamespace(size=tp, rank=0), ep_group=SimpleNamespace(size=1),
                           expert_group=SimpleNamespace(size=1), experts_split_over_tp=True)


def _inputs(seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    hidden = torch.randn(TOKENS, HIDDEN)
    indices = torch.stack([torch.randperm(EXPERTS)[:TOPK] for _ in range(TOKENS)])  # [t, k] distinct experts
    weights = torch.rand(TOKENS, TOPK)
    return hidden, indices, weights


def _experts(tp: int = 1, **overrides: Any) -> ExpertMLPs:
    torch.manual_seed(1)
    return ExpertMLPs(_config(tensor_model_parallel_size=tp, **overrides), _state(tp))


def _moe(experts: ExpertMLPs, hidden: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
         keep: Optional[torch.Tensor] = None) -> torch.Tensor:
    rows, permutation = permute(hidden, indices, EXPERTS, keep)
    return unpermute(experts(rows, permutation.tokens_per_expert), permutation, weights)


def _reference(fc1: torch.Tensor, fc2: torch.Tensor, hidden: torch.Tensor, indices: torch.Tensor,
               weights: torch.Tensor, keep: Optional[torch.Tensor] = None) -> torch.Tensor:
    out = torch.zeros_like(hidden)
    for t in range(TOKENS):
        for j in range(TOPK):
            if keep is not None and not keep[t, j]:
                continue
            e = int(indices[t, j])
            gate, up = fc1[e, :FFN], fc1[e, FFN:]
            out[t] += weights[t, j] * (fc2[e] @ (F.silu(gate @ hidden[t]) * (up @ hidden[t])))
    return out


def test_dropless_matches_the_per_token_formula() -> None:
    experts = _experts()
    hidden, indices, weights = _inputs()
    ours = _moe(experts, hidden, indices, weights)
    expected = _reference(experts.linear_fc1.weight.detach(), experts.linear_fc2.weight.detach(), hidden, indices,
                          weights)
    assert (ours - expected).abs().max() < 1e-5


def test_expert_params_are_marked() -> None:
    experts = _experts()
    for param in experts.parameters():
        assert param_meta(param).is_expert and param_meta(param).tp_shard is not None


@pytest.mark.skipif(not grouped_mm_available(torch.float32, HIDDEN, FFN), reason="no torch._grouped_mm here")
def test_grouped_gemm_equals_the_loop_outputs_and_gradients() -> None:
    hidden, indices, weights = _inputs()
    indices[:, 0] = 0  # expert 3 gets no token at all in the second slot; keep an empty group
    indices[:, 1] = torch.where(indices[:, 1] == 0, 1, indices[:, 1]).clamp(max=2)
    results = []
    for grouped in (False, True):
        experts = _experts(moe_grouped_gemm=grouped)
        assert experts.use_grouped_mm == grouped
        x = hidden.clone().requires_grad_()
        w = weights.clone().requires_grad_()
        out = _moe(experts, x, indices, w)
        (out * torch.linspace(-1, 1, HIDDEN)).sum().backward()
        results.append((out, x.grad, w.grad, experts.linear_fc1.weight.grad, experts.linear_fc2.weight.grad))
    for loop, grouped in zip(*results):
        assert (loop - grouped).abs().max() < 1e-6
    assert results[0][3][3].abs().sum() == 0  # the unused expert has a zero gradient in both


def test_tp2_partials_sum_to_the_full_experts() -> None:
    """Each TP rank's experts hold their metadata shard of the full weights; the partial outputs sum to TP1's."""
    full = _experts()
    hidden, indices, weights = _inputs()
    expected = _moe(full, hidden, indices, weights)
    total = torch.zeros_like(expected)
    for rank in range(2):
        shard = _experts(tp=2)
        with torch.no_grad():
            for (name, local), (_, whole) in zip(shard.named_parameters(), full.named_parameters()):
                local.copy_(param_meta(local).tp_shard.shard(whole, rank, 2))
        total += _moe(shard, hidden, indices, weights)
    assert (total - expected).abs().max() < 1e-5


def test_capacity_drops_the_lowest_weights_per_expert() -> None:
    experts = _experts(moe_expert_capacity_factor=0.5)
    hidden, indices, weights = _inputs()
    capacity = expert_capacity(TOKENS, TOPK, EXPERTS, 0.5)
    assert capacity == 4  # ceil(13 * 2 / 4 * 0.5)
    keep = capacity_keep_mask(weights, indices, EXPERTS, capacity)
    for e in range(EXPERTS):  # by hand: each expert keeps its `capacity` highest-weight pairs
        routed = [(float(weights[t, j]), t, j) for t in range(TOKENS) for j in range(TOPK) if indices[t, j] == e]
        kept = {(t, j) for _, t, j in sorted(routed, reverse=True)[:capacity]}
        assert {(t, j) for _, t, j in routed if keep[t, j]} == kept
    assert (~keep).any()
    ours = _moe(experts, hidden, indices, weights, keep)
    expected = _reference(experts.linear_fc1.weight.detach(), experts.linear_fc2.weight.detach(), hidden, indices,
                          weights, keep)
    assert (ours - expected).abs().max() < 1e-5

"""The MoE top-k router against independent per-token formulas.

Each test recomputes the routing token by token with plain Python selection and
compares weights, indices and losses with core/transformer/moe/router.py.

    python -m pytest -q tests/unit/test_moe_router.py
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import pytest
import torch

from core.transformer.config import TransformerConfig
from core.transformer.moe.router import TopKRouter, update_expert_biases

SMALL = dict(num_layers=2, hidden_size=16, num_attention_heads=4, vocab_size=64, normalization="RMSNorm",
             add_bias_linear=False)
SEQ, BATCH = 5, 3


def _router(**overrides: Any) -> Tuple[TopKRouter, torch.Tensor]:
    torch.manual_seed(0)
    config = TransformerConfig(**{**SMALL, "num_experts": 8, **overrides})
    router = TopKRouter(config)
    with torch.no_grad():
        router.weight.normal_(std=1.0)
    hidden = torch.randn(SEQ, BATCH, config.hidden_size)
    return router, hidden


def _logits(router: TopKRouter, hidden: torch.Tensor) -> List[List[float]]:
    return (hidden.reshape(-1, hidden.shape[-1]) @ router.weight.t()).tolist()


def _top(values: List[float], k: int, allowed: List[int]) -> List[int]:
    return sorted(allowed, key=lambda e: -values[e])[:k]


def _reference(router: TopKRouter, hidden: torch.Tensor) -> Tuple[List[List[int]], List[List[float]]]:
    """Per token: chosen experts (as a set order from top down) and their weights, by the written-out rules."""
    config = router.config
    bias = router.expert_bias.tolist() if router.expert_bias is not None else [0.0] * config.num_experts
    chosen, weights = [], []
    for row in _logits(router, hidden):
        if config.moe_router_score_function == "sigmoid":
            scores = [1 / (1 + math.exp(-x)) for x in row]
        elif config.moe_router_pre_softmax:
            total = sum(math.exp(x) for x in row)
            scores = [math.exp(x) / total for x in row]
        else:
            scores = row
        biased = [s + b for s, b in zip(scores, bias)]
        allowed = list(range(config.num_experts))
        if config.moe_router_num_groups:
            size = config.num_experts // config.moe_router_num_groups
            per_group = config.moe_router_topk // config.moe_router_group_topk
            group_score = [sum(sorted(biased[g * size:(g + 1) * size], reverse=True)[:per_group])
                           for g in range(config.moe_router_num_groups)]
            groups = _top(group_score, config.moe_router_group_topk, list(range(config.moe_router_num_groups)))
            allowed = [e for e in allowed if e // size in groups]
        top = _top(biased, config.moe_router_topk, allowed)
        picked = [scores[e] for e in top]
        if config.moe_router_score_function == "softmax" and not config.moe_router_pre_softmax:
            total = sum(math.exp(x) for x in picked)
            picked = [math.exp(x) / total for x in picked]
        elif config.norm_topk_prob:
            total = sum(picked)
            picked = [p / total for p in picked]
        scale = config.moe_router_topk_scaling_factor or 1.0
        chosen.append(top)
        weights.append([p * scale for p in picked])
    return chosen, weights


def _check_routing(router: TopKRouter, hidden: torch.Tensor) -> None:
    output = router(hidden)
    chosen, weights = _reference(router, hidden)
    assert output.indices.shape == (SEQ * BATCH, router.config.moe_router_topk)
    got = output.indices.tolist()
    for token, (ours, theirs) in enumerate(zip(got, chosen)):
        assert sorted(ours) == sorted(theirs), token
        expected = dict(zip(theirs, weights[token]))
        for expert, weight in zip(ours, output.weights[token].tolist()):
            assert weight == pytest.approx(expected[expert], abs=1e-6)


ROUTINGS: Dict[str, Dict[str, Any]] = {
    "softmax_topk": dict(moe_router_topk=2),
    "pre_softmax": dict(moe_router_topk=2, moe_router_pre_softmax=True),
    "pre_softmax_norm": dict(moe_router_topk=3, moe_router_pre_softmax=True, norm_topk_prob=True),
    "sigmoid": dict(moe_router_topk=2, moe_router_score_function="sigmoid"),
    "sigmoid_norm_scaled": dict(moe_router_topk=4, moe_router_score_function="sigmoid", norm_topk_prob=True,
                                moe_router_topk_scaling_factor=2.5),
    "grouped": dict(moe_router_topk=4, moe_router_score_function="sigmoid", norm_topk_prob=True,
                    moe_router_num_groups=4, moe_router_group_topk=2),
    "grouped_softmax": dict(moe_router_topk=2, moe_router_pre_softmax=True, moe_router_num_groups=2,
                            moe_router_group_topk=1),
}


@pytest.mark.parametrize("name", ROUTINGS)
def test_routing_matches_the_formula(name: str) -> None:
    router, hidden = _router(**ROUTINGS[name])
    _check_routing(router, hidden)


def test_expert_bias_changes_selection_not_weights() -> None:
    router, hidden = _router(moe_router_topk=2, moe_router_score_function="sigmoid", norm_topk_prob=True,
                             moe_router_enable_expert_bias=True, moe_router_num_groups=4, moe_router_group_topk=2)
    with torch.no_grad():
        router.expert_bias.copy_(torch.tensor([0.0, 0.9, -0.5, 0.3, 0.0, 0.6, -0.2, 0.1]))
    _check_routing(router, hidden)


def test_expert_bias_update_from_counts() -> None:
    """After a step the bias moves by +-rate towards the mean count; the counts reset."""
    rate = 0.01
    router, hidden = _router(moe_router_topk=2, moe_router_score_function="sigmoid",
                             moe_router_enable_expert_bias=True, moe_router_bias_update_rate=rate)
    router.train()
    indices = torch.cat([router(hidden).indices, router(hidden[:2]).indices])  # two micro-batches
    counts = torch.bincount(indices.flatten(), minlength=8).float()
    assert torch.equal(router.local_tokens_per_expert, counts)
    mean = counts.mean()
    expected = torch.where(counts < mean, rate, torch.where(counts > mean, -rate, 0.0))
    update_expert_biases(torch.nn.Sequential(router))
    assert torch.allclose(router.expert_bias, expected) and not router.local_tokens_per_expert.any()
    router.eval()
    router(hidden)
    assert not router.local_tokens_per_expert.any(), "evaluation must not count tokens"


def _scores_and_map(router: TopKRouter, hidden: torch.Tensor) -> Tuple[List[List[float]], List[List[int]]]:
    config = router.config
    chosen, _ = _reference(router, hidden)
    probs = []
    for row in _logits(router, hidden):
        if config.moe_router_score_function == "sigmoid":
            sig = [1 / (1 + math.exp(-x)) for x in row]
            probs.append([s / sum(sig) for s in sig])
        else:
            total = sum(math.exp(x) for x in row)
            probs.append([math.exp(x) / total for x in row])
    return probs, chosen


@pytest.mark.parametrize("score_function", ["softmax", "sigmoid"])
def test_aux_loss_by_hand(score_function: str) -> None:
    coeff, topk, experts = 0.3, 2, 8
    router, hidden = _router(moe_router_topk=topk, moe_router_score_function=score_function, moe_aux_loss_coeff=coeff)
    probs, chosen = _scores_and_map(router, hidden)
    tokens = len(probs)
    counts = [sum(e in c for c in chosen) for e in range(experts)]
    share = [counts[e] / (tokens * topk) for e in range(experts)]  # f_e: share of the routed copies
    mean_prob = [sum(p[e] for p in probs) / tokens for e in range(experts)]  # P_e
    expected = coeff * experts * sum(f * p for f, p in zip(share, mean_prob))
    losses = router(hidden).losses
    assert set(losses) == {"load_balancing_loss"}
    assert losses["load_balancing_loss"].item() == pytest.approx(expected, rel=1e-5)


def test_seq_aux_loss_by_hand() -> None:
    coeff, topk, experts = 0.1, 2, 8
    router, hidden = _router(moe_router_topk=topk, moe_router_load_balancing_type="seq_aux_loss",
                             moe_aux_loss_coeff=coeff)
    probs, chosen = _scores_and_map(router, hidden)
    per_sequence = []
    for b in range(BATCH):
        rows = [s * BATCH + b for s in range(SEQ)]  # the [s, b] token order
        loss = 0.0
        for e in range(experts):
            f = sum(e in chosen[r] for r in rows) * experts / (SEQ * topk)
            p = sum(probs[r][e] for r in rows) / SEQ
            loss += f * p
        per_sequence.append(loss)
    expected = coeff * sum(per_sequence) / BATCH
    assert router(hidden).losses["load_balancing_loss"].item() == pytest.approx(expected, rel=1e-5)


def test_z_loss_by_hand_and_gradients_reach_the_router() -> None:
    coeff = 1e-2
    router, hidden = _router(moe_router_topk=2, moe_z_loss_coeff=coeff, moe_aux_loss_coeff=0.01)
    rows = _logits(router, hidden)
    expected = coeff * sum(math.log(sum(math.exp(x) for x in row)) ** 2 for row in rows) / len(rows)
    output = router(hidden)
    assert output.losses["z_loss"].item() == pytest.approx(expected, rel=1e-5)
    (output.weights.sum() + sum(output.losses.values())).backward()
    assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0


def test_aux_losses_are_one_for_uniform_routing() -> None:
    """Both balancing losses equal the coefficient when every expert gets the same tokens and scores."""
    from core.transformer.moe.router import sequence_load_balancing_loss, switch_load_balancing_loss
    scores = torch.full((8, 4), 0.25)
    routing_map = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1]] * 4, dtype=torch.bool)
    assert switch_load_balancing_loss(scores, routing_map, 2).item() == pytest.approx(1.0)
    assert sequence_load_balancing_loss(scores, routing_map, 2, local_length=4).item() == pytest.approx(1.0)


def test_no_losses_without_coefficients() -> None:
    router, hidden = _router(moe_router_topk=2)
    assert router(hidden).losses == {}
    router, hidden = _router(moe_router_topk=2, moe_router_load_balancing_type="none", moe_aux_loss_coeff=1.0)
    assert router(hidden).losses == {}


def test_cli_builds_the_router_config_and_checks_expert_parallel() -> None:
    """Valid router flags reach the config and validate (also under PP 2 and EP 2); experts that EP does not
    divide are refused in one line."""
    from mindspeed_llm.arguments import ArgumentError, _build_transformer_config, parse_args, validate_args
    argv = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "16",
            "--vocab-size", "128", "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", "1",
            "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
            "--disable-bias-linear", "--num-experts", "8", "--moe-router-topk", "4", "--moe-router-score-function", "sigmoid",
            "--norm-topk-prob", "--moe-router-num-groups", "4", "--moe-router-group-topk", "2",
            "--moe-router-enable-expert-bias", "--moe-aux-loss-coeff", "0.01"]
    config = _build_transformer_config(parse_args(argv), 128)
    assert (config.num_experts, config.moe_router_topk, config.moe_router_group_topk) == (8, 4, 2)
    assert config.norm_topk_prob and config.moe_router_enable_expert_bias and config.moe_aux_loss_coeff == 0.01
    validate_args(parse_args(argv), 1)
    validate_args(parse_args(argv + ["--num-layers", "4", "--pipeline-model-parallel-size", "2"]), 2)
    validate_args(parse_args(argv + ["--expert-model-parallel-size", "2", "--global-batch-size", "2"]), 2)
    with pytest.raises(ArgumentError, match="--num-experts 8 is not divisible by --expert-model-parallel-size 3"):
        validate_args(parse_args(argv + ["--expert-model-parallel-size", "3", "--global-batch-size", "3"]), 3)


@pytest.mark.parametrize("router_dtype, torch_dtype", [("fp32", torch.float32), ("fp64", torch.float64)])
def test_router_dtype_routes_and_sums_in_that_dtype(router_dtype: str, torch_dtype: torch.dtype) -> None:
    """--moe-router-dtype: a bf16 model's router runs its linear and scores in fp32/fp64 (weights come out in that
    dtype), and unpermute sums the weighted expert rows in it, returning the rows' dtype."""
    from core.transformer.moe.token_dispatcher import permute, unpermute

    router, hidden = _router(params_dtype=torch.bfloat16, moe_router_dtype=router_dtype)
    hidden = hidden.to(torch.bfloat16)
    out = router(hidden)
    logits = hidden.reshape(-1, hidden.shape[-1]).to(torch_dtype) @ router.weight.to(torch_dtype).t()  # [t, e]
    top = logits.topk(2, dim=-1)
    assert out.weights.dtype == torch_dtype and torch.equal(out.indices, top.indices)
    torch.testing.assert_close(out.weights, torch.softmax(top.values, dim=-1), rtol=0, atol=0)
    plain, _ = _router(params_dtype=torch.bfloat16)
    assert plain(hidden).weights.dtype == torch.bfloat16  # without the flag: the model's dtype
    flat = hidden.reshape(-1, hidden.shape[-1])
    rows, permutation = permute(flat, out.indices, 8)
    summed = unpermute(rows, permutation, out.weights)
    expected = torch.zeros(flat.shape, dtype=torch_dtype)
    for row, pair, token in zip(rows, permutation.pairs.tolist(), permutation.tokens.tolist()):
        expected[token] += row.to(torch_dtype) * out.weights.flatten()[pair]
    assert summed.dtype == torch.bfloat16 and torch.equal(summed, expected.to(torch.bfloat16))
    with pytest.raises(ValueError, match="--moe-router-dtype 'fp16' is not one of fp32, fp64"):
        TransformerConfig(**{**SMALL, "num_experts": 8, "moe_router_dtype": "fp16"})


def _last_router_gradient(coeff: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """One training step of a 2-layer MoE model at --moe-aux-loss-coeff / --moe-z-loss-coeff ``coeff`` over 3
    micro-batches: the last layer's router weight gradient, and ``d(mean over micro-batches of its router
    losses) / dW`` recomputed from the router inputs the step saw."""
    from mindspeed_llm.training.training import setup

    losses = ["--moe-aux-loss-coeff", str(coeff), "--moe-z-loss-coeff", str(coeff)] if coeff else []
    trainer = setup(["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--seq-length", "8",
                     "--micro-batch-size", "1", "--global-batch-size", "3", "--train-iters", "2", "--lr", "1e-3",
                     "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--device", "cpu",
                     "--num-experts", "4", "--moe-router-topk", "2", "--hidden-dropout", "0", "--attention-dropout",
                     "0", "--clip-grad", "0", "--eval-iters", "0", "--seed", "3"] + losses)
    router = [m for m in trainer.model.modules() if isinstance(m, TopKRouter)][-1]
    before = {name: value.clone() for name, value in router.state_dict().items()}  # the step updates them
    inputs: List[torch.Tensor] = []
    hook = router.register_forward_hook(lambda module, args, output: inputs.append(args[0].detach().clone()))
    seen: List[torch.Tensor] = []
    step = trainer.optimizer.step

    def read_then_step():  # the gradient as the optimizer gets it (its update may reuse the buffer)
        seen.append(router.weight.main_grad.clone())
        return step()

    trainer.optimizer.step = read_then_step
    trainer.train_step(trainer.train_iterator())
    hook.remove()
    (gradient,) = seen
    own = torch.zeros_like(router.weight)
    router.load_state_dict(before)
    for hidden in inputs:  # [s, b, h] per micro-batch; the step's loss is the micro-batches' mean
        values = list(router(hidden).losses.values())
        if values:
            own += torch.autograd.grad(sum(values), router.weight)[0] / len(inputs)
    assert len(inputs) == 3
    return gradient, own


def test_router_losses_add_their_gradient_over_micro_batches() -> None:
    """The aux and z losses reach the router weights as if added to each micro-batch's loss: the gradient at
    coefficients c minus the one at 0 is c's losses' own gradient (the LM loss's part cancels)."""
    with_losses, own = _last_router_gradient(0.1)
    without, nothing = _last_router_gradient(0.0)
    assert nothing.abs().sum() == 0 and own.abs().sum() > 0
    torch.testing.assert_close(with_losses - without, own, rtol=1e-4, atol=1e-5 * float(own.abs().max()))

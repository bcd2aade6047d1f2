"""Context-parallel exchanges (``core/tensor_parallel/cp_mappings.py``) and the run's yes/no questions
(``any_rank``, ``first_on_any_rank`` in ``mappings.py``) on 3 gloo processes.

Three ranks, so that a ring sending to the previous rank instead of the next one shows. Every rank builds
every rank's inputs from the same seeds and checks its forward result and gradient against ones assembled
here by hand (rank r of U, heads split in U parts, x_r [s, b, n, d], g its upstream gradient):

    ring exchange        receives what rank r - 1 sent (each tensor, dtype and shape kept)
    sequence_to_heads    y_u = cat_r x_r[:, :, u-th heads]  (dim 0)     dx_r[:, :, u-th heads] = g_u[r-th s rows]
    heads_to_sequence    y_r[:, :, u-th heads] = z_u[r-th s rows]       dz_u = cat_r g_r[:, :, u-th heads]

    python -m pytest tests/distributed/test_cp_mappings.py -q
"""
from __future__ import annotations

from typing import Dict

import torch

from core.launcher import run_distributed
from core.parallel_state import initialize
from core.tensor_parallel.cp_mappings import RingExchange, heads_to_sequence, sequence_to_heads
from core.tensor_parallel.mappings import any_rank, any_rank_each, first_on_any_rank

WORLD = 3
S, B, N, D = 2, 2, 6, 4  # per-rank tokens, batch, heads (split in WORLD parts), head dim


def _tensor(shape, *key: int) -> torch.Tensor:
    seed = 0
    for part in key:
        seed = seed * 97 + part + 1
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _heads(x: torch.Tensor, u: int) -> torch.Tensor:
    return x.chunk(WORLD, dim=2)[u]  # [., b, n / U, d]


def _ring_case(rank: int, group) -> Dict[str, bool]:
    exchange = RingExchange(group)
    sent = [_tensor((S, D), 1, rank), _tensor((3,), 2, rank).to(torch.float64)]
    received, requests = exchange.start(sent, tag=5)
    exchange.wait(requests)
    previous = (rank - 1) % WORLD
    expected = [_tensor((S, D), 1, previous), _tensor((3,), 2, previous).to(torch.float64)]
    return {"from_previous": all(torch.equal(r, e) and r.dtype == e.dtype for r, e in zip(received, expected))}


def _sequence_to_heads_case(rank: int, group) -> Dict[str, bool]:
    x = _tensor((S, B, N, D), 10, rank).requires_grad_(True)
    y = sequence_to_heads(x, group)  # [U s, b, n / U, d]
    y.backward(_tensor(y.shape, 11, rank))
    expected = torch.cat([_heads(_tensor((S, B, N, D), 10, r), rank) for r in range(WORLD)])
    upstream = [_tensor((WORLD * S, B, N // WORLD, D), 11, u) for u in range(WORLD)]
    expected_grad = torch.cat([g[rank * S:(rank + 1) * S] for g in upstream], dim=2)  # [s, b, n, d]
    return {"forward": torch.equal(y, expected), "backward": torch.equal(x.grad, expected_grad)}


def _heads_to_sequence_case(rank: int, group) -> Dict[str, bool]:
    z = _tensor((WORLD * S, B, N // WORLD, D), 20, rank).requires_grad_(True)
    y = heads_to_sequence(z, group)  # [s, b, n, d]
    y.backward(_tensor(y.shape, 21, rank))
    inputs = [_tensor((WORLD * S, B, N // WORLD, D), 20, u) for u in range(WORLD)]
    expected = torch.cat([z_u[rank * S:(rank + 1) * S] for z_u in inputs], dim=2)
    expected_grad = torch.cat([_heads(_tensor((S, B, N, D), 21, r), rank) for r in range(WORLD)])
    round_trip = heads_to_sequence(sequence_to_heads(_tensor((S, B, N, D), 22, rank), group), group)
    return {"forward": torch.equal(y, expected), "backward": torch.equal(z.grad, expected_grad),
            "inverse": torch.equal(round_trip, _tensor((S, B, N, D), 22, rank))}


def _yes_no_case(rank: int, state) -> Dict[str, bool]:
    world, alone = state.groups["dp"], state.groups["cp"]  # every rank; a group of one (CP 1)
    problems = {0: None, 1: "problem on 1", 2: "problem on 2"}
    return {"one_says_yes": any_rank(rank == 1) and any_rank(rank == 2, world),
            "none_says_yes": not any_rank(False, world),
            "each_flag": any_rank_each([rank == 0, False, rank == 2]) == [True, False, True],
            "alone_answers_itself": any_rank(rank == 1, alone) == (rank == 1),
            "first_problem": first_on_any_rank(problems[rank]) == "problem on 1",
            "first_problem_alone": first_on_any_rank(problems[rank], alone) == problems[rank]}


def _worker(rank: int, world: int) -> Dict[str, Dict[str, bool]]:
    state = initialize(tp=1)
    group = state.groups["dp"]  # any group spanning every rank will do
    return {"ring": _ring_case(rank, group), "sequence_to_heads": _sequence_to_heads_case(rank, group),
            "heads_to_sequence": _heads_to_sequence_case(rank, group), "any_rank": _yes_no_case(rank, state)}


def test_cp_exchanges_and_yes_no_questions_on_three_ranks() -> None:
    for rank, results in enumerate(run_distributed(WORLD, _worker)):
        for case, checks in results.items():
            assert all(checks.values()), f"rank {rank} {case}: {checks}"


def test_single_process_answers_are_its_own() -> None:
    from core.models.gpt_model import layout_state

    group = layout_state(1).groups["cp"]
    x = torch.randn(S, B, N, D)
    assert sequence_to_heads(x, group) is x and heads_to_sequence(x, group) is x
    assert any_rank(True) and not any_rank(False, group) and any_rank_each([False, True]) == [False, True]
    assert first_on_any_rank("mine") == "mine" and first_on_any_rank(None, group) is None

"""Expert-parallel collectives (``core/tensor_parallel/expert_mappings.py``) on 2 gloo processes.

Every rank builds every rank's inputs from the same seed, so each checks its
forward result and its gradient against ones computed here by hand: the
variable-size all-to-all (with an empty send) and its reverse in backward, the
token-count exchange, and the all-gather of unequal row counts whose backward
sums every rank's use of this rank's rows, and its transpose (the sum over the ranks,
cut to each rank's rows; backward all-gathers) with a per-expert count exchange.

    python -m pytest tests/distributed/test_expert_mappings.py -q
"""
from __future__ import annotations

from typing import Dict, List

import torch

from core.launcher import run_distributed
from core.parallel_state import initialize
from core.tensor_parallel.expert_mappings import (all_to_all_tokens, exchange_token_counts,
                                                  gather_tokens_from_expert_region,
                                                  reduce_scatter_tokens_to_expert_region)

HIDDEN = 3
SENDS = [[2, 3], [0, 1]]  # SENDS[r][j]: rows rank r sends to rank j (rank 1 sends none to rank 0)
ROWS = [4, 1]  # rows each rank holds for the all-gather


def _block(src: int, dst: int) -> torch.Tensor:
    """The rows rank ``src`` sends to rank ``dst`` ``[SENDS[src][dst], HIDDEN]``."""
    generator = torch.Generator().manual_seed(100 * src + dst)
    return torch.randn(SENDS[src][dst], HIDDEN, generator=generator)


def _weights(rank: int, rows: int, salt: int) -> torch.Tensor:
    return torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(1000 * salt + rank))


def _all_to_all_case(rank: int, world: int, group) -> Dict[str, bool]:
    counts = torch.tensor(SENDS[rank], dtype=torch.int64)
    received_counts = exchange_token_counts(counts, group)
    expected_counts = [SENDS[src][rank] for src in range(world)]
    x = torch.cat([_block(rank, dst) for dst in range(world)]).requires_grad_(True)  # [sum(SENDS[rank]), h]
    out = all_to_all_tokens(x, received_counts.tolist(), SENDS[rank], group)
    expected = torch.cat([_block(src, rank) for src in range(world)])
    (out * _weights(rank, out.size(0), 1)).sum().backward()
    grads: List[torch.Tensor] = []  # the gradient of each sent block: the receiver's weights on its rows
    for dst in range(world):
        offset = sum(SENDS[src][dst] for src in range(rank))
        grads.append(_weights(dst, sum(SENDS[src][dst] for src in range(world)), 1)[offset:offset + SENDS[rank][dst]])
    return {"counts": received_counts.tolist() == expected_counts, "forward": torch.equal(out, expected),
            "backward": torch.allclose(x.grad, torch.cat(grads))}


def _gather_case(rank: int, world: int, group) -> Dict[str, bool]:
    parts = [torch.randn(ROWS[r], HIDDEN, generator=torch.Generator().manual_seed(7 + r)) for r in range(world)]
    x = parts[rank].clone().requires_grad_(True)
    out = gather_tokens_from_expert_region(x, group)
    (out * _weights(rank, sum(ROWS), 2)).sum().backward()
    offset = sum(ROWS[:rank])
    expected_grad = sum(_weights(r, sum(ROWS), 2)[offset:offset + ROWS[rank]] for r in range(world))
    return {"forward": torch.equal(out, torch.cat(parts)), "backward": torch.allclose(x.grad, expected_grad)}


def _reduce_scatter_case(rank: int, world: int, group) -> Dict[str, bool]:
    full = [torch.randn(sum(ROWS), HIDDEN, generator=torch.Generator().manual_seed(30 + r)) for r in range(world)]
    x = full[rank].clone().requires_grad_(True)
    out = reduce_scatter_tokens_to_expert_region(x, ROWS, group)  # [ROWS[rank], h]
    offset = sum(ROWS[:rank])
    expected = sum(full)[offset:offset + ROWS[rank]]
    (out * _weights(rank, ROWS[rank], 3)).sum().backward()
    expected_grad = torch.cat([_weights(r, ROWS[r], 3) for r in range(world)])  # every rank's weights on its rows
    per_expert = torch.tensor([[rank, 10 + rank], [20 + rank, 30 + rank]])  # [ranks, experts per rank]
    received = exchange_token_counts(per_expert, group)
    expected_counts = [[src + 10 * (2 * rank), src + 10 * (2 * rank + 1)] for src in range(world)]
    return {"forward": torch.allclose(out, expected), "backward": torch.allclose(x.grad, expected_grad),
            "per_expert_counts": received.tolist() == expected_counts}


def _worker(rank: int, world: int) -> Dict[str, Dict[str, bool]]:
    state = initialize(tp=1)
    group = state.groups["dp"]  # any group spanning both ranks will do
    return {"all_to_all": _all_to_all_case(rank, world, group), "gather": _gather_case(rank, world, group),
            "reduce_scatter": _reduce_scatter_case(rank, world, group)}


def test_expert_collectives_on_two_ranks() -> None:
    for rank, results in enumerate(run_distributed(2, _worker)):
        for case, checks in results.items():
            assert all(checks.values()), f"rank {rank} {case}: {checks}"


def test_single_rank_group_is_the_identity() -> None:
    from core.models.gpt_model import layout_state

    group = layout_state(1).groups["dp"]
    x = torch.randn(3, HIDDEN)
    assert all_to_all_tokens(x, [3], [3], group) is x and gather_tokens_from_expert_region(x, group) is x
    assert exchange_token_counts(torch.tensor([3]), group).tolist() == [3]

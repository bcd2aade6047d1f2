"""The per-group interleaved QKV layout (``mindspeed_llm/models/qkv_layout.py``) against an explicit loop.

    python -m pytest tests/unit/test_qkv_layout.py -q
"""
from __future__ import annotations

import pytest
import torch

from mindspeed_llm.models.qkv_layout import interleaved_to_ours, ours_to_interleaved


def interleave_by_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, groups: int, head_dim: int) -> torch.Tensor:
    """Rows of each group in turn: its query heads, its key head, its value head."""
    per_group = q.size(0) // head_dim // groups
    rows = []
    for g in range(groups):
        for h in range(g * per_group, (g + 1) * per_group):
            rows.append(q[h * head_dim:(h + 1) * head_dim])
        rows.append(k[g * head_dim:(g + 1) * head_dim])
        rows.append(v[g * head_dim:(g + 1) * head_dim])
    return torch.cat(rows)


@pytest.mark.parametrize("heads, groups", [(4, 4), (4, 2), (6, 1), (8, 8)])
@pytest.mark.parametrize("bias", [False, True])
def test_interleaved_layout_matches_loop_and_inverts(heads: int, groups: int, bias: bool) -> None:
    head_dim, hidden = 3, 5
    shape = (lambda rows: (rows,)) if bias else (lambda rows: (rows, hidden))
    q, k, v = (torch.randn(*shape(n * head_dim)) for n in (heads, groups, groups))
    ours = torch.cat([q, k, v])
    interleaved = interleave_by_loop(q, k, v, groups, head_dim)
    assert torch.equal(ours_to_interleaved(ours, heads, groups, head_dim), interleaved)
    assert torch.equal(interleaved_to_ours(interleaved, heads, groups, head_dim), ours)

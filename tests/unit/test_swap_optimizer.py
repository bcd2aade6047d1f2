"""SwapAdamW: host-resident moments streamed in chunks give AdamW's exact updates."""
from __future__ import annotations

import pytest
import torch

from core.optimizer.swap import SwapAdamW


def _params(seed: int):
    torch.manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape)) for shape in ((50, 7), (13,), (9, 9, 3))]


@pytest.mark.parametrize("chunk", [1, 100, 10_000])
def test_swap_adamw_equals_adamw(chunk):
    swapped, reference = _params(0), _params(0)
    opt = SwapAdamW(swapped, lr=1e-2, weight_decay=0.1, chunk_elements=chunk)
    ref = torch.optim.AdamW(reference, lr=1e-2, weight_decay=0.1, foreach=False)
    chunks_seen = []
    original = opt._step_chunk
    opt._step_chunk = lambda group, params: (chunks_seen.append(len(params)), original(group, params))
    for step in range(4):
        grads = [torch.randn_like(p) for p in swapped]
        for p, q, g in zip(swapped, reference, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    for p, q in zip(swapped, reference):
        assert torch.equal(p, q)
    assert sum(chunks_seen) == 4 * len(swapped)
    assert len(chunks_seen) == 4 * (3 if chunk == 1 else 2 if chunk == 100 else 1)
    for state in opt.state.values():
        assert state["exp_avg"].device.type == "cpu" and state["exp_avg_sq"].dtype == torch.float32


def test_swap_adamw_state_round_trip():
    params = _params(1)
    opt = SwapAdamW(params, lr=1e-2, chunk_elements=64)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    restored = SwapAdamW(_params(1), lr=1e-2, chunk_elements=64)
    restored.load_state_dict(opt.state_dict())
    for a, b in zip(opt.state.values(), restored.state.values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and b["exp_avg"].device.type == "cpu"


def test_nonpositive_chunk_is_rejected():
    with pytest.raises(ValueError, match="--swap-optimizer-chunk-size"):
        SwapAdamW(_params(0), chunk_elements=0)

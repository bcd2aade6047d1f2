"""The fp32 master weights live in one flat buffer, and the fused AdamW over them equals per-tensor AdamW.

With bf16 parameters, both the plain mixed-precision optimizer and the distributed optimizer keep their
master weights as consecutive views of a single fp32 allocation (in the gradient buffer's order), and the
optimizer is torch's fused AdamW (one multi-tensor kernel over the list). Five steps of it over flat
masters give the weights that per-tensor AdamW (``foreach=False``, one update per tensor) gives over
separate copies.
"""
from __future__ import annotations

from typing import List

import pytest
import torch
from torch import nn

from core.optimizer.optimizer import OptimizerConfig, build_torch_optimizer, flat_fp32_copies
from mindspeed_llm.training.training import setup

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "3",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--bf16",
]


def _masters(trainer) -> List[torch.Tensor]:
    optimizer = trainer.optimizer
    return [p for group in optimizer.param_groups for p in group["params"]]


@pytest.mark.parametrize("extra", [[], ["--use-distributed-optimizer"]], ids=["mixed", "distributed"])
def test_bf16_masters_are_views_of_one_flat_buffer(extra: List[str]) -> None:
    trainer = setup(ARGV + extra)
    masters = _masters(trainer)
    assert masters and all(m.dtype == torch.float32 and m.is_contiguous() for m in masters)
    assert len({m.untyped_storage().data_ptr() for m in masters}) == 1
    offsets = sorted(m.storage_offset() for m in masters)
    sizes = {m.storage_offset(): m.numel() for m in masters}
    assert all(offsets[i] + sizes[offsets[i]] == offsets[i + 1] for i in range(len(offsets) - 1)), "gaps"
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(3)]
    assert losses[-1] < losses[0]


def test_fused_adamw_over_flat_masters_equals_per_tensor_adamw() -> None:
    generator = torch.Generator().manual_seed(0)
    shapes = [(64, 32), (32,), (96, 32), (32, 32), (7,)]
    weights = [torch.randn(shape, generator=generator) for shape in shapes]
    grads = [[torch.randn(shape, generator=generator) for shape in shapes] for _ in range(5)]
    config = OptimizerConfig(lr=1e-2, weight_decay=0.1)

    flat = flat_fp32_copies(weights)
    fused = build_torch_optimizer([{"params": flat}], config)
    assert fused.defaults.get("fused"), "the fused kernel is the one under test"
    separate = [nn.Parameter(w.clone()) for w in weights]
    per_tensor = torch.optim.AdamW(separate, lr=1e-2, weight_decay=0.1, foreach=False)
    for step_grads in grads:
        for params, optimizer in ((flat, fused), (separate, per_tensor)):
            for param, grad in zip(params, step_grads):
                param.grad = grad.clone()
            optimizer.step()
    for ours, reference, start in zip(flat, separate, weights):
        assert not torch.equal(ours, start)
        torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-7)

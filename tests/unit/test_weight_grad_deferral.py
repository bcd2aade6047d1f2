"""Zero-bubble's split backward at the layer level: B computes input gradients only, W the rest.

Single process, TP = 1. Inside ``defer_weight_grads`` a backward through
ColumnParallelLinear, RowParallelLinear and ``column_parallel_linear`` leaves
the linear weights and biases without gradients (and their grad-buffer buckets
not ready), gives the input exactly the gradient of ``F.linear``'s autograd, and
queues entries from which ``WeightGradStore.weight_grads`` computes exactly the
weight and bias gradients of the fused backward. Without a store the layers
are plain ``F.linear``.

    python -m pytest tests/unit/test_weight_grad_deferral.py -q
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from core.distributed.grad_buffer import GradBuffers
from core.parallel_state import Group
from core.tensor_parallel.layers import (
    ColumnParallelLinear, RowParallelLinear, WeightGradStore, column_parallel_linear, defer_weight_grads,
)


class Block(nn.Module):
    """x -> norm -> column (bias) -> gelu -> row (bias) -> column_parallel_linear on a tied weight."""

    def __init__(self, hidden: int = 16, ffn: int = 24, vocab: int = 12) -> None:
        super().__init__()
        group = Group([0])
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = ColumnParallelLinear(hidden, ffn, group=group, bias=True)
        self.fc2 = RowParallelLinear(ffn, hidden, group=group, bias=True)
        self.head = nn.Parameter(torch.empty(vocab, hidden))
        self.group = group
        generator = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for param in (self.fc1.weight, self.fc2.weight, self.head):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
            for param in (self.fc1.bias, self.fc2.bias):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))  # [s, b, h]
        return column_parallel_linear(h + x, self.head, None, self.group)  # [s, b, vocab]

    def linear_params(self):
        return [self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, self.head]


def _inputs():
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(6, 3, 16, generator=generator)  # [s, b, h]
    grad = torch.randn(6, 3, 12, generator=generator)  # [s, b, vocab]
    return x, grad


def _reference():
    """Gradients of an ordinary backward (F.linear's autograd)."""
    model, (x, grad) = Block(), _inputs()
    x.requires_grad_(True)
    model(x).backward(grad)
    return model, x.grad


def test_no_store_is_plain_f_linear():
    model, (x, _) = Block(), _inputs()
    expected = F.linear(F.gelu(F.linear(model.norm(x), model.fc1.weight, model.fc1.bias)), model.fc2.weight)
    expected = F.linear(expected + model.fc2.bias + x, model.head)
    out = model(x)
    assert torch.equal(out, expected)
    assert out.grad_fn.name() != "_LinearDeferredWeightGradBackward"


def test_b_defers_linear_weight_grads_and_w_matches_fused_backward():
    reference, reference_input_grad = _reference()
    model, (x, grad) = Block(), _inputs()
    x.requires_grad_(True)
    store = WeightGradStore()
    with defer_weight_grads(store):
        out = model(x)
        out.backward(grad)  # B
    # B: the input gradient (what a pipeline stage sends on) is exact; no linear weight/bias gradient exists.
    assert torch.equal(x.grad, reference_input_grad)
    for param in model.linear_params():
        assert param.grad is None
    for name in ("weight", "bias"):  # a non-linear parameter still gets its gradient in B
        assert torch.equal(getattr(model.norm, name).grad, getattr(reference.norm, name).grad)
    entries = store.take()
    assert len(entries) == 4 and len(store) == 0  # fc1, fc2's product, fc2's bias, the head
    for entry in entries:  # detached: holding them does not keep the freed graph alive
        assert not entry.grad_output.requires_grad and (entry.input is None or not entry.input.requires_grad)
    # W: exactly the fused backward's gradients.
    pairs = WeightGradStore.weight_grads(entries)
    assert {id(p) for p, _ in pairs} == {id(p) for p in model.linear_params()}
    expected = dict(zip(map(id, model.linear_params()), reference.linear_params()))
    for param, value in pairs:
        assert torch.equal(value, expected[id(param)].grad)
    params, grads = zip(*pairs)
    torch.autograd.backward(list(params), grad_tensors=list(grads))
    for param, ref in zip(model.linear_params(), reference.linear_params()):
        assert torch.equal(param.grad, ref.grad)


def test_deferral_only_with_grad_and_trainable_weights():
    model, (x, grad) = Block(), _inputs()
    model.fc1.weight.requires_grad_(False)  # frozen (e.g. a LoRA base weight): only its bias is deferred
    store = WeightGradStore()
    with defer_weight_grads(store):
        with torch.no_grad():
            model(x)
        assert len(store) == 0
        model(x).backward(grad)
    entries = store.take()
    fc1 = [e for e in entries if e.bias is model.fc1.bias]
    assert len(fc1) == 1 and fc1[0].weight is None and fc1[0].input is None
    assert all(e.weight is not model.fc1.weight for e in entries)


def test_shared_weight_gradients_are_summed():
    weight = nn.Parameter(torch.randn(5, 4))
    x = torch.randn(3, 4, requires_grad=True)
    (F.linear(x, weight) * 2 + F.linear(x * 3, weight)).sum().backward()
    expected = weight.grad.clone()
    weight.grad = None
    store = WeightGradStore()
    group = Group([0])
    with defer_weight_grads(store):
        (column_parallel_linear(x, weight, None, group) * 2 + column_parallel_linear(x * 3, weight, None, group)) \
            .sum().backward()
    assert weight.grad is None
    ((param, value),) = WeightGradStore.weight_grads(store.take())
    assert param is weight
    torch.testing.assert_close(value, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("last_microbatch_in_sync", [True, False])
def test_grad_buffer_readiness_waits_for_w(last_microbatch_in_sync):
    """With --overlap-grad-reduce a bucket starts only when the deferred gradients have arrived too."""
    reference, _ = _reference()
    model, (x, grad) = Block(), _inputs()
    buffers = GradBuffers(model, dp_group=Group([0]), bucket_size=10 ** 9, overlap_grad_reduce=True)
    (bucket,) = buffers.buckets
    store = WeightGradStore()
    with defer_weight_grads(store):
        model(x).backward(grad)  # B, outside no_sync: the norm's gradients are final, the linears' deferred
    assert not bucket.launched
    assert bucket.pending == {id(p) for p in model.linear_params()}
    for param in model.linear_params():
        assert param.grad is None and not param.main_grad.any()
    pairs = WeightGradStore.weight_grads(store.take())
    params, grads = zip(*pairs)
    if last_microbatch_in_sync:
        torch.autograd.backward(list(params), grad_tensors=list(grads))  # W: through the hooks
    else:
        for param, value in pairs:  # or directly
            buffers.accumulate(param, value)
    assert bucket.launched and not bucket.pending
    for name, param in model.named_parameters():
        assert param.grad is None
        assert torch.equal(param.main_grad, dict(reference.named_parameters())[name].grad), name

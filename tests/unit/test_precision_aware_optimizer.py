"""``PrecisionAwareAdamW`` (core/optimizer/precision_aware.py) in one process: the math, the storage, the bytes.

- With every dtype fp32 it is ``torch.optim.AdamW(foreach=False)``, bit for bit, over 3 steps with weight decay.
- With bf16 / fp16 / fp8 moments (and fp16 master weights) it is that AdamW with each moment (and master)
  rounded to its storage after every update, by a rounding written out here (python's ``math`` for the
  power-of-two scale, not the module's), bit for bit; fp8's ``exp_avg_sq`` is stored as its square root.
- Quantisation is idempotent: the dequantised fp32 values (what checkpoints hold) re-quantise to the same
  stored bytes and scales, for tensors whose maxima sit on every rounding edge (the 224 that a target of 448
  would turn into a doubled scale among them); through the optimizer, ``load_moments(moments_fp32(...))``
  changes no stored byte.
- The trainer's distributed optimizer keeps, per parameter, the bytes the formula says: master
  (4 | 2) + exp_avg + exp_avg_sq (fp8: 1 each, plus one fp32 scale per parameter piece), gradient buffers
  2 bytes with ``--main-grads-dtype bf16``.
- Without the distributed optimizer the optimizer is refused.
"""
from __future__ import annotations

import math
from typing import Dict, List

import pytest
import torch
from torch import nn

from core.optimizer.optimizer import OptimizerConfig, build_torch_optimizer
from core.optimizer.precision_aware import (FP8, PrecisionAwareAdamW, attach_grad, dequantise, load_moments,
                                            moments_fp32, quantise, storage_scale)

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
SHAPES = [(16, 8), (8,), (24, 8), (5,)]
LR, WD, STEPS = 1e-2, 0.1, 3
TARGET = {FP8: (464.0, 448.0), FP16: (65520.0, 65504.0)}  # (scale target, largest value), as documented


def _data(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    weights = [torch.randn(shape, generator=generator) for shape in SHAPES]
    # gradients over five orders of magnitude, so fp16/fp8 storage without a scale would underflow
    grads = [[torch.randn(shape, generator=generator) * 10.0 ** -torch.randint(1, 6, shape, generator=generator)
              for shape in SHAPES] for _ in range(STEPS)]
    return weights, grads


def _groups(params: List[nn.Parameter]) -> List[Dict]:
    return [{"params": [p for p in params if p.dim() > 1], "weight_decay": WD},
            {"params": [p for p in params if p.dim() == 1], "weight_decay": 0.0}]


def roundtrip(value: torch.Tensor, dtype: torch.dtype, root: bool = False) -> torch.Tensor:
    """The fp32 value of ``value`` after storage in ``dtype``, written out independently of the module."""
    if dtype == FP32:
        return value
    if dtype == BF16:
        return value.to(BF16).float()
    target, largest = TARGET[dtype]
    stored = value.sqrt() if root else value
    amax = stored.abs().max().item()
    scale = 2.0 ** math.floor(math.log2(target / amax)) if amax > 0 else 1.0
    result = (stored * scale).clamp(-largest, largest).to(dtype).float() / scale
    return result * result if root else result


def _run_reference(weights, grads, exp_avg_dtype, exp_avg_sq_dtype, master_dtype) -> List[torch.Tensor]:
    """torch's AdamW (foreach=False) with the moments and the masters rounded to their storage after each step."""
    params = [nn.Parameter(w.to(master_dtype).float().clone()) for w in weights]
    optimizer = torch.optim.AdamW(_groups(params), lr=LR, foreach=False)
    for step_grads in grads:
        for param, grad in zip(params, step_grads):
            param.grad = grad.clone()
        optimizer.step()
        for param in params:
            state = optimizer.state[param]
            state["exp_avg"].copy_(roundtrip(state["exp_avg"], exp_avg_dtype))
            state["exp_avg_sq"].copy_(roundtrip(state["exp_avg_sq"], exp_avg_sq_dtype, root=exp_avg_sq_dtype == FP8))
            if master_dtype == FP16:
                param.data.copy_(param.data.to(FP16).float())
    return [p.detach() for p in params]


def _run_ours(weights, grads, exp_avg_dtype, exp_avg_sq_dtype, master_dtype) -> PrecisionAwareAdamW:
    params = [nn.Parameter(w.clone().to(master_dtype)) for w in weights]
    optimizer = PrecisionAwareAdamW(_groups(params), lr=LR, exp_avg_dtype=exp_avg_dtype,
                                    exp_avg_sq_dtype=exp_avg_sq_dtype)
    for step_grads in grads:
        for param, grad in zip(params, step_grads):
            attach_grad(param, grad.clone())  # fp16 masters: as decoupled_grad
        optimizer.step()
    return optimizer


def _params(optimizer: torch.optim.Optimizer) -> List[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _in_shape_order(optimizer: torch.optim.Optimizer) -> List[torch.Tensor]:
    """The parameters in SHAPES order (the groups split them by dimension)."""
    params = _params(optimizer)
    return [params[i] for i in (0, 2, 1, 3)]


def test_all_fp32_is_torch_adamw_bit_for_bit() -> None:
    weights, grads = _data()
    reference = [nn.Parameter(w.clone()) for w in weights]
    torch_adamw = torch.optim.AdamW(_groups(reference), lr=LR, foreach=False)
    for step_grads in grads:
        for param, grad in zip(reference, step_grads):
            param.grad = grad.clone()
        torch_adamw.step()
    ours = _run_ours(weights, grads, FP32, FP32, FP32)
    for param, expected, start in zip(_in_shape_order(ours), reference, weights):
        assert not torch.equal(param, start)
        assert torch.equal(param, expected)
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(ours.state[param][key], torch_adamw.state[expected][key])
        assert float(ours.state[param]["step"]) == float(torch_adamw.state[expected]["step"]) == STEPS


@pytest.mark.parametrize("exp_avg,exp_avg_sq,master", [
    (BF16, BF16, FP32), (FP16, FP16, FP32), (FP8, FP8, FP32), (FP8, BF16, FP32), (BF16, FP8, FP16),
    (FP32, FP32, FP16)])
def test_low_precision_storage_is_a_cast_after_each_update(exp_avg, exp_avg_sq, master) -> None:
    weights, grads = _data(1)
    expected = _run_reference(weights, grads, exp_avg, exp_avg_sq, master)
    ours = _run_ours(weights, grads, exp_avg, exp_avg_sq, master)
    for param, reference in zip(_in_shape_order(ours), expected):
        assert param.dtype == master
        assert torch.equal(param.float(), reference), (param.float() - reference).abs().max()
        state = ours.state[param]
        assert state["exp_avg"].dtype == exp_avg and state["exp_avg_sq"].dtype == exp_avg_sq
        for key, dtype in (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
            assert (key + "_scale" in state) == (dtype in (FP8, FP16))


def test_fp16_moments_without_a_scale_would_underflow() -> None:
    """Why fp16 is scaled: the first step's exp_avg_sq of 1e-4 gradients is below fp16's smallest value."""
    grad = torch.tensor([1e-4, 3e-4, 2e-3])
    exp_avg_sq = (1 - 0.999) * grad * grad
    assert torch.all(exp_avg_sq.to(FP16) == 0)
    scale = storage_scale(exp_avg_sq.abs().max(), FP16)
    kept = dequantise(quantise(exp_avg_sq, scale, FP16), scale)
    torch.testing.assert_close(kept, exp_avg_sq, rtol=2 ** -11, atol=0)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The stored bits (so -0 and 0 differ)."""
    return tensor.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[tensor.element_size()])


def _edge_tensors(dtype: torch.dtype) -> List[torch.Tensor]:
    """Tensors whose maxima land on every rounding edge of the scaled range, plus random and degenerate ones."""
    generator = torch.Generator().manual_seed(3)
    target, largest = TARGET[dtype]
    edges = [largest, target, target / 2, target / 2 * (1 + 1e-6), target / 2 * (1 - 1e-6), largest / 2,
             largest / 2 + 1, largest / 2 + 6, largest * 0.99, 230.0, 0.75 * largest]
    tensors = []
    for edge in edges:
        for exponent in (-20, -3, 0, 5):
            body = torch.randn(64, generator=generator) * 10.0 ** -torch.randint(0, 8, (64,), generator=generator)
            body[0] = edge * 2.0 ** exponent
            tensors.append(body * (body.abs() <= edge * 2.0 ** exponent))  # the edge is the maximum
    tensors += [torch.zeros(8), torch.full((3,), 1e-30), torch.tensor([3e-38, -1e-39]), torch.randn(1000) * 1e4]
    return tensors


@pytest.mark.parametrize("dtype", [FP8, FP16], ids=["fp8", "fp16"])
def test_requantising_dequantised_values_gives_the_same_bytes(dtype) -> None:
    for tensor in _edge_tensors(dtype):
        scale = storage_scale(tensor.abs().max(), dtype)
        assert torch.frexp(scale)[0].item() == 0.5, "the scale is a power of two"
        stored = quantise(tensor, scale, dtype)
        values = dequantise(stored, scale)  # what a checkpoint holds
        again_scale = storage_scale(values.abs().max(), dtype)
        again = quantise(values, again_scale, dtype)
        assert again_scale == scale, (tensor.abs().max(), scale, again_scale)
        assert torch.equal(_bits(again), _bits(stored))


def test_the_target_448_would_double_the_scale_on_reload() -> None:
    """The edge the target 464 avoids: under 448, a maximum of 229 keeps scale 1 and rounds down to 224, whose
    scale is 2; under 464 both have scale 2."""
    naive = lambda amax: 2.0 ** math.floor(math.log2(448.0 / amax))  # noqa: E731
    assert naive(229.0) == 1.0 and torch.tensor(229.0).to(FP8).float() == 224.0 and naive(224.0) == 2.0
    tensor = torch.tensor([229.0, 1.0])
    scale = storage_scale(tensor.abs().max(), FP8)
    values = dequantise(quantise(tensor, scale, FP8), scale)
    assert scale == 2.0 and values[0] == 224.0 and storage_scale(values.abs().max(), FP8) == scale


@pytest.mark.parametrize("exp_avg,exp_avg_sq", [(FP8, FP8), (FP16, FP16), (BF16, FP8)])
def test_loading_the_saved_fp32_moments_changes_no_stored_byte(exp_avg, exp_avg_sq) -> None:
    weights, grads = _data(2)
    optimizer = _run_ours(weights, grads, exp_avg, exp_avg_sq, FP32)
    before = {id(p): {k: v.clone() for k, v in optimizer.state[p].items()} for p in _params(optimizer)}
    saved = {p: {k: v.clone() for k, v in moments_fp32(optimizer, p).items()} for p in _params(optimizer)}
    for state in optimizer.state.values():  # spoil the storage: the load must rebuild it
        for key, value in state.items():
            if key != "step":
                value.zero_() if value.dtype != FP8 else value.copy_(torch.zeros_like(value, dtype=FP32))
    load_moments(optimizer, saved)
    for param in _params(optimizer):
        for key, value in before[id(param)].items():
            stored = optimizer.state[param][key]
            assert stored.dtype == value.dtype
            assert torch.equal(_bits(stored), _bits(value)), key


def _tiny_trainer(extra: List[str]):
    from mindspeed_llm.training.training import setup

    argv = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2",
            "--train-iters", "2", "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "64", "--seed", "5", "--device", "cpu", "--eval-iters", "0", "--num-workers", "0",
            "--bf16", "--use-distributed-optimizer"]
    trainer = setup(argv + extra)
    trainer.train_step(trainer.train_iterator())
    return trainer


BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@pytest.mark.parametrize("main_grads,main_params,exp_avg,exp_avg_sq", [
    ("fp32", "fp32", "bf16", "bf16"), ("fp32", "fp32", "fp8", "fp8"), ("fp32", "fp16", "fp32", "fp32"),
    ("bf16", "fp32", "fp32", "fp32"), ("bf16", "fp16", "fp8", "fp16")])
def test_bytes_per_parameter_follow_the_formula(main_grads, main_params, exp_avg, exp_avg_sq) -> None:
    """bf16 weights 2 + grads (4 | 2) + (main params (4 | 2) + exp_avg + exp_avg_sq) / DP, DP = 1 here;
    the per-parameter fp32 scales of fp8/fp16 moments counted apart (4 bytes per piece)."""
    trainer = _tiny_trainer(["--use-precision-aware-optimizer", "--main-grads-dtype", main_grads,
                             "--main-params-dtype", main_params, "--exp-avg-dtype", exp_avg,
                             "--exp-avg-sq-dtype", exp_avg_sq])
    optimizer = trainer.optimizer
    count = sum(p.numel() for p in trainer.model.parameters())
    assert sum(p.master.numel() for p in optimizer.pieces) == count
    masters = sum(p.master.numel() * p.master.element_size() for p in optimizer.pieces)
    states = [optimizer.optimizer.state[p.master] for p in optimizer.pieces]
    moments = sum(s[k].numel() * s[k].element_size() for s in states for k in ("exp_avg", "exp_avg_sq"))
    scales = sum(v.numel() * v.element_size() for s in states for k, v in s.items() if k.endswith("_scale"))
    grads = sum(b.data.numel() * b.data.element_size() for b in trainer.dp.grad_buffers[0].buffers)
    grad_elements = sum(b.data.numel() for b in trainer.dp.grad_buffers[0].buffers)
    assert masters == count * BYTES[main_params]
    assert moments == count * (BYTES[exp_avg] + BYTES[exp_avg_sq])
    scaled = sum(dtype in ("fp8", "fp16") for dtype in (exp_avg, exp_avg_sq))
    assert scales == 4 * scaled * len(optimizer.pieces)
    assert grads == grad_elements * BYTES[main_grads] and grad_elements == count  # (DP 1: no padding)


def test_without_the_distributed_optimizer_it_is_refused() -> None:
    config = OptimizerConfig(use_precision_aware_optimizer=True, exp_avg_dtype=BF16)
    with pytest.raises(ValueError, match="needs --use-distributed-optimizer"):
        build_torch_optimizer([{"params": [nn.Parameter(torch.zeros(2))]}], config)
    assert isinstance(build_torch_optimizer([{"params": [nn.Parameter(torch.zeros(2))]}], config, distributed=True),
                      PrecisionAwareAdamW)

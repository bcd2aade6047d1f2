"""The chunked output layer + cross-entropy (``--cross-entropy-chunk-size``) inside the model, at TP=1.

Against the path that materialises the logits: the loss and every parameter's gradient agree in fp32
(label smoothing, a padding mask, a vocabulary that is not a multiple of the chunk, tied and untied
output layers, MTP's extra heads), twenty training steps agree, and bf16 agrees within bf16 rounding.
Which path runs by default follows the dtype the output GEMM runs in: chunks in bf16, the logits in fp32,
also for bf16 weights on a CPU without bf16 units (whose products run in fp32).
The TP=2/4 and sequence-parallel cases are in tests/distributed/test_tp_layers.py (the function) and
tests/distributed/test_training_equivalence.py (training).
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

import core.models.gpt_model as gpt_model
from core import device
from core.tensor_parallel import cross_entropy
from core import fused as fused_ops
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.training import setup

VOCAB = 100
ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--position-embedding-type", "rope", "--normalization", "RMSNorm",
    "--swiglu", "--micro-batch-size", "4", "--global-batch-size", "4", "--train-iters", "20", "--lr", "1e-2",
    "--attention-dropout", "0", "--hidden-dropout", "0", "--mock-data", "--tokenizer-type", "NullTokenizer",
    "--vocab-size", str(VOCAB), "--seed", "5", "--device", "cpu", "--eval-iters", "0", "--num-workers", "0",
    "--init-method-std", "0.2",
]


def _loss_and_grads(argv: List[str]) -> Dict[str, torch.Tensor]:
    """One micro-batch's loss (the second half of every sequence masked out) and the parameter gradients."""
    trainer = setup(argv)
    batch = next(trainer.train_iterator())
    batch["loss_mask"][:, : batch["loss_mask"].size(1) // 2] = 0.0
    loss, _ = trainer.task.forward_step(batch, trainer.model)
    loss.backward()
    result = {"loss": loss.detach()}
    for name, param in trainer.model.named_parameters():
        result[name] = param.main_grad.detach().clone()  # the DDP buffer's fp32 gradient
    return result


@pytest.mark.parametrize("extra", [
    [],
    ["--label-smoothing-factor", "0.1", "--untie-embeddings-and-output-weights"],
    ["--add-output-layer-bias", "--untie-embeddings-and-output-weights", "--output-logit-softcapping", "2.0"],
    ["--mtp-num-layers", "1"],
], ids=["tied", "smoothing_untied", "bias_softcap", "mtp"])
def test_chunked_loss_and_gradients_equal_the_materialised_logits(extra: List[str]) -> None:
    plain = _loss_and_grads(ARGV + extra + ["--cross-entropy-chunk-size", "0"])
    chunked = _loss_and_grads(ARGV + extra + ["--cross-entropy-chunk-size", "13"])  # 100 = 7 * 13 + 9
    assert set(plain) == set(chunked)
    for name, value in plain.items():
        torch.testing.assert_close(chunked[name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert plain["loss"].item() > 0


def _train(argv: List[str], steps: int) -> List[float]:
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(steps)]


def test_twenty_steps_equal() -> None:
    plain = _train(ARGV + ["--cross-entropy-chunk-size", "0"], 20)
    chunked = _train(ARGV + ["--cross-entropy-chunk-size", "32"], 20)
    torch.testing.assert_close(torch.tensor(chunked), torch.tensor(plain), rtol=1e-5, atol=0)
    assert plain[-1] < plain[0] - 0.3, "the run must learn, or equality proves little"


def test_bf16_within_bf16_rounding() -> None:
    """20 bf16 steps, chunks given (the default takes them only on a CPU with bf16 units): the rounding moves the
    losses by ~2e-3 (up to 1.1e-2 at step 6 on some CPUs, whose bf16 GEMMs accumulate differently) while the run
    lowers them by ~0.7, so 2e-2 still sees a wrong chunked loss."""
    plain = _train(ARGV + ["--bf16", "--cross-entropy-chunk-size", "0"], 20)
    chunked = _train(ARGV + ["--bf16", "--cross-entropy-chunk-size", "32"], 20)
    assert sum(plain[-5:]) / 5 < plain[0] - 0.3, "the run must learn, or agreement proves little"
    torch.testing.assert_close(torch.tensor(chunked), torch.tensor(plain), rtol=0, atol=2e-2)


@pytest.mark.parametrize("extra, chunked, units", [([], False, True), (["--bf16"], True, True),
                                                   (["--bf16"], False, False),
                                                   (["--cross-entropy-chunk-size", "8"], True, True),
                                                   (["--bf16", "--cross-entropy-chunk-size", "0"], False, True)])
def test_default_path_follows_the_gemm_dtype(monkeypatch, extra: List[str], chunked: bool, units: bool) -> None:
    """``units``: whether the CPU multiplies bf16 in hardware (without, bf16 GEMMs run in fp32: no chunks)."""
    monkeypatch.setattr(device, "cpu_has_half_gemm_units", lambda dtype: units)
    calls = []
    original = gpt_model.linear_vocab_parallel_cross_entropy
    monkeypatch.setattr(gpt_model, "linear_vocab_parallel_cross_entropy",
                        lambda *a, **k: calls.append(k["chunk"]) or original(*a, **k))
    _train(ARGV + extra, 1)
    assert bool(calls) == chunked


@pytest.mark.parametrize("flag", [["--cross-entropy-loss-fusion"], ["--cross-entropy-chunk-size", "8"]])
def test_loss_flags_are_refused_for_a_reward_model(flag: List[str]) -> None:
    """--stage orm's loss reads a value head: a flag shaping the vocabulary loss would be ignored."""
    validate_args(parse_args(ARGV + ["--stage", "orm"]), 1)  # control: the reward model alone is valid
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(ARGV + ["--stage", "orm"] + flag), 1)
    assert str(info.value) == (f"{flag[0]} has no effect with --stage orm (its loss reads a value head, not the "
                               f"vocabulary's logits); drop {flag[0]}")


def test_negative_chunk_is_refused() -> None:
    with pytest.raises(ArgumentError, match="--cross-entropy-chunk-size -1 must be 0"):
        validate_args(parse_args(ARGV + ["--cross-entropy-chunk-size", "-1"]), 1)


# ----------------------------------------------------------------------------- --cross-entropy-loss-fusion

@pytest.fixture
def fresh_kernels():
    """The fused loss kernels decide and compile afresh, and leave no choice behind."""
    fused_ops.reset_choices()
    yield
    fused_ops.reset_choices()


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 1e-5)])
def test_fused_block_kernels_equal_the_reference(fresh_kernels, dtype: torch.dtype, tolerance: float) -> None:
    """The compiled block functions against their references: fp32 and bf16 blocks (the math is fp32 either
    way), with a scale and a cap, label smoothing, rows whose target is elsewhere, and two block widths."""
    assert cross_entropy.cross_entropy_partials_kernel("cpu", False)[0] == "reference"
    name, partials = cross_entropy.cross_entropy_partials_kernel("cpu", True)
    _, grads = cross_entropy.cross_entropy_grads_kernel("cpu", True)
    assert name == "compiled"
    generator = torch.Generator().manual_seed(0)
    running_max = torch.randn(12, generator=generator)
    sums = torch.rand(3, 12, generator=generator)
    for width in (16, 9):  # the last chunk is narrower: one dynamic-shape compile serves both
        raw = (3 * torch.randn(12, width, generator=generator)).to(dtype)
        target_col = torch.randint(-1, width, (12,), generator=generator)
        for scale, cap in ((None, None), (0.5, 2.0)):
            args = (raw, target_col, running_max, sums, scale, cap, True)
            for ours, expected in zip(partials(*args), cross_entropy.block_partials(*args)):
                torch.testing.assert_close(ours, expected, rtol=tolerance, atol=tolerance)
            args = (raw, running_max + 2.0, target_col, torch.rand(12, generator=generator), 0.9, 0.001, scale, cap)
            ours, expected = grads(*args), cross_entropy.block_logit_grads(*args)
            assert ours.dtype == dtype
            torch.testing.assert_close(ours.float(), expected.float(), rtol=tolerance, atol=tolerance)
    assert all(not region.failed and region.compile_seconds > 0 for region in fused_ops._COMPILED.values())


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_materialised_exp_kernels_equal_the_reference(fresh_kernels, dtype: torch.dtype, tolerance: float) -> None:
    """The materialised fused loss's kernels: compiled logit_exps and exp_logit_grads equal their references,
    and the gradient from the kept numerators equals block_logit_grads' recomputed softmax (bf16: the
    numerators are kept in bf16, so to bf16 rounding)."""
    name, exps_of = cross_entropy.logit_exps_kernel("cpu", True)
    _, grads_of = cross_entropy.exp_logit_grads_kernel("cpu", True)
    assert name == "compiled"
    generator = torch.Generator().manual_seed(0)
    for width in (16, 9):
        logits = (3 * torch.randn(12, width, generator=generator)).to(dtype)
        target_col = torch.randint(-1, width, (12,), generator=generator)
        ours, expected = exps_of(logits, target_col, True), cross_entropy.logit_exps(logits, target_col, True)
        for got, want in zip(ours, expected):
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.float(), want.float(), rtol=1e-5, atol=1e-5)
        row_max, sums, exps = expected
        log_sum_exp = row_max + sums[0].log()  # [n]
        grad_loss = torch.rand(12, generator=generator)
        args = (exps, torch.exp(row_max - log_sum_exp), target_col, grad_loss, 0.9, 0.001)
        ours, expected = grads_of(*args), cross_entropy.exp_logit_grads(*args)
        assert ours.dtype == dtype
        torch.testing.assert_close(ours.float(), expected.float(), rtol=1e-5, atol=1e-5)
        recomputed = cross_entropy.block_logit_grads(logits, log_sum_exp, target_col, grad_loss, 0.9, 0.001,
                                                     None, None)
        torch.testing.assert_close(expected.float(), recomputed.float(), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("chunk", ["0", "13"], ids=["materialised", "chunked"])
def test_fused_loss_and_gradients_equal_the_unfused(fresh_kernels, chunk: str) -> None:
    extra = ["--label-smoothing-factor", "0.1", "--untie-embeddings-and-output-weights",
             "--cross-entropy-chunk-size", chunk]
    unfused = _loss_and_grads(ARGV + extra)
    fused = _loss_and_grads(ARGV + extra + ["--cross-entropy-loss-fusion"])
    for name, value in unfused.items():
        torch.testing.assert_close(fused[name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    regions = list(fused_ops._COMPILED.values())  # the forward's and the backward's kernels compiled and ran
    assert len(regions) == 2 and all(region.compile_seconds > 0 and not region.failed for region in regions)

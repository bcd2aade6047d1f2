"""Griffin's RG-LRU (core/transformer/rg_lru.py): the chunked recurrence equals the token-by-token one, forward and
backward and from a carried state; a sequence cut in two (the carry passed) gives the whole one's output; the
square root's gradient is bounded as Griffin's; bad flags are one-line errors.

    python -m pytest -q tests/unit/test_rg_lru.py
"""
from __future__ import annotations

from typing import Any

import pytest
import torch

from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from core.transformer.rg_lru import MAX_SQRT_GRADIENT, RecurrentBlock, _SqrtBoundedGradient, rg_lru_chunked, \
    rg_lru_recurrent
from mindspeed_llm.training.metrics import forward_flops_per_token


def _inputs(seq: int = 23, width: int = 6):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, seq, width, generator=generator, dtype=torch.float32, requires_grad=True)
    log_a = (-torch.rand(2, seq, width, generator=generator, dtype=torch.float32)).requires_grad_()
    state = torch.randn(2, width, generator=generator, dtype=torch.float32)
    return x, log_a, state


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_chunked_equals_the_recurrence_forward_and_backward(chunk: int) -> None:
    x, log_a, state = _inputs()
    reference, last = rg_lru_recurrent(x, log_a, state)
    chunked, chunked_last = rg_lru_chunked(x, log_a, state, chunk)
    torch.testing.assert_close(chunked, reference, rtol=1e-5, atol=1e-6)  # both in fp32, the state's dtype
    torch.testing.assert_close(chunked_last, last, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(reference)
    grads = torch.autograd.grad((reference * weights).sum(), (x, log_a))
    chunked_grads = torch.autograd.grad((chunked * weights).sum(), (x, log_a))
    for got, expected in zip(chunked_grads, grads):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_cut_sequence_continues_from_its_carry() -> None:
    """The block's core from the carry of the first part gives the whole sequence's output (what CP relays)."""
    config = TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=4, vocab_size=32, ffn_hidden_size=32,
                               experimental_attention_variant="rg_lru", linear_attention_freq="[1]", lru_width=24,
                               lru_conv_width=3, init_method_std=0.3)
    block = build_model(config, layout_state(1), torch.device("cpu"), seed=0).decoder.layers["0"].self_attention
    assert isinstance(block, RecurrentBlock)
    x = torch.randn(2, 11, 24, generator=torch.Generator().manual_seed(1))
    whole, _ = block._core(x, None)
    first, carry = block._core(x[:, :4], None)
    second, _ = block._core(x[:, 4:], carry)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole, rtol=1e-5, atol=1e-6)
    restarted, _ = block._core(x[:, 4:], None)  # a new sequence: no carried state, its first input unscaled
    assert not torch.allclose(restarted, second)


def test_the_square_root_gradient_is_bounded() -> None:
    x = torch.tensor([0.0, 1e-12, 0.25], requires_grad=True)
    _SqrtBoundedGradient.apply(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([MAX_SQRT_GRADIENT, MAX_SQRT_GRADIENT, 1.0]))


def test_flops_count_the_block() -> None:
    base = dict(num_layers=1, hidden_size=16, num_attention_heads=4, vocab_size=32, ffn_hidden_size=32,
                make_vocab_size_divisible_by=1)
    config = TransformerConfig(**base, experimental_attention_variant="rg_lru", linear_attention_freq="[1]",
                               lru_width=24, lru_conv_width=3)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    weights = sum(p.numel() for n, p in model.named_parameters()
                  if p.dim() == 2 and "word_embeddings" not in n and not n.endswith("bias"))  # the gates' biases are 2-D
    gates = 2 * 4 * 6 * 6  # two block-diagonal gates, 4 blocks of 6 x 6
    conv = 24 * 3
    expected = 2 * (weights + gates + conv + 16 * 32)  # + the (tied) output layer
    assert forward_flops_per_token(config, 8) == (expected, 0.0)


@pytest.mark.parametrize("overrides, message", [
    (dict(lru_width=30), "--lru-width (30) must be a multiple of --num-attention-heads (4)"),
    (dict(lru_conv_width=0), "--lru-conv-width (0) must be at least 1"),
])
def test_bad_rg_lru_flags_are_one_line(overrides: Any, message: str) -> None:
    with pytest.raises(ValueError) as error:
        TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, vocab_size=32, ffn_hidden_size=32,
                          experimental_attention_variant="rg_lru", linear_attention_freq="[1,0]", **overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_rg_lru_flags_without_the_blocks_are_refused() -> None:
    with pytest.raises(ValueError, match="--lru-width applies to Griffin's recurrent blocks"):
        TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, vocab_size=32, ffn_hidden_size=32,
                          lru_width=24)

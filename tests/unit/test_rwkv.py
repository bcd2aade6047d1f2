"""RWKV-4's mixers (core/transformer/rwkv.py): the stable WKV recurrence equals the defining sums, and continues
from its state; the chunked WKV equals it forward and backward; the token shift continues from its carry; the
registry maps HF blocks to our 'WC' pairs and refuses what it cannot say; bad flags are one-line errors.

    python -m pytest -q tests/unit/test_rwkv.py
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from core.transformer.config import TransformerConfig
from core.transformer.rwkv import token_shift_core, wkv_chunked, wkv_recurrent
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family


def _defining_sums(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                   ) -> torch.Tensor:
    """wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t) / (the same without v), w = exp(decay)."""
    w = torch.exp(time_decay.double())
    out = torch.empty_like(k, dtype=torch.float64)
    for t in range(k.size(1)):
        past = torch.arange(t, dtype=torch.float64)
        weights = torch.exp(-(t - 1 - past)[None, :, None] * w + k[:, :t].double())  # [b, t, c]
        current = torch.exp(time_first.double() + k[:, t].double())  # [b, c]
        out[:, t] = ((weights * v[:, :t].double()).sum(1) + current * v[:, t].double()) / (weights.sum(1) + current)
    return out


def test_wkv_equals_its_definition_and_continues_from_its_state() -> None:
    generator = torch.Generator().manual_seed(0)
    k, v = torch.randn(2, 9, 5, generator=generator) * 3, torch.randn(2, 9, 5, generator=generator)
    decay, first = torch.randn(5, generator=generator), torch.randn(5, generator=generator)
    whole, _ = wkv_recurrent(decay, first, k, v)
    torch.testing.assert_close(whole.double(), _defining_sums(decay, first, k, v), rtol=1e-5, atol=1e-6)
    head, state = wkv_recurrent(decay, first, k[:, :4], v[:, :4])
    tail, _ = wkv_recurrent(decay, first, k[:, 4:], v[:, 4:], state)
    torch.testing.assert_close(torch.cat([head, tail], dim=1), whole)


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_chunked_wkv_equals_the_recurrence_forward_and_backward(chunk: int) -> None:
    generator = torch.Generator().manual_seed(1)
    k = (torch.randn(2, 19, 5, generator=generator) * 3).requires_grad_()
    v = torch.randn(2, 19, 5, generator=generator).requires_grad_()
    decay, first = (torch.randn(5, generator=generator).requires_grad_() for _ in range(2))
    _, start = wkv_recurrent(decay.detach(), first.detach(), torch.randn(2, 6, 5, generator=generator) * 3,
                             torch.randn(2, 6, 5, generator=generator))
    weights = torch.randn(2, 19, 5, generator=generator)
    results = []
    for form in (wkv_recurrent, lambda *a: wkv_chunked(*a, chunk=chunk)):
        out, state = form(decay, first, k, v, start)
        loss = (out * weights).sum() + state[0].sum() + state[1].sum()
        results.append((out, state, torch.autograd.grad(loss, (k, v, decay, first))))
    (out_r, state_r, grads_r), (out_c, state_c, grads_c) = results
    torch.testing.assert_close(out_c, out_r, rtol=1e-5, atol=1e-5)
    for chunked, recurrent in zip(state_c + grads_c, state_r + grads_r):
        assert torch.isfinite(chunked).all()
        torch.testing.assert_close(chunked, recurrent, rtol=1e-4, atol=1e-5)


def test_token_shift_continues_from_its_carry() -> None:
    x = torch.arange(12.0).view(1, 6, 2)
    shifted, carry = token_shift_core(x, None)
    assert torch.equal(shifted[:, 0], torch.zeros(1, 2)) and torch.equal(shifted[:, 1:], x[:, :-1])
    first, carry = token_shift_core(x[:, :3], None)
    second, _ = token_shift_core(x[:, 3:], carry)
    assert torch.equal(torch.cat([first, second], dim=1), shifted)


RWKV_HF = dict(model_type="rwkv", hidden_size=64, num_hidden_layers=3, vocab_size=128, attention_hidden_size=48,
               intermediate_size=96, context_length=256, layer_norm_epsilon=1e-5, rescale_every=6)


def test_rwkv_blocks_are_wc_pairs_both_ways() -> None:
    cfg = config_from_hf(RWKV_HF, "rwkv")
    assert cfg.hybrid_override_pattern == "WCWCWC" and cfg.num_layers == 6 and cfg.embed_layernorm
    assert (cfg.rwkv_attention_size, cfg.ffn_hidden_size, cfg.position_embedding_type) == (48, 96, "none")
    exported = get_family("rwkv").to_hf_config(cfg)
    assert (exported["num_hidden_layers"], exported["attention_hidden_size"], exported["intermediate_size"]) == \
        (3, 48, 96)
    with pytest.raises(RegistryError, match="rwkv needs --hybrid-override-pattern of 'WC' pairs"):
        get_family("rwkv").to_hf_config(dataclasses.replace(cfg, hybrid_override_pattern="WCCWWC"))
    with pytest.raises(RegistryError, match="rwkv tie_word_embeddings=True is not supported"):
        config_from_hf({**RWKV_HF, "tie_word_embeddings": True}, "rwkv")


@pytest.mark.parametrize("overrides, message", [
    (dict(hybrid_override_pattern="WC", rwkv_attention_size=30, tensor_model_parallel_size=4),
     "--rwkv-attention-size (30) is not divisible by --tensor-model-parallel-size (4)"),
    (dict(hybrid_override_pattern="*-", rwkv_attention_size=32, position_embedding_type="rope"),
     "--rwkv-attention-size applies to RWKV time-mixing layers"),
])
def test_bad_rwkv_flags_are_one_line(overrides: dict, message: str) -> None:
    values = dict(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=64, ffn_hidden_size=64,
                  position_embedding_type="none")
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{**values, **overrides})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_flops_count_both_mixers() -> None:
    """6 x the matmul weights a token meets (the token-shift mixes and the per-channel decays aside): key, value,
    receptance and output of time mixing, key, value and receptance of channel mixing, the output layer."""
    from core.models.gpt_model import build_model, layout_state
    from mindspeed_llm.training.metrics import training_flops_per_token

    config = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=1, vocab_size=32, ffn_hidden_size=48,
                               hybrid_override_pattern="WC", rwkv_attention_size=24, position_embedding_type="none",
                               make_vocab_size_divisible_by=1, untie_embeddings_and_output_weights=True)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "word_embeddings" not in n)
    assert training_flops_per_token(config, 8) == 6 * weights

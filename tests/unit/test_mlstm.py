"""xLSTM's mLSTM (core/transformer/mlstm.py): the stabilised recurrence equals the defining sums (the running
maximum starting at 0, which the eps term exposes), the chunked form equals the recurrence forward and backward at
any chunk size and from any state, both continue from their state; the registry maps HF blocks to mLSTM layers and
refuses what it cannot say; bad flags are one-line errors; the FLOPs count every projection.

    python -m pytest -q tests/unit/test_mlstm.py
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import pytest
import torch
import torch.nn.functional as F

from core.transformer.config import TransformerConfig
from core.transformer.mlstm import mlstm_chunked, mlstm_recurrent
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family


def _inputs(seed: int = 0, batch: int = 2, seq: int = 11, heads: int = 3, dk: int = 4, dv: int = 5,
            gate_scale: float = 3.0) -> Tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seq, heads, dk, generator=generator)
    k = torch.randn(batch, seq, heads, dk, generator=generator)
    v = torch.randn(batch, seq, heads, dv, generator=generator)
    igate = torch.randn(batch, seq, heads, generator=generator) * gate_scale
    fgate = torch.randn(batch, seq, heads, generator=generator) * 2 + 1
    return q, k, v, igate, fgate


def _defining_sums(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, igate: torch.Tensor, fgate: torch.Tensor,
                   eps: float) -> torch.Tensor:
    """h_t = q_t C_t / (max(|q_t n_t|, 1) + eps e^{m_t}) with the unscaled C_t = sum_j e^{b_t - b_j + i_j} k_j v_j^T
    (b the cumulative log forget gate) and m_t = max(b_t, max_j b_t - b_j + i_j): the maximum starts at 0."""
    q, k, v = q.double() * q.size(-1) ** -0.5, k.double(), v.double()
    cumulative = torch.cumsum(F.logsigmoid(fgate.double()), dim=1)  # [b, s, h]
    out = torch.empty(*q.shape[:3], v.size(-1), dtype=torch.float64)
    for t in range(q.size(1)):
        exponents = cumulative[:, t:t + 1] - cumulative[:, :t + 1] + igate[:, :t + 1].double()  # [b, t+1, h]
        weights = torch.exp(exponents)
        memory = torch.einsum("bjh,bjhk,bjhv->bhkv", weights, k[:, :t + 1], v[:, :t + 1])
        normaliser = torch.einsum("bjh,bjhk->bhk", weights, k[:, :t + 1])
        maximum = torch.maximum(cumulative[:, t], exponents.amax(dim=1))  # [b, h]
        numerator = torch.einsum("bhk,bhkv->bhv", q[:, t], memory)
        denominator = torch.einsum("bhk,bhk->bh", q[:, t], normaliser).abs().clamp(min=1.0) + eps * torch.exp(maximum)
        out[:, t] = numerator / denominator[..., None]
    return out


@pytest.mark.parametrize("eps", [0.0, 1e-2])
def test_recurrence_equals_its_definition(eps: float) -> None:
    q, k, v, igate, fgate = _inputs(gate_scale=4.0)
    out, _ = mlstm_recurrent(q, k, v, igate, fgate, eps=eps)
    torch.testing.assert_close(out.double(), _defining_sums(q, k, v, igate, fgate, eps), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("chunk", [1, 3, 4, 64])
def test_chunked_equals_the_recurrence_forward_and_backward(chunk: int) -> None:
    leaves = [t.requires_grad_() for t in _inputs(seed=1)]
    start = tuple(t.requires_grad_() for t in mlstm_recurrent(*[t.detach() for t in _inputs(seed=2)])[1])
    weights = torch.randn(2, 11, 3, 5, generator=torch.Generator().manual_seed(3))
    results = {}
    for name, form in (("recurrent", lambda *a: mlstm_recurrent(*a, eps=1e-6)),
                       ("chunked", lambda *a: mlstm_chunked(*a, eps=1e-6, chunk_size=chunk))):
        out, state = form(*leaves, start)
        loss = (out * weights).sum() + sum(part.sum() for part in state)
        grads = torch.autograd.grad(loss, leaves + list(start))
        results[name] = (out, state, grads)
    (out_r, state_r, grads_r), (out_c, state_c, grads_c) = results["recurrent"], results["chunked"]
    torch.testing.assert_close(out_c, out_r, rtol=1e-4, atol=1e-4)
    for chunked, recurrent in zip(state_c + grads_c, state_r + grads_r):
        torch.testing.assert_close(chunked, recurrent, rtol=1e-4, atol=1e-4)


def test_both_forms_continue_from_their_state() -> None:
    q, k, v, igate, fgate = _inputs(seq=13)
    whole, final = mlstm_recurrent(q, k, v, igate, fgate)
    for form in (mlstm_recurrent, lambda *a: mlstm_chunked(*a, chunk_size=4)):
        head, state = form(q[:, :6], k[:, :6], v[:, :6], igate[:, :6], fgate[:, :6])
        tail, end = form(q[:, 6:], k[:, 6:], v[:, 6:], igate[:, 6:], fgate[:, 6:], state)
        torch.testing.assert_close(torch.cat([head, tail], dim=1), whole, rtol=1e-4, atol=1e-4)
        for part, expected in zip(end, final):
            torch.testing.assert_close(part, expected, rtol=1e-4, atol=1e-4)


XLSTM_HF = dict(model_type="xlstm", hidden_size=256, num_hidden_layers=3, num_heads=4, vocab_size=128,
                qk_dim_factor=0.5, v_dim_factor=1.0, ffn_proj_factor=2.667, ffn_round_up_to_multiple_of=64,
                gate_soft_cap=12.0, output_logit_soft_cap=25.0, eps=1e-5, norm_eps=1e-5)


def test_xlstm_blocks_are_mlstm_layers_both_ways() -> None:
    cfg = config_from_hf(XLSTM_HF, "xlstm")
    assert [cfg.layer_parts(i) for i in range(3)] == [("mlstm", "dense")] * 3
    assert (cfg.linear_num_key_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim) == (4, 32, 64)
    assert (cfg.ffn_hidden_size, cfg.activation, cfg.mlstm_gate_soft_cap, cfg.mlstm_eps) == (704, "swiglu", 12.0, 1e-5)
    assert (cfg.output_logit_softcapping, cfg.norm_epsilon, cfg.position_embedding_type) == (25.0, 1e-5, "none")
    exported = get_family("xlstm").to_hf_config(cfg)
    assert exported["num_heads"] == 4 and int(256 * exported["qk_dim_factor"]) == 128
    assert config_from_hf({**exported, "model_type": "xlstm"}, "xlstm") == cfg
    kept = get_family("xlstm").to_hf_config(cfg, XLSTM_HF)  # the published spelling of the MLP width survives
    assert (kept["ffn_proj_factor"], kept["ffn_round_up_to_multiple_of"]) == (2.667, 64)
    resized = get_family("xlstm").to_hf_config(dataclasses.replace(cfg, ffn_hidden_size=768), XLSTM_HF)
    assert (resized["ffn_proj_factor"], resized["ffn_round_up_to_multiple_of"]) == (3.0, 64)
    with pytest.raises(RegistryError, match="xlstm has mLSTM layers only"):
        get_family("xlstm").to_hf_config(dataclasses.replace(cfg, linear_attention_freq="[1,0,1]"))
    with pytest.raises(RegistryError, match="xlstm caps its gates and logits always"):
        get_family("xlstm").to_hf_config(dataclasses.replace(cfg, output_logit_softcapping=None))


@pytest.mark.parametrize("overrides, message", [
    (dict(use_bias=True), "xlstm use_bias=True is not supported"),
    (dict(weight_mode="fused"), "xlstm weight_mode 'fused' is not supported"),
    (dict(num_heads=3), "must be divisible by num_heads (3)"),
])
def test_xlstm_configs_it_cannot_build_are_refused(overrides: dict, message: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**XLSTM_HF, **overrides}, "xlstm")
    assert message in str(error.value) and "\n" not in str(error.value)


MLSTM_GPT = dict(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=64, ffn_hidden_size=64,
                 position_embedding_type="none", experimental_attention_variant="mlstm", linear_attention_freq="[1,1]",
                 linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=4, linear_value_head_dim=8)


@pytest.mark.parametrize("overrides, message", [
    (dict(linear_num_value_heads=8), "mLSTM layers have one head count for q, k and v"),
    (dict(tensor_model_parallel_size=8, linear_num_key_heads=4), "--linear-num-key-heads (4) must be divisible by "
                                                                   "--tensor-model-parallel-size (8)"),
    (dict(mlstm_eps=1e-3), "--mlstm-eps applies to mLSTM layers"),
])
def test_bad_mlstm_flags_are_one_line(overrides: dict, message: str) -> None:
    values = MLSTM_GPT if "mlstm_eps" not in overrides else dict(num_layers=2, hidden_size=32, num_attention_heads=4,
                                                                 vocab_size=64, ffn_hidden_size=64)
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{**values, **overrides})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_flops_count_every_projection() -> None:
    """6 x the matmul weights a token meets (the cell's own work aside: 4 h dk dv per token, forward), with the MLP
    and the output layer."""
    from core.models.gpt_model import build_model, layout_state
    from mindspeed_llm.training.metrics import training_flops_per_token

    config = TransformerConfig(**MLSTM_GPT, make_vocab_size_divisible_by=1, untie_embeddings_and_output_weights=True,
                               activation="swiglu")
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "word_embeddings" not in n)
    cell = 3 * 4 * 4 * 4 * 8 * config.num_layers  # 3 (forward and backward) x 4 heads dk dv per layer
    assert training_flops_per_token(config, 8) == 6 * weights + cell

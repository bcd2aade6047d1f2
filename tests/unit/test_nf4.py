"""NF4 storage of frozen linear weights (QLoRA): the format, its errors, its memory, the layers.

* The 16 NF4 values built from normal quantiles equal the values the QLoRA paper publishes, bit for bit;
  weights made of code values times a block scale come back exactly, with the codes in the published
  nibble order; every other weight goes to its nearest code (checked against all 16).
* Random weights: per-element error within half the widest NF4 gap times the block absmax (plus the
  absmax's own double-quantisation error); the double-quantised absmax within half a dynamic-code gap.
* Memory: about 0.516 bytes per weight with double quantisation, 0.5625 without.
* ColumnParallel/RowParallel layers with NF4 weights give the product of the dequantised fp32 weight
  (forward and input gradient), keep no dense weight for the backward, and have no weight parameter;
  a tiny GPT model with its linears quantised gives the logits of the same model holding the
  dequantised weights; a non-linear or unknown target is refused in one line with nothing changed.
* TP: a rank's shard quantised alone has the codes and block absmax of the same rows (columns) of the
  TP1 quantisation when blocks align (fused QKV segments included).
* bitsandbytes, where installed (its CPU backend; CUDA too), writes the same bytes and dequantises our states the same.

    python -m pytest -q tests/unit/test_nf4.py
"""
from __future__ import annotations

import copy
from typing import List

import pytest
import torch
import torch.nn.functional as F

from core.models.gpt_model import GPTModel, build_model, layout_state
from core.quantization import (NF4State, NF4Tensor, QuantizationError, dequantize_nf4, dequantized_state_dict,
                               dynamic_code, nf4_code, nf4_kernel, quantize_linear_, quantize_module_linears,
                               quantize_nf4)
from core.quantization import nf4 as nf4_module
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from core.tensor_parallel.param_meta import Segment, param_meta
from core.transformer.config import TransformerConfig

# Appendix E of the QLoRA paper (and bitsandbytes' NF4 table): the 16 NF4 values.
PUBLISHED_NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0]
LINEARS = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
MODEL = dict(num_layers=2, hidden_size=64, num_attention_heads=4, num_query_groups=2, vocab_size=40,
             ffn_hidden_size=128, normalization="RMSNorm", activation="swiglu", add_bias_linear=False,
             attention_dropout=0.0, hidden_dropout=0.0, make_vocab_size_divisible_by=1, init_method_std=0.2)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _codes(state: NF4State) -> torch.Tensor:
    """The 4-bit indices of every weight, high nibble first: ``[n]`` int64 (written out, not the module's)."""
    pairs = torch.stack([state.packed.long() >> 4, state.packed.long() & 0xF], dim=1)  # [ceil(n/2), 2]
    return pairs.view(-1)[:state.numel]


def _widest_half_gap(code: torch.Tensor) -> float:
    return float((code[1:] - code[:-1]).max() / 2)


# ---------------------------------------------------------------------------------------------- format

def test_nf4_code_is_the_published_table():
    assert torch.equal(nf4_code(), torch.tensor(PUBLISHED_NF4))


def test_dynamic_code_is_the_signed_8bit_tree():
    code = dynamic_code()
    assert code.numel() == 256 and torch.equal(code, code.unique())  # 256 distinct values, ascending
    assert code[0] == -code[-2] and code[-1] == 1.0 and (code == 0).sum() == 1
    positive = code[code > 0]
    assert torch.allclose(positive[0], torch.tensor(0.55e-6)) and positive.numel() == 128  # 10^-6 * (0.1+1)/2
    for exponent in range(7):  # 2**e fractions at the scale 10**(e-6)
        in_decade = ((positive >= 10 ** (exponent - 6) * 0.1) & (positive < 10 ** (exponent - 6))).sum()
        assert in_decade == 2**exponent


@pytest.mark.parametrize("double_quant", [False, True])
def test_code_points_round_trip_exactly(double_quant):
    """Each block: the 16 code values (4 times, shuffled) times one scale; equal scales under double quant."""
    blocks = 6
    order = torch.stack([torch.randperm(64, generator=_gen(b)) % 16 for b in range(blocks)])  # [6, 64]
    scales = torch.full((blocks, 1), 0.5) if double_quant else torch.rand(blocks, 1, generator=_gen(9)) + 0.1
    weight = (nf4_code()[order] * scales).view(12, 32)
    state = quantize_nf4(weight, double_quant=double_quant)
    assert torch.equal(_codes(state), order.view(-1))
    assert state.packed[0] == (order.view(-1)[0] << 4 | order.view(-1)[1])  # first weight in the high nibble
    assert torch.equal(dequantize_nf4(state), weight)


def test_every_weight_takes_its_nearest_code():
    weight = torch.randn(40, 96, generator=_gen(1))
    state = quantize_nf4(weight, double_quant=False)
    scaled = weight.view(-1, 64) / state.absmax.unsqueeze(1)  # [blocks, 64] in [-1, 1]
    distance = (scaled.reshape(-1, 1) - nf4_code()).abs()  # [n, 16]
    chosen = distance.gather(1, _codes(state).unsqueeze(1)).squeeze(1)
    assert torch.all(chosen <= distance.min(dim=1).values)
    assert torch.equal(state.absmax, weight.view(-1, 64).abs().amax(1))


@pytest.mark.parametrize("shape,double_quant", [((96, 200), False), ((96, 200), True), ((7, 13), True)])
def test_random_weights_error_bound(shape, double_quant):
    weight = torch.randn(*shape, generator=_gen(2)) * 0.05
    state = quantize_nf4(weight, double_quant=double_quant)
    restored = dequantize_nf4(state)
    assert restored.shape == weight.shape and state.packed.numel() == -(-weight.numel() // 2)
    flat = F.pad(weight.reshape(-1), (0, -weight.numel() % 64)).view(-1, 64)  # [blocks, 64]
    true_absmax = flat.abs().amax(1)
    bound = true_absmax * _widest_half_gap(nf4_code()) + (state.block_absmax() - true_absmax).abs() + 1e-7
    error = F.pad((restored - weight).reshape(-1), (0, -weight.numel() % 64)).view(-1, 64).abs()
    assert torch.all(error <= bound.unsqueeze(1))
    relative_rms = ((restored - weight).pow(2).mean() / weight.pow(2).mean()).sqrt()
    assert relative_rms < 0.12  # NF4 on Gaussian weights: about 0.1


def test_double_quantized_absmax_error_is_small():
    weight = torch.randn(256, 512, generator=_gen(3)) * torch.linspace(0.01, 1.0, 256).unsqueeze(1)
    plain, nested = quantize_nf4(weight, double_quant=False), quantize_nf4(weight, double_quant=True)
    assert nested.absmax.dtype == torch.uint8 and nested.absmax_scale.numel() == 2048 // 256
    centred = plain.absmax - plain.absmax.mean()
    scale = centred.view(-1, 256).abs().amax(1)  # [8] the second-level absmax
    assert torch.equal(nested.absmax_scale, scale) and torch.equal(nested.absmax_offset, plain.absmax.mean())
    bound = scale.repeat_interleave(256) * _widest_half_gap(dynamic_code()) + 1e-7
    error = (nested.block_absmax() - plain.absmax).abs()
    assert torch.all(error <= bound) and error.max() < 0.01 * plain.absmax.max()


@pytest.mark.parametrize("double_quant,expected", [(True, 0.5 + 1 / 64 + 4 / (64 * 256) + 4 / 512**2),
                                                    (False, 0.5 + 4 / 64)])  # codes, absmax, scales, offset
def test_bytes_per_weight(double_quant, expected):
    weight = torch.randn(512, 512, dtype=torch.bfloat16)
    state = quantize_nf4(weight, double_quant=double_quant)
    assert state.nbytes() / weight.numel() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------- layers

def _layer(kind: type, seed: int, bias: bool = True, **kwargs) -> torch.nn.Module:
    layer = kind(128, 96, group=layout_state().tp_group, bias=bias, **kwargs)
    with torch.no_grad():
        layer.weight.normal_(0.0, 0.1, generator=_gen(seed))
        if bias:
            layer.bias.normal_(0.0, 0.1, generator=_gen(seed + 1))
    return layer


@pytest.mark.parametrize("kind", [ColumnParallelLinear, RowParallelLinear])
def test_linear_with_nf4_weight_is_the_dequantized_product(kind):
    layer = _layer(kind, 4)
    dense = layer.weight.detach().clone()
    quantized = quantize_linear_(layer)
    assert [name for name, _ in layer.named_parameters()] == ["bias"] and "weight" not in layer.state_dict()
    assert isinstance(layer.weight, NF4Tensor) and param_meta(layer.weight).tp_shard == layer.shard
    x = torch.randn(5, 2, 128, generator=_gen(5), requires_grad=True)  # [s, b, in]
    y = layer(x)  # [s, b, out]
    x_ref = x.detach().clone().requires_grad_()
    y_ref = F.linear(x_ref, quantized.dequantized(torch.float32)) + layer.bias.detach()
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-6)
    grad = torch.randn(y.shape, generator=_gen(6))
    y.backward(grad)
    y_ref.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=1e-6)
    torch.testing.assert_close(layer.bias.grad, grad.sum((0, 1)))
    dense_out = F.linear(x.detach(), dense, layer.bias.detach())
    assert (y.detach() - dense_out).norm() / dense_out.norm() < 0.15  # close to the unquantised layer


def test_nf4_linear_saves_no_dense_weight_for_backward():
    layer = _layer(ColumnParallelLinear, 7, bias=False)
    quantize_linear_(layer)
    saved = []
    x = torch.randn(3, 1, 128, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        layer(x).sum().backward()
    assert torch.Size([96, 128]) not in saved and x.grad is not None


def test_nf4_linear_computes_in_the_input_dtype():
    layer = _layer(RowParallelLinear, 8, bias=False)
    quantized = quantize_linear_(layer)
    x = torch.randn(4, 2, 128, generator=_gen(9)).bfloat16()
    y = layer(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, F.linear(x, quantized.dequantized(torch.bfloat16)))


def test_nf4_weight_is_read_dense_and_refuses_writes():
    layer = _layer(ColumnParallelLinear, 10)
    quantized = quantize_linear_(layer)
    dense = quantized.dequantized()
    assert torch.equal(layer.weight.t(), dense.t()) and torch.equal(layer.weight * 2, dense * 2)
    assert torch.equal(layer.weight.detach().dequantized(), dense)
    with pytest.raises(QuantizationError, match="frozen"):
        layer.weight.add_(1.0)
    with pytest.raises(QuantizationError, match="frozen"):
        layer.weight.data.copy_(torch.zeros(96, 128))
    assert torch.equal(quantized.dequantized(), dense)


def _model(tp: int = 1, tp_rank: int = 0, **changes) -> GPTModel:
    config = TransformerConfig(**{**MODEL, **changes}, tensor_model_parallel_size=tp)
    return build_model(config, layout_state(tp=tp, tp_rank=tp_rank), torch.device("cpu"), seed=5).eval()


def test_quantized_model_gives_the_logits_of_its_dequantized_weights():
    ids = torch.randint(0, 40, (2, 12), generator=_gen(11))  # [b, s]
    model = _model()
    dense = {name: p.detach().clone() for name, p in model.named_parameters()}
    names = quantize_module_linears(model, LINEARS)
    assert len(names) == 8 and all(isinstance(model.get_submodule(n).weight, NF4Tensor) for n in names)
    assert not any(n.endswith(tuple(f"{t}.weight" for t in LINEARS)) for n, _ in model.named_parameters())
    restored = dequantized_state_dict(model)
    for name in names:  # each weight near its unquantised value (NF4 on Gaussian weights: about 0.1)
        weight = dense[f"{name}.weight"]
        assert (restored[f"{name}.weight"] - weight).norm() / weight.norm() < 0.12
    twin = _model()
    twin.load_state_dict(restored)
    with torch.no_grad():
        nf4_logits, twin_logits = model(ids), twin(ids)
    torch.testing.assert_close(nf4_logits, twin_logits, rtol=0, atol=1e-5)
    copied = copy.deepcopy(model)  # a frozen reference copy (DPO) keeps its NF4 weights
    assert isinstance(copied.get_submodule(names[0]).weight, NF4Tensor)
    with torch.no_grad():
        assert torch.equal(copied(ids), nf4_logits)


@pytest.mark.parametrize("targets,message", [
    (["linear_qkv", "input_layernorm"], "--lora-target-modules: --qlora stores linear layers only, but "
                                        "'input_layernorm' is a RMSNorm"),
    (["linear_qkv", "linear_qkvv"], "--lora-target-modules: 'linear_qkvv' names no module"),
])
def test_bad_targets_are_refused_in_one_line_with_nothing_changed(targets, message):
    model = _model()
    with pytest.raises(QuantizationError) as error:
        quantize_module_linears(model, targets)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not any(isinstance(getattr(m, "weight", None), NF4Tensor) for m in model.modules())


# ---------------------------------------------------------------------------------------------- TP shards

@pytest.mark.parametrize("kind,segments", [
    (ColumnParallelLinear, [Segment(4, 16), Segment(2, 16), Segment(2, 16)]),  # fused QKV rows (GQA)
    (RowParallelLinear, None),  # column shards of 64: blocks align
])
@pytest.mark.parametrize("double_quant", [False, True])
def test_tp2_shards_quantize_like_the_same_rows_of_tp1(kind, segments, double_quant):
    out_size = 128
    full = torch.randn(out_size, 128, generator=_gen(12))
    whole = kind(128, out_size, group=layout_state().tp_group, bias=False, segments=segments)
    with torch.no_grad():
        whole.weight.copy_(full)
    whole_state = quantize_linear_(whole, double_quant=double_quant).state
    whole_codes = _codes(whole_state).view(out_size, 128)
    whole_absmax = whole_state.block_absmax().view(out_size, 2)  # one block per 64 weights of a row
    for rank in range(2):
        shard = kind(128, out_size, group=layout_state(tp=2, tp_rank=rank).tp_group, bias=False, segments=segments)
        spec = shard.shard
        with torch.no_grad():
            shard.weight.copy_(spec.shard(full, rank, 2))
        state = quantize_linear_(shard, double_quant=double_quant).state
        blocks_per_row = state.shape[1] // 64
        assert torch.equal(_codes(state).view(state.shape), spec.shard(whole_codes, rank, 2))
        expected_absmax = spec.shard(whole_absmax.repeat_interleave(64, dim=1), rank, 2)[:, ::64]
        if double_quant:  # each rank's offset and scales are its own: close, not equal
            torch.testing.assert_close(state.block_absmax().view(-1, blocks_per_row), expected_absmax,
                                       rtol=0, atol=0.01 * float(whole_absmax.max()))
        else:
            assert torch.equal(state.absmax.view(-1, blocks_per_row), expected_absmax)


# ---------------------------------------------------------------------------------------------- kernels

def test_kernel_choice(monkeypatch):
    nf4_kernel.cache_clear()
    monkeypatch.setattr(nf4_module, "_bitsandbytes", lambda: None)  # as on a machine without bitsandbytes
    assert nf4_kernel("cpu")[0] == "reference" and nf4_kernel("cuda")[0] == "reference"
    nf4_kernel.cache_clear()
    monkeypatch.setattr(nf4_module, "_bitsandbytes", lambda: object())
    assert nf4_kernel("cuda")[0] == "bitsandbytes" and nf4_kernel("cpu")[0] == "reference"
    nf4_kernel.cache_clear()


def _bnb_devices() -> List[str]:
    """The devices bitsandbytes' 4-bit functions run on here (its CPU backend, and CUDA when present)."""
    if nf4_module._bitsandbytes() is None:
        return []
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.skipif(not _bnb_devices(), reason="bitsandbytes is not installed (pip install bitsandbytes)")
@pytest.mark.parametrize("double_quant", [False, True])
def test_bitsandbytes_kernel_matches_the_reference(double_quant):
    """bitsandbytes writes the bytes our reference writes, and each dequantises the other's states the same.

    With double quantisation the two may round a block's absmax code to neighbouring 8-bit codes (0.13% of the
    blocks here); the NF4 codes of the weights are taken before that rounding and are equal."""
    import bitsandbytes.functional as bnb

    assert torch.equal(dynamic_code(), bnb.create_dynamic_map().cpu())
    assert torch.equal(nf4_code(), bnb.get_4bit_type("nf4", device="cpu").float())
    for device in _bnb_devices():
        weight = torch.randn(512, 384, generator=_gen(13)).to(device).bfloat16()
        ours = nf4_module.quantize_nf4_reference(weight, double_quant=double_quant)
        theirs = nf4_module._bnb_quantize(weight, double_quant=double_quant)
        assert (ours.packed != theirs.packed).float().mean() < 1e-3  # only ties may round apart
        if double_quant:
            torch.testing.assert_close(ours.absmax_scale, theirs.absmax_scale)
            torch.testing.assert_close(ours.absmax_offset, theirs.absmax_offset)
            code_steps = (ours.absmax.int() - theirs.absmax.int()).abs()
            assert code_steps.max() <= 1 and (code_steps > 0).float().mean() < 1e-2
        else:
            torch.testing.assert_close(ours.block_absmax(), theirs.block_absmax())
        for state in (ours, theirs):
            torch.testing.assert_close(nf4_module._bnb_dequantize(state, torch.float32),
                                       nf4_module.dequantize_nf4_reference(state, torch.float32), rtol=0, atol=1e-6)

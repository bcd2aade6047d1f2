"""The gated delta rule kernels and the GatedDeltaNet mixer against ``transformers``, single process.

* Kernels: the chunked form (chunk sizes dividing the sequence or not, and longer than it) equals the
  token-by-token recurrence and transformers' reference functions (Qwen3-Next's gated delta rule, Kimi
  Linear's per-channel decay), outputs, final states and the gradients of q, k, v, g, beta and the
  initial state; a sequence cut in two with the state passed on equals the whole, forward and backward;
  the chunked kernel builds nothing quadratic in the sequence (the largest tensor it makes grows
  linearly); the dispatch picks flash-linear-attention's kernel when it imports, the reference otherwise.
* Mixer: at TP 1 our module with transformers' weights copied by name gives Qwen3NextGatedDeltaNet's
  output and gradients (fp32, 1e-5), with as many value heads as key heads and twice as many; packed
  documents give each document the output it has alone; a model with gated DeltaNet layers starts
  from the same values at TP 1 and TP 2.

    python -m pytest tests/unit/test_gated_delta_net.py -q
"""
from __future__ import annotations

import dataclasses
import sys
import types
from typing import Callable, Dict, Tuple

import pytest
import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.models.kimi_linear.modeling_kimi_linear import recurrent_kimi_delta_attention
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextGatedDeltaNet,
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

from core.models.gpt_model import layout_state
from core.transformer import gated_delta_net as gdn
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import sequence_layout
from core.transformer.gated_delta_net import (
    GatedDeltaNet,
    gated_delta_rule_chunked,
    gated_delta_rule_recurrent,
    kimi_delta_rule_chunked,
    kimi_delta_rule_recurrent,
)

BATCH, SEQ, KEY_HEADS, KEY_DIM, VALUE_DIM = 2, 10, 2, 4, 5
HIDDEN = 32
TOLERANCE = 1e-5


def kernel_inputs(value_heads: int, per_channel: bool, seed: int = 0) -> Dict[str, torch.Tensor]:
    """q, k ``[b, s, hk, dk]``; v ``[b, s, hv, dv]``; g ``[b, s, hv(, dk)]`` (<= 0); beta; a state."""
    gen = torch.Generator().manual_seed(seed)
    key_heads = value_heads if per_channel else KEY_HEADS
    g_shape = (BATCH, SEQ, value_heads) + ((KEY_DIM,) if per_channel else ())
    return {"q": torch.randn(BATCH, SEQ, key_heads, KEY_DIM, generator=gen),
            "k": torch.randn(BATCH, SEQ, key_heads, KEY_DIM, generator=gen),
            "v": torch.randn(BATCH, SEQ, value_heads, VALUE_DIM, generator=gen),
            "g": -torch.rand(g_shape, generator=gen) * 0.7,
            "beta": torch.rand(BATCH, SEQ, value_heads, generator=gen),
            "initial_state": torch.randn(BATCH, value_heads, KEY_DIM, VALUE_DIM, generator=gen)}


def with_grads(kernel: Callable[..., Tuple[torch.Tensor, torch.Tensor]], inputs: Dict[str, torch.Tensor],
               **kwargs: object) -> Dict[str, torch.Tensor]:
    """The kernel's output, final state and the gradients of every input under a fixed random loss."""
    leaves = {name: value.clone().requires_grad_(True) for name, value in inputs.items()}
    out, state = kernel(**leaves, **kwargs)
    gen = torch.Generator().manual_seed(11)
    loss = (out * torch.randn(out.shape, generator=gen)).sum() + (state * torch.randn(state.shape, generator=gen)).sum()
    loss.backward()
    return {"out": out.detach(), "state": state.detach(), **{f"d_{n}": leaf.grad for n, leaf in leaves.items()}}


def hf_gated(q, k, v, g, beta, initial_state, chunk_size=None):  # transformers' functions, our calling convention
    if chunk_size is None:
        return torch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=initial_state,
                                                output_final_state=True, use_qk_l2norm_in_kernel=True)
    return torch_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=initial_state,
                                        output_final_state=True, use_qk_l2norm_in_kernel=True)


def hf_kimi(q, k, v, g, beta, initial_state):
    return recurrent_kimi_delta_attention(q, k, v, g, beta, initial_state=initial_state, output_final_state=True,
                                          use_qk_l2norm_in_kernel=True)


def assert_all_close(ours: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor], what: str) -> None:
    for key, value in expected.items():
        torch.testing.assert_close(ours[key], value, rtol=TOLERANCE, atol=TOLERANCE, msg=lambda m: f"{what} {key}: {m}")


# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("value_heads", [KEY_HEADS, 2 * KEY_HEADS])
def test_gated_kernels_equal_transformers_forward_and_backward(value_heads: int) -> None:
    inputs = kernel_inputs(value_heads, per_channel=False)
    expected = with_grads(hf_gated, inputs)
    assert_all_close(with_grads(hf_gated, inputs, chunk_size=4), expected, "transformers' chunked")
    assert_all_close(with_grads(gated_delta_rule_recurrent, inputs), expected, "recurrent")
    for chunk in (1, 3, 5, 16):  # dividing SEQ or not, one longer than it
        assert_all_close(with_grads(gated_delta_rule_chunked, inputs, chunk_size=chunk), expected, f"chunk {chunk}")
    no_state = {**inputs, "initial_state": None}
    out, state = gated_delta_rule_chunked(**no_state, chunk_size=4)
    hf_out, hf_state = hf_gated(**no_state)
    torch.testing.assert_close(out, hf_out, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(state, hf_state, rtol=TOLERANCE, atol=TOLERANCE)


def test_kimi_kernels_equal_transformers_forward_and_backward() -> None:
    inputs = kernel_inputs(3, per_channel=True)
    expected = with_grads(hf_kimi, inputs)
    assert_all_close(with_grads(kimi_delta_rule_recurrent, inputs), expected, "recurrent")
    for chunk in (1, 3, 5, 16):
        assert_all_close(with_grads(kimi_delta_rule_chunked, inputs, chunk_size=chunk), expected, f"chunk {chunk}")
    with pytest.raises(ValueError, match="per key channel"):
        kimi_delta_rule_chunked(**kernel_inputs(KEY_HEADS, per_channel=False))


def _in_two_pieces(kernel: Callable, cut: int, q, k, v, g, beta, initial_state, **kwargs):
    """The kernel over ``[:cut]`` then ``[cut:]`` from the first piece's final state."""
    first, state = kernel(q[:, :cut], k[:, :cut], v[:, :cut], g[:, :cut], beta[:, :cut],
                          initial_state=initial_state, **kwargs)
    second, state = kernel(q[:, cut:], k[:, cut:], v[:, cut:], g[:, cut:], beta[:, cut:], initial_state=state,
                           **kwargs)
    return torch.cat([first, second], dim=1), state


@pytest.mark.parametrize("kernel, per_channel", [(gated_delta_rule_chunked, False), (kimi_delta_rule_chunked, True),
                                                 (gated_delta_rule_recurrent, False)],
                         ids=["gated_chunked", "kimi_chunked", "gated_recurrent"])
def test_two_pieces_with_the_state_passed_equal_the_whole(kernel: Callable, per_channel: bool) -> None:
    inputs = kernel_inputs(2 * KEY_HEADS if not per_channel else 2, per_channel=per_channel, seed=4)
    kwargs = {} if kernel is gated_delta_rule_recurrent else {"chunk_size": 4}
    whole = with_grads(kernel, inputs, **kwargs)
    for cut in (3, 8):  # inside a chunk, on a chunk boundary
        pieces = with_grads(lambda **x: _in_two_pieces(kernel, cut, **x, **kwargs), inputs)
        assert_all_close(pieces, whole, f"cut at {cut}")


class LargestTensor(TorchDispatchMode):
    """Records the most elements of any tensor an operation returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


def _largest_tensor(kernel: Callable, seq: int, per_channel: bool) -> int:
    gen = torch.Generator().manual_seed(0)
    g_shape = (1, seq, 2) + ((KEY_DIM,) if per_channel else ())
    leaves = [torch.randn(1, seq, 2, KEY_DIM, generator=gen), torch.randn(1, seq, 2, KEY_DIM, generator=gen),
              torch.randn(1, seq, 2, VALUE_DIM, generator=gen), -torch.rand(g_shape, generator=gen),
              torch.rand(1, seq, 2, generator=gen)]
    leaves = [leaf.requires_grad_(True) for leaf in leaves]
    with LargestTensor() as probe:
        out, state = kernel(*leaves)
        (out.sum() + state.sum()).backward()
    return probe.largest


def _quadratic_kernel(q, k, v, g, beta):  # a kernel that builds [s, s] scores: the probe must see it
    scores = torch.einsum("bshd,bthd->bhst", q, k).tril()
    return torch.einsum("bhst,bthd->bshd", scores, v), v.sum(1)


@pytest.mark.parametrize("kernel, per_channel", [(gated_delta_rule_chunked, False), (kimi_delta_rule_chunked, True)],
                         ids=["gated", "kimi"])
def test_chunked_memory_is_linear_in_the_sequence(kernel: Callable, per_channel: bool) -> None:
    """Forward and backward, the largest tensor grows 4x when the sequence does (chunks of 8: 32 -> 128)."""
    chunked = lambda *x: kernel(*x, chunk_size=8)  # noqa: E731
    assert _largest_tensor(chunked, 128, per_channel) <= 4 * _largest_tensor(chunked, 32, per_channel)
    assert _largest_tensor(_quadratic_kernel, 128, False) > 8 * _largest_tensor(_quadratic_kernel, 32, False)


DISPATCH_CASES = {  # name -> (fla module, its function, our chooser, our reference, decay per key channel)
    "gated": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule", gdn.gated_delta_rule_kernel,
              gated_delta_rule_chunked, False),
    "kimi": ("fla.ops.kda", "chunk_kda", gdn.kimi_delta_rule_kernel, kimi_delta_rule_chunked, True),
}


@pytest.mark.parametrize("case", sorted(DISPATCH_CASES))
def test_dispatch_takes_fla_when_it_imports(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Without fla: the chunked reference. With a stand-in fla module: its kernel on fla's device type for
    bf16 inputs, called with key heads repeated per value head, the log decay in fp32, beta in the inputs'
    dtype and the state asked for; fp32 inputs (which fla refuses) take the reference."""
    module_name, function_name, chooser, reference, per_channel = DISPATCH_CASES[case]
    assert chooser("cpu")[0] == "chunked"
    calls = []

    def fake_chunk(q, k, v, g, beta, initial_state, output_final_state, use_qk_l2norm_in_kernel):
        calls.append((q.shape, q.dtype, g.dtype, beta.dtype, output_final_state, use_qk_l2norm_in_kernel))
        return reference(q, k, v, g, beta, 64, initial_state)

    module = types.ModuleType(module_name)
    setattr(module, function_name, fake_chunk)
    for name in ("fla", "fla.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, module_name, module)
    chooser.cache_clear()
    try:
        fla_device = next(iter(gdn.GATED_DELTA_RULE.kernels))
        name, kernel = chooser(fla_device)
        assert name == "fla" and chooser("cpu")[0] == "chunked"
        value_heads = 2 if per_channel else 2 * KEY_HEADS
        inputs = kernel_inputs(value_heads, per_channel=per_channel)
        kernel(**inputs)  # fp32: the reference, fla not called
        assert calls == []
        half = {key: value.to(torch.bfloat16) if key in ("q", "k", "v") else value for key, value in inputs.items()}
        out, state = kernel(**half)
        expected_out, expected_state = reference(**{**half, "beta": half["beta"].to(torch.bfloat16)})
        torch.testing.assert_close(out, expected_out)
        torch.testing.assert_close(state, expected_state)
        assert calls == [((BATCH, SEQ, value_heads, KEY_DIM), torch.bfloat16, torch.float32, torch.bfloat16,
                          True, True)]
    finally:
        chooser.cache_clear()


# --------------------------------------------------------------------------- the mixer


def hf_config(value_heads: int) -> transformers.Qwen3NextConfig:
    return transformers.Qwen3NextConfig(
        hidden_size=HIDDEN, num_hidden_layers=1, vocab_size=16, num_attention_heads=2, num_key_value_heads=1,
        linear_num_key_heads=KEY_HEADS, linear_num_value_heads=value_heads, linear_key_head_dim=8,
        linear_value_head_dim=6, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, layer_types=["linear_attention"])


def our_config(value_heads: int, tp: int = 1, sp: bool = False, chunk: int = 4) -> TransformerConfig:
    return TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=2, vocab_size=16, normalization="RMSNorm",
        experimental_attention_variant="gated_delta_net", linear_attention_freq="[1]",
        linear_num_key_heads=KEY_HEADS, linear_num_value_heads=value_heads, linear_key_head_dim=8,
        linear_value_head_dim=6, linear_conv_kernel_dim=4, linear_chunk_size=chunk, norm_epsilon=1e-6,
        add_bias_linear=False, hidden_dropout=0.0, attention_dropout=0.0, tensor_model_parallel_size=tp,
        sequence_parallel=sp)


def hf_mixer(value_heads: int) -> Qwen3NextGatedDeltaNet:
    torch.manual_seed(0)
    mixer = Qwen3NextGatedDeltaNet(hf_config(value_heads), 0).eval()
    with torch.no_grad():
        for param in mixer.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return mixer


def our_mixer(value_heads: int, chunk: int = 4) -> GatedDeltaNet:
    mixer = GatedDeltaNet(our_config(value_heads, chunk=chunk), layout_state(1))
    weights = hf_mixer(value_heads).state_dict()
    assert set(dict(mixer.named_parameters())) == set(weights)
    with torch.no_grad():
        for name, param in mixer.named_parameters():
            param.copy_(weights[name])  # the same names, shapes and row order: a plain copy
    return mixer


def hidden_states(seq: int = 11) -> torch.Tensor:
    return torch.randn(seq, BATCH, HIDDEN, generator=torch.Generator().manual_seed(3))  # [s, b, h]


@pytest.mark.parametrize("value_heads", [KEY_HEADS, 2 * KEY_HEADS])
def test_mixer_matches_transformers_tp1(value_heads: int) -> None:
    hf, ours = hf_mixer(value_heads), our_mixer(value_heads)
    x = hidden_states()
    x_hf, x_ours = x.transpose(0, 1).clone().requires_grad_(True), x.clone().requires_grad_(True)
    expected, out = hf(x_hf).transpose(0, 1), ours(x_ours, None, None)
    assert out.shape == x.shape
    assert (out - expected).abs().max().item() <= TOLERANCE
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    (expected * upstream).sum().backward()
    (out * upstream).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_hf.grad.transpose(0, 1), rtol=TOLERANCE, atol=TOLERANCE)
    hf_params = dict(hf.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(param.grad, hf_params[name].grad, rtol=1e-4, atol=TOLERANCE,
                                   msg=lambda m: f"{name}: {m}")


def test_packed_documents_give_each_document_its_own_output() -> None:
    mixer, x = our_mixer(2 * KEY_HEADS), hidden_states(12)
    starts = [[0, 5, 9], [0, 2, 3]]  # per row; one row with a one-token document
    documents = torch.zeros(BATCH, 12, dtype=torch.long)
    for row, row_starts in enumerate(starts):
        for number, start in enumerate(row_starts):
            documents[row, start:] = number
    out = mixer(x, None, sequence_layout(None, 12, x.device, documents))
    for row, row_starts in enumerate(starts):
        for start, end in zip(row_starts, row_starts[1:] + [12]):
            alone = mixer(x[start:end, row:row + 1], None, None)
            torch.testing.assert_close(out[start:end, row:row + 1], alone, rtol=TOLERANCE, atol=TOLERANCE)
    whole = mixer(x, None, None)
    assert (out[5:, :1] - whole[5:, :1]).abs().max() > 1e-3  # the restart changes the output


def test_core_in_pieces_with_the_carry_equals_the_whole() -> None:
    """The stateful core (conv + delta rule) over pieces, each from the carry the one before left, equals
    one pass: the conv's last k - 1 inputs travel (a 2-token piece is shorter than them) with the state."""
    mixer = our_mixer(2 * KEY_HEADS)
    width = mixer.conv_channels + 2 * mixer.local_value_heads
    inputs = torch.randn(BATCH, 12, width, generator=torch.Generator().manual_seed(8)).requires_grad_(True)
    whole, (conv_past, state) = mixer._core(inputs, None)
    (whole_grad,) = torch.autograd.grad(whole.pow(2).sum() + state.sum(), inputs)
    pieces, carry = [], None
    for start, end in ((0, 5), (5, 7), (7, 12)):
        out, carry = mixer._core(inputs[:, start:end], carry)
        pieces.append(out)
    pieced = torch.cat(pieces, dim=1)
    (pieced_grad,) = torch.autograd.grad(pieced.pow(2).sum() + carry[1].sum(), inputs)
    assert conv_past.shape == (BATCH, 3, mixer.conv_channels) and state.dtype == torch.float32
    torch.testing.assert_close(pieced, whole, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(carry[0], conv_past)
    torch.testing.assert_close(carry[1], state, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(pieced_grad, whole_grad, rtol=TOLERANCE, atol=TOLERANCE)


def test_mixer_output_does_not_depend_on_the_chunk_size() -> None:
    x = hidden_states()
    reference = our_mixer(2 * KEY_HEADS, chunk=64)(x)
    for chunk in (1, 3):
        torch.testing.assert_close(our_mixer(2 * KEY_HEADS, chunk=chunk)(x), reference, rtol=TOLERANCE,
                                   atol=TOLERANCE)


def test_parameter_metadata_and_initialisation_independent_of_tp() -> None:
    """In a GPT model (layers: gated DeltaNet, attention) the values start the same at TP 1 and TP 2; A_log
    and dt_bias start as Megatron's; the norm weight's gradient is marked a partial sum over TP."""
    from core.models.gpt_model import build_model, unshard_state_dict
    from core.tensor_parallel.param_meta import param_meta

    config = dataclasses.replace(our_config(2 * KEY_HEADS), num_layers=2, linear_attention_freq="[1, 0]",
                                 num_query_groups=2)
    full = build_model(config, layout_state(1), torch.device("cpu"), seed=7)
    mixer = full.decoder.layers["0"].self_attention
    assert isinstance(mixer, GatedDeltaNet)
    assert param_meta(mixer.norm.weight).grad_partial_over_tp and param_meta(mixer.norm.weight).tp_shard is None
    tp2_config = dataclasses.replace(config, tensor_model_parallel_size=2)
    ranks = [build_model(tp2_config, layout_state(2, rank), torch.device("cpu"), seed=7) for rank in range(2)]
    merged = unshard_state_dict([dict(model.state_dict()) for model in ranks], ranks[0])
    for key, value in full.state_dict().items():
        if key.startswith("decoder."):  # the vocabulary's padding grows with TP
            assert torch.equal(merged[key], value), key
    dt = torch.nn.functional.softplus(mixer.dt_bias.detach())
    A = torch.exp(mixer.A_log.detach())
    assert dt.min() >= 1e-3 - 1e-7 and dt.max() <= 1e-1 + 1e-7 and A.min() >= 1.0 and A.max() <= 16.0


def test_qwen3_5_separate_projections_load_by_row_permutation() -> None:
    """Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, regrouped per key head, give our mixer
    Qwen3_5GatedDeltaNet's output; the split back returns the same tensors."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    value_heads = 2 * KEY_HEADS
    hf_cfg = transformers.Qwen3_5TextConfig(**{key: getattr(hf_config(value_heads), key) for key in (
        "hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
        "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim", "rms_norm_eps", "layer_types")})
    torch.manual_seed(1)
    hf = Qwen3_5GatedDeltaNet(hf_cfg, 0).eval()
    with torch.no_grad():
        for param in hf.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    weights = hf.state_dict()
    cfg = our_config(value_heads)
    qkvz = gdn.qkvz_from_separate(weights.pop("in_proj_qkv.weight"), weights.pop("in_proj_z.weight"), cfg)
    ba = gdn.ba_from_separate(weights.pop("in_proj_b.weight"), weights.pop("in_proj_a.weight"), cfg)
    weights.update({"in_proj_qkvz.weight": qkvz, "in_proj_ba.weight": ba})
    ours = GatedDeltaNet(cfg, layout_state(1))
    with torch.no_grad():
        for name, param in ours.named_parameters():
            param.copy_(weights[name])
    x = hidden_states()
    expected = hf(x.transpose(0, 1)).transpose(0, 1)
    assert (ours(x) - expected).abs().max().item() <= TOLERANCE
    qkv, z = gdn.separate_from_qkvz(qkvz, cfg)
    b, a = gdn.separate_from_ba(ba, cfg)
    hf_weights = hf.state_dict()
    for name, value in (("in_proj_qkv", qkv), ("in_proj_z", z), ("in_proj_b", b), ("in_proj_a", a)):
        assert torch.equal(value, hf_weights[f"{name}.weight"]), name

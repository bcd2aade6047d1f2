"""The fast kernels of the Mamba mixers behind the one dispatch: causal-conv1d's conv, mamba_ssm's SSD and
selective scans (``core/transformer/mamba_mixer.py``).

Neither package installs without CUDA, so the tests put stand-in modules in their place, each written here
from the package's documented semantics (a shift-and-add conv, step-by-step recurrences; not our references)
and asserting the layouts and dtypes the real kernels check (causal-conv1d's C++ checks: channel-last ``x``
and states with channels in multiples of 8, widths 2-4, states in x's dtype; selective_scan_fn's: delta and a
variable B/C in u's dtype, A and D fp32). The selective-scan stand-in, like the kernel, drops the gradient of
its last state. Made to answer on the CPU, the mixers must give the reference's outputs and gradients, a
sequence continued from a carry must equal the whole, and the calls a kernel cannot serve must take the
reference.

    python -m pytest tests/unit/test_mamba_kernels.py -q
"""
from __future__ import annotations

import collections
import functools
import sys
import types
from typing import Counter, Dict, Iterator, Optional

import pytest
import torch
import torch.nn.functional as F

from core.parallel_state import initialize
from core.transformer import mamba_mixer
from core.transformer.config import TransformerConfig
from core.transformer.mamba_mixer import MambaMixer

SEQ, BATCH, HIDDEN = 12, 2, 32
CHOOSERS = (mamba_mixer.causal_conv_kernel, mamba_mixer.ssd_scan_kernel, mamba_mixer.selective_scan_kernel)
OPS = (mamba_mixer.CAUSAL_CONV, mamba_mixer.SSD_SCAN, mamba_mixer.SELECTIVE_SCAN)


def fake_causal_conv1d_fn(calls: Counter, x: torch.Tensor, weight: torch.Tensor,
                          bias: Optional[torch.Tensor] = None, seq_idx: Optional[torch.Tensor] = None,
                          initial_states: Optional[torch.Tensor] = None, return_final_states: bool = False,
                          final_states_out: Optional[torch.Tensor] = None,
                          activation: Optional[str] = None) -> "torch.Tensor | tuple":
    """causal_conv1d_fn: x ``[b, c, s]``, weight ``[c, k]``, states ``[b, c, k - 1]``."""
    calls["causal_conv1d"] += 1
    batch, channels, seq = x.shape
    width = weight.size(1)
    assert weight.dim() == 2 and 2 <= width <= 4
    assert x.stride(1) == 1 and channels % 8 == 0 and x.stride(0) % 8 == 0 and x.stride(2) % 8 == 0
    if initial_states is not None:
        assert initial_states.dtype == x.dtype and initial_states.stride(1) == 1
    else:
        initial_states = x.new_zeros(batch, channels, width - 1)
    padded = torch.cat([initial_states, x], dim=-1)  # [b, c, k-1+s]
    out = sum(weight[:, j, None] * padded[..., j:j + seq] for j in range(width))  # [b, c, s]
    if bias is not None:
        out = out + bias[:, None]
    out = F.silu(out) if activation == "silu" else out
    return (out, padded[..., seq:]) if return_final_states else out


def fake_mamba_chunk_scan_combined(calls: Counter, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor,
                                   B: torch.Tensor, C: torch.Tensor, chunk_size: int,
                                   D: Optional[torch.Tensor] = None, z: Optional[torch.Tensor] = None,
                                   dt_bias: Optional[torch.Tensor] = None,
                                   initial_states: Optional[torch.Tensor] = None, seq_idx: Optional[torch.Tensor] = None,
                                   cu_seqlens: Optional[torch.Tensor] = None, dt_softplus: bool = False,
                                   dt_limit: tuple = (0.0, float("inf")), return_final_states: bool = False,
                                   return_varlen_states: bool = False, state_dtype: Optional[torch.dtype] = None):
    """mamba_chunk_scan_combined: x ``[b, s, h, p]``, dt ``[b, s, h]``, A ``[h]``, B/C ``[b, s, g, n]`` (head i
    reads group ``i // (h / g)``), D ``[h]``, states ``[b, h, p, n]``; step by step."""
    calls["mamba_chunk_scan_combined"] += 1
    assert z is None and dt_bias is None and not dt_softplus and seq_idx is None
    batch, seq, heads, _ = x.shape
    groups = B.size(2)
    assert heads % groups == 0 and A.shape == (heads,)
    group_of_head = torch.arange(heads) // (heads // groups)
    state = (initial_states.float() if initial_states is not None
             else x.new_zeros(batch, heads, x.size(3), B.size(3), dtype=torch.float32))
    outputs = []
    for t in range(seq):
        step = dt[:, t].float()  # [b, h]
        b_t, c_t = B[:, t, group_of_head].float(), C[:, t, group_of_head].float()  # [b, h, n]
        state = (torch.exp(step * A.float())[..., None, None] * state
                 + (step[..., None] * x[:, t].float())[..., None] * b_t[:, :, None, :])  # [b, h, p, n]
        outputs.append((state * c_t[:, :, None, :]).sum(-1) + D.float()[:, None] * x[:, t].float())
    out = torch.stack(outputs, dim=1).to(x.dtype)  # [b, s, h, p]
    return (out, state) if return_final_states else out


def fake_selective_scan_fn(calls: Counter, u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                           C: torch.Tensor, D: Optional[torch.Tensor] = None, z: Optional[torch.Tensor] = None,
                           delta_bias: Optional[torch.Tensor] = None, delta_softplus: bool = False,
                           return_last_state: bool = False):
    """selective_scan_fn: u, delta ``[b, d, s]``; A ``[d, n]``; B/C ``[b, n, s]`` or ``[b, g, n, s]`` (channel c
    reads group ``c // (d / g)``); the last state's gradient is dropped, as the kernel's backward does."""
    calls["selective_scan_fn"] += 1
    assert z is None and delta_bias is None and not delta_softplus
    assert delta.dtype == u.dtype and B.dtype == u.dtype and C.dtype == u.dtype
    assert A.dtype == torch.float32 and D.dtype == torch.float32
    batch, channels, seq = u.shape
    if B.dim() == 3:
        B, C = B[:, None], C[:, None]  # [b, 1, n, s]
    group_of_channel = torch.arange(channels) // (channels // B.size(1))
    B, C = B[:, group_of_channel].float(), C[:, group_of_channel].float()  # [b, d, n, s]
    state = u.new_zeros(batch, channels, A.size(1), dtype=torch.float32)
    outputs = []
    for t in range(seq):
        step = delta[:, :, t, None].float()  # [b, d, 1]
        state = torch.exp(step * A) * state + step * B[..., t] * u[:, :, t, None].float()
        outputs.append((state * C[..., t]).sum(-1) + D * u[:, :, t].float())
    out = torch.stack(outputs, dim=-1).to(u.dtype)  # [b, d, s]
    return (out, state.detach()) if return_last_state else out


def _module(name: str, **functions) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in functions.items():
        setattr(module, key, value)
    return module


def _clear_choices() -> None:
    for chooser in CHOOSERS:
        chooser.cache_clear()


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """The stand-in packages importable, and their kernels chosen for CPU tensors; yields the call counts."""
    calls: Counter = collections.Counter()
    bound = {name: (lambda *a, _f=function, **k: _f(calls, *a, **k)) for name, function in (
        ("causal_conv1d_fn", fake_causal_conv1d_fn), ("mamba_chunk_scan_combined", fake_mamba_chunk_scan_combined),
        ("selective_scan_fn", fake_selective_scan_fn))}
    modules = {"causal_conv1d": _module("causal_conv1d", causal_conv1d_fn=bound["causal_conv1d_fn"]),
               "mamba_ssm": _module("mamba_ssm"), "mamba_ssm.ops": _module("mamba_ssm.ops"),
               "mamba_ssm.ops.triton": _module("mamba_ssm.ops.triton"),
               "mamba_ssm.ops.triton.ssd_combined": _module(
                   "mamba_ssm.ops.triton.ssd_combined",
                   mamba_chunk_scan_combined=bound["mamba_chunk_scan_combined"]),
               "mamba_ssm.ops.selective_scan_interface": _module(
                   "mamba_ssm.ops.selective_scan_interface", selective_scan_fn=bound["selective_scan_fn"])}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    for op in OPS:
        monkeypatch.setitem(op.kernels, "cpu", op.kernels["cuda"])
    _clear_choices()
    yield calls
    _clear_choices()


CONFIGS: Dict[str, dict] = {  # our mixer's fields; conv channels in multiples of 8 so the conv kernel serves
    "mamba2_groups": dict(mamba_state_dim=4, mamba_head_dim=8, mamba_num_groups=2, mamba_chunk_size=4,
                          mamba_dt_limit_max=1.5),
    "mamba1": dict(mamba_version=1, mamba_state_dim=6, mamba_d_conv=3, mamba_dt_rank=5),
    "mamba1_heads": dict(mamba_version=1, mamba_state_dim=4, mamba_d_conv=4, mamba_dt_rank=3, mamba_heads=4,
                         mamba_head_dim=16),
}


def mixer(name: str, **overrides) -> MambaMixer:
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=1, vocab_size=16,
                               normalization="RMSNorm", position_embedding_type="none", hybrid_override_pattern="M",
                               hidden_dropout=0.0, attention_dropout=0.0, norm_epsilon=1e-5, add_bias_linear=False,
                               **{**CONFIGS[name], **overrides})
    torch.manual_seed(0)
    module = MambaMixer(config, initialize())
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn_like(param) * 0.1 + (1.0 if param.dim() == 1 else 0.0))
    return module


def outputs_and_grads(module: MambaMixer) -> Dict[str, torch.Tensor]:
    x = torch.randn(SEQ, BATCH, HIDDEN, generator=torch.Generator().manual_seed(3)).requires_grad_(True)
    module.zero_grad()
    out = module(x)  # [s, b, h]
    out.pow(2).sum().backward()
    return {"out": out.detach(), "x": x.grad, **{k: p.grad.clone() for k, p in module.named_parameters()}}


def test_references_without_the_packages() -> None:
    _clear_choices()
    assert [chooser("cpu")[0] for chooser in CHOOSERS] == ["reference", "chunked", "sequential"]
    assert [chooser("cuda")[0] for chooser in CHOOSERS] == ["reference", "chunked", "sequential"]  # none imports


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mixer_through_the_kernels_equals_the_reference(stand_ins: Counter, name: str) -> None:
    """Outputs and every gradient equal the references' with the conv and the scan in the stand-in kernels."""
    _clear_choices()
    for op in OPS:
        op.kernels.pop("cpu")
    expected = outputs_and_grads(mixer(name))
    assert sum(stand_ins.values()) == 0
    for op in OPS:
        op.kernels["cpu"] = op.kernels["cuda"]
    _clear_choices()
    got = outputs_and_grads(mixer(name))
    scan = "mamba_chunk_scan_combined" if "2" in name else "selective_scan_fn"
    assert stand_ins["causal_conv1d"] == 1 and stand_ins[scan] == 1
    for key, value in expected.items():
        torch.testing.assert_close(got[key], value, rtol=1e-4, atol=1e-4, msg=lambda text, key=key: f"{key}: {text}")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_carried_continuation_equals_the_whole(stand_ins: Counter, name: str) -> None:
    """The core run on two halves, the second from the first's carry (the kernels' initial states), equals one
    run, gradients through the carry included, and the conv's carry is the last inputs. Mamba1's core is told
    its state leaves (as under CP): its scan then takes the reference, whose kernel would drop that gradient."""
    module = mixer(name)
    core = module._mamba2_core if "2" in name else functools.partial(module._mamba1_core, state_leaves=True)
    width = sum(module.in_split[1:]) if "2" in name else module.in_split[0]
    x = torch.randn(BATCH, SEQ, width, generator=torch.Generator().manual_seed(5)).requires_grad_(True)
    whole, whole_carry = core(x, None)
    (whole.pow(2).sum() + whole_carry[1].sum()).backward()
    expected = {"x": x.grad.clone(), **{k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}}
    x.grad = None
    module.zero_grad()
    head, carry = core(x[:, :5], None)
    tail, tail_carry = core(x[:, 5:], carry)
    (head.pow(2).sum() + tail.pow(2).sum() + tail_carry[1].sum()).backward()
    torch.testing.assert_close(torch.cat([head, tail], dim=1), whole, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tail_carry[0], whole_carry[0])
    torch.testing.assert_close(tail_carry[1], whole_carry[1], rtol=1e-4, atol=1e-4)
    for key, value in expected.items():
        torch.testing.assert_close(x.grad if key == "x" else dict(module.named_parameters())[key].grad, value,
                                   rtol=1e-4, atol=1e-4, msg=lambda text, key=key: f"{key}: {text}")
    assert stand_ins["causal_conv1d"] == 3
    assert stand_ins["mamba_chunk_scan_combined" if "2" in name else "selective_scan_fn"] == (3 if "2" in name else 0)


def test_calls_a_kernel_cannot_serve_take_the_reference(stand_ins: Counter) -> None:
    """A conv of width 5 or of channels not a multiple of 8, an SSD chunk that is not a power of two, and a
    selective scan from a state or whose state leaves under autograd (CP) run the references."""
    x = torch.randn(BATCH, SEQ, 16)
    for weight in (torch.randn(16, 1, 5), torch.randn(12, 1, 4)):
        out, last = mamba_mixer.carried_causal_conv(x[..., :weight.size(0)], weight, None)
        expected = mamba_mixer.reference_causal_conv(x[..., :weight.size(0)], weight, None, None, False)
        torch.testing.assert_close((out, last), expected)
    assert stand_ins["causal_conv1d"] == 0
    heads, groups, dim, state = 4, 2, 3, 5
    args = (torch.randn(BATCH, SEQ, heads, dim), torch.rand(BATCH, SEQ, heads), -torch.rand(heads),
            torch.randn(BATCH, SEQ, groups, state), torch.randn(BATCH, SEQ, groups, state), torch.ones(heads))
    mamba_mixer.grouped_ssd_scan(*args, 6)
    assert stand_ins["mamba_chunk_scan_combined"] == 0
    mamba_mixer.grouped_ssd_scan(*args, 8)
    assert stand_ins["mamba_chunk_scan_combined"] == 1
    channels = 8
    u, dt = torch.randn(BATCH, SEQ, channels), torch.rand(BATCH, SEQ, channels)
    A, B, C, D = -torch.rand(channels, state), torch.randn(BATCH, SEQ, state), torch.randn(BATCH, SEQ, state), torch.ones(channels)
    dispatch = mamba_mixer.selective_scan_dispatch
    dispatch(u, dt, A, B, C, D, initial_state=torch.zeros(BATCH, channels, state))
    dispatch(u.requires_grad_(True), dt, A, B, C, D, state_leaves=True)
    assert stand_ins["selective_scan_fn"] == 0
    with torch.no_grad():  # generation's prefill: the state leaves, no gradient to drop
        dispatch(u, dt, A, B, C, D, state_leaves=True)
    dispatch(u, dt, A, B, C, D)
    assert stand_ins["selective_scan_fn"] == 2


def test_half_precision_reaches_the_kernels_in_their_dtypes(stand_ins: Counter) -> None:
    """bf16 inputs: the conv's states in bf16 (its check), the scans' outputs and states back in fp32."""
    x = torch.randn(BATCH, SEQ, 16, dtype=torch.bfloat16)
    weight = torch.randn(16, 1, 4, dtype=torch.bfloat16)
    out, last = mamba_mixer.carried_causal_conv(x, weight, None, torch.randn(BATCH, 3, 16), silu=True)
    assert out.dtype == last.dtype == torch.bfloat16 and stand_ins["causal_conv1d"] == 1
    channels, state = 8, 4
    y, final = mamba_mixer.selective_scan_dispatch(
        torch.randn(BATCH, SEQ, channels, dtype=torch.bfloat16), torch.rand(BATCH, SEQ, channels),
        -torch.rand(channels, state), torch.randn(BATCH, SEQ, 2, state), torch.randn(BATCH, SEQ, 2, state),
        torch.ones(channels, dtype=torch.bfloat16))
    assert y.dtype == final.dtype == torch.float32 and stand_ins["selective_scan_fn"] == 1


@pytest.mark.parametrize("cp_size,leaves", [(1, False), (2, True)])
def test_mamba1_tells_its_scan_when_the_state_leaves_the_rank(monkeypatch: pytest.MonkeyPatch, cp_size: int,
                                                              leaves: bool) -> None:
    """The mixer's forward hands ``sequence_scan`` a core whose scan knows that the carry goes to the next CP
    rank (so mamba_ssm's scan, which drops that gradient, is not used there)."""
    seen = []

    def spy(core, inputs, layout):
        seen.append(core.keywords["state_leaves"])
        return inputs

    monkeypatch.setattr(mamba_mixer, "sequence_scan", spy)
    layout = types.SimpleNamespace(cp=types.SimpleNamespace(group=types.SimpleNamespace(size=cp_size)))
    mixer("mamba1")(torch.randn(SEQ, BATCH, HIDDEN), layout)
    assert seen == [leaves]

"""Our Mamba mixer against ``transformers``' mixer modules, at TP 1 and TP 2 (with and without SP).

Per case (Mamba, FalconMamba's dt/B/C norms with biases, Mamba2 with two groups, Mamba2 with one
group, i.e. B/C replicated and the gated norm's sum of squares shared across TP ranks at TP 2), the
HF mixer is built from a tiny config with perturbed weights; our mixer takes the same weights (split
with each parameter's :class:`TPShard`) and must give HF's output in fp32 (max abs <= 1e-5) on
``[s, b, h]`` input. At TP 2 the input gradient and every parameter gradient, unsharded, must equal
TP 1's. Every TP-2 run sits in one 2-process gloo launch. The scan helpers are also checked against
a plain recurrence.

    python -m pytest tests/unit/test_mamba_mixer.py -q
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

import pytest
import torch
import transformers

from core.launcher import run_distributed
from core.models.gpt_model import layout_state
from core.parallel_state import ParallelState, initialize
from core.transformer.mamba_mixer import MambaMixer, segment_sums, selective_scan, ssd_chunked_scan
from core.tensor_parallel.layers import reduce_replicated_grads
from core.tensor_parallel.mappings import all_gather_along_dim, all_reduce
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from core.transformer.config import TransformerConfig

SEQ, BATCH, HIDDEN = 14, 2, 32
TOLERANCE = 1e-5

# name -> (HF config class, HF mixer module path, HF config kwargs, our config kwargs)
CASES: Dict[str, Tuple[str, str, Dict[str, Any], Dict[str, Any]]] = {
    "mamba": ("MambaConfig", "mamba.modeling_mamba.MambaMixer",
              dict(state_size=6, expand=2, conv_kernel=3, time_step_rank=5),
              dict(mamba_version=1, mamba_state_dim=6, mamba_d_conv=3, mamba_dt_rank=5, add_bias_linear=False)),
    "falcon_mamba_bias": ("FalconMambaConfig", "falcon_mamba.modeling_falcon_mamba.FalconMambaMixer",
                          dict(state_size=4, expand=2, conv_kernel=4, use_bias=True, mixer_rms_eps=1e-5),
                          dict(mamba_version=1, mamba_state_dim=4, mamba_mixer_rms_eps=1e-5, add_bias_linear=True)),
    "mamba2_groups": ("Mamba2Config", "mamba2.modeling_mamba2.Mamba2Mixer",
                      dict(state_size=4, expand=2, num_heads=8, head_dim=8, n_groups=2, chunk_size=4,
                           time_step_limit=(0.0, 1.5)),
                      dict(mamba_state_dim=4, mamba_head_dim=8, mamba_num_groups=2, mamba_chunk_size=4,
                           mamba_dt_limit_max=1.5, add_bias_linear=False)),
    "mamba2_one_group": ("Mamba2Config", "mamba2.modeling_mamba2.Mamba2Mixer",
                         dict(state_size=4, expand=2, num_heads=4, head_dim=16, n_groups=1, chunk_size=5,
                              use_conv_bias=False, use_bias=True),
                         dict(mamba_state_dim=4, mamba_head_dim=16, mamba_num_groups=1, mamba_chunk_size=5,
                              mamba_conv_bias=False, add_bias_linear=True)),
}


def hf_mixer(name: str) -> torch.nn.Module:
    config_cls, path, hf_kwargs, _ = CASES[name]
    config = getattr(transformers, config_cls)(hidden_size=HIDDEN, num_hidden_layers=1, vocab_size=16,
                                               layer_norm_epsilon=1e-5, **hf_kwargs)
    module_path, cls_name = path.rsplit(".", 1)
    module = __import__(f"transformers.models.{module_path}", fromlist=[cls_name])
    torch.manual_seed(0)
    mixer = getattr(module, cls_name)(config, layer_idx=0, initialize_mixer_weights=False).eval()
    init_name = next(n for n in dir(mixer) if n.startswith("init_") and n.endswith("_weights"))
    getattr(mixer, init_name)()  # A_log, D and dt (FalconMamba's cannot run inside its __init__)
    with torch.no_grad():
        for param in mixer.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return mixer


def our_config(name: str, tp: int = 1, sp: bool = False) -> TransformerConfig:
    return TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=1, vocab_size=16,
                             normalization="RMSNorm", position_embedding_type="none", hybrid_override_pattern="M",
                             hidden_dropout=0.0, attention_dropout=0.0, tensor_model_parallel_size=tp,
                             sequence_parallel=sp, norm_epsilon=1e-5, **CASES[name][3])


def full_weights(name: str) -> Dict[str, torch.Tensor]:
    """The HF mixer's tensors by their (shared) names; weightless norm buffers dropped."""
    return {k: v.detach().clone() for k, v in hf_mixer(name).state_dict().items() if "layernorm" not in k}


def our_mixer(name: str, state: ParallelState, sp: bool = False) -> MambaMixer:
    tp = state.tp_group.size
    mixer = MambaMixer(our_config(name, tp, sp), state)
    weights = full_weights(name)
    assert set(dict(mixer.named_parameters())) == set(weights)
    with torch.no_grad():
        for key, param in mixer.named_parameters():
            shard = param_meta(param).tp_shard
            full = weights[key]
            param.copy_(shard.shard(full, state.tp_group.rank, tp) if shard is not None else full)
    return mixer


def inputs() -> torch.Tensor:
    return torch.randn(SEQ, BATCH, HIDDEN, generator=torch.Generator().manual_seed(3))  # [s, b, h]


def run_ours(name: str, state: ParallelState, sp: bool = False) -> Dict[str, Any]:
    """Output, input gradient and full parameter gradients of a sum-of-squares loss.

    Under SP each rank feeds and differentiates its own sequence chunk; the gradients that grad sync
    would complete (partial sums over TP, replicated B/C groups) are completed here the same way.
    """
    mixer = our_mixer(name, state, sp)
    group = state.tp_group
    x = inputs().requires_grad_(True)
    local = x.chunk(group.size, dim=0)[group.rank].detach().requires_grad_(True) if sp else x
    out = mixer(local)
    out.pow(2).sum().backward()
    grads = {}
    for key, param in mixer.named_parameters():
        meta = param_meta(param)
        if meta.grad_partial_over_tp:
            all_reduce(param.grad, group)
        if meta.tp_shard is not None and meta.tp_shard.has_replicas(group.size):
            reduce_replicated_grads(param.grad, meta.tp_shard, group)
        grads[key] = gather_full_tensor(param.grad, meta.tp_shard, group)
    if sp:
        return {"out": all_gather_along_dim(out.detach(), 0, group),
                "x_grad": all_gather_along_dim(local.grad, 0, group), "grads": grads}
    return {"out": out.detach(), "x_grad": x.grad, "grads": grads}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mixer_matches_transformers_tp1(name: str) -> None:
    expected = hf_mixer(name)(inputs().transpose(0, 1)).transpose(0, 1).detach()  # HF is [b, s, h]
    ours = run_ours(name, layout_state(1))["out"]
    assert (ours - expected).abs().max().item() <= TOLERANCE


def _tp2_worker(rank: int, world_size: int) -> Dict[Tuple[str, bool], Dict[str, Any]]:
    state = initialize(tp=world_size)
    return {(name, sp): run_ours(name, state, sp) for name in CASES for sp in (False, True)}


def test_mixer_tp2_and_sp_match_tp1() -> None:
    per_rank: List[Dict] = run_distributed(2, _tp2_worker)
    for name in CASES:
        reference = run_ours(name, layout_state(1))
        for sp in (False, True):
            for results in per_rank:
                result = results[(name, sp)]
                torch.testing.assert_close(result["out"], reference["out"], rtol=0, atol=TOLERANCE)
                torch.testing.assert_close(result["x_grad"], reference["x_grad"], rtol=1e-4, atol=1e-4)
                for key, grad in reference["grads"].items():
                    torch.testing.assert_close(result["grads"][key], grad, rtol=1e-4, atol=1e-4,
                                               msg=lambda m: f"{name} sp={sp} {key}: {m}")


def test_scans_equal_plain_recurrence() -> None:
    """The chunked SSD equals the per-step recurrence; segment sums are the partial sums they claim."""
    gen = torch.Generator().manual_seed(5)
    b, s, h, p, n = 2, 9, 3, 4, 5
    x, B, C = torch.randn(b, s, h, p, generator=gen), torch.randn(b, s, h, n, generator=gen), \
        torch.randn(b, s, h, n, generator=gen)
    dt, A, D = torch.rand(b, s, h, generator=gen), -torch.rand(h, generator=gen) - 0.1, torch.randn(h, generator=gen)
    state, expected = torch.zeros(b, h, p, n), []
    for t in range(s):
        state = torch.exp(dt[:, t, :, None, None] * A[:, None, None]) * state + \
            (dt[:, t, :, None, None] * x[:, t, :, :, None]) * B[:, t, :, None, :]
        expected.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]) + D[:, None] * x[:, t])
    expected = torch.stack(expected, dim=1)
    for chunk in (1, 4, 9, 16):
        torch.testing.assert_close(ssd_chunked_scan(x, dt, A, B, C, D, chunk)[0], expected, rtol=1e-5, atol=1e-5)
    # Mamba1's scan is the same recurrence with one channel per head (p = 1) and B, C shared by channels
    y1 = selective_scan(x[..., 0], dt, A[:, None].expand(h, n), B[:, :, 0], C[:, :, 0], D)[0]
    y2 = ssd_chunked_scan(x[..., :1], dt, A, B[:, :, :1].expand(b, s, h, n), C[:, :, :1].expand(b, s, h, n), D, 4)[0]
    torch.testing.assert_close(y1, y2[..., 0], rtol=1e-5, atol=1e-5)
    a = torch.randn(6, generator=gen)
    sums = segment_sums(a)
    assert sums[4, 1].item() == pytest.approx(a[2:5].sum().item(), abs=1e-6) and sums[3, 3].item() == 0.0
    assert torch.isneginf(sums[1, 2])


def test_bad_sizes_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="--mamba-num-groups") as error:
        dataclasses.replace(our_config("mamba2_groups"), mamba_num_groups=3)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="not divisible by --tensor-model-parallel-size"):
        dataclasses.replace(our_config("mamba"), mamba_expand=3, tensor_model_parallel_size=5)


@pytest.mark.parametrize("name", ["mamba", "mamba2_one_group"])
def test_initialisation_is_mamba_s_and_independent_of_tp(name: str) -> None:
    """A_log and the dt bias start as Mamba/Megatron start them, with the same values at TP 1 and TP 2."""
    from core.models.gpt_model import build_model, unshard_state_dict

    config = dataclasses.replace(our_config(name), num_layers=2, hybrid_override_pattern="MM")
    full = dict(build_model(config, layout_state(1), torch.device("cpu"), seed=7).state_dict())
    tp2_config = dataclasses.replace(config, tensor_model_parallel_size=2)
    ranks = [build_model(tp2_config, layout_state(2, rank), torch.device("cpu"), seed=7) for rank in range(2)]
    merged = unshard_state_dict([dict(model.state_dict()) for model in ranks], ranks[0])
    for key, value in full.items():
        if key.startswith("decoder."):  # the vocabulary's padding grows with TP
            assert torch.equal(merged[key], value), key
    a_log, dt_bias = full["decoder.layers.1.mixer.A_log"], full[
        "decoder.layers.1.mixer.dt_proj.bias" if name == "mamba" else "decoder.layers.1.mixer.dt_bias"]
    dt = torch.nn.functional.softplus(dt_bias)
    assert dt.min() >= 1e-3 - 1e-7 and dt.max() <= 1e-1 + 1e-7 and dt.std() > 0
    A = torch.exp(a_log)
    if name == "mamba":  # S4D-real: 1..N on every channel
        assert torch.allclose(A, torch.arange(1, A.size(1) + 1).float().expand_as(A))
    else:
        assert A.min() >= 1.0 and A.max() <= 16.0 and A.std() > 0


@pytest.mark.parametrize("name", ["falcon_mamba_bias", "mamba2_groups"])
def test_flops_per_token_counts_mamba_matmuls_and_scan(name: str) -> None:
    """6 x the matmul weights a token meets (projections and the output layer) + 7 d_inner n per Mamba layer."""
    from core.models.gpt_model import build_model
    from mindspeed_llm.training.metrics import training_flops_per_token

    config = dataclasses.replace(our_config(name), num_layers=2, hybrid_override_pattern="MM",
                                 make_vocab_size_divisible_by=16)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    matmul = sum(p.numel() for key, p in model.named_parameters()
                 if p.dim() == 2 and "word_embeddings" not in key and not key.endswith("A_log"))
    matmul += config.hidden_size * config.padded_vocab_size  # the tied output layer
    scan = 2 * 7 * config.mamba_d_inner * config.mamba_state_dim
    assert training_flops_per_token(config, 32) == pytest.approx(6 * matmul + scan)

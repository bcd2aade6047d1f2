"""Muon's pieces on one process: the flags reach the optimizer, the parameter split, the scale rules, Nesterov,
Q/K/V apart, the matmul-precision setting, and the bad inputs.

(The whole optimizer against a Muon written out by hand, and every parallel layout against one process:
tests/distributed/test_muon.py.)
"""
from __future__ import annotations

import math

import pytest
import torch

from core.device import reduced_fp32_matmul_pays
from core.optimizer.muon import (Muon, MuonSettings, matmul_precision, muon_scale, newton_schulz,
                                 orthogonalize_local, uses_muon)
from core.tensor_parallel.param_meta import ParamMeta, Segment, TPShard, set_meta
from core.transformer.qk_clip import max_logits
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.training import optimizer_config_from_args

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--micro-batch-size", "1", "--train-iters", "2", "--lr", "1e-3", "--mock-data", "--vocab-size", "128"]
MUON = BASE + ["--optimizer", "muon"]


def test_each_flag_reaches_the_settings() -> None:
    default = optimizer_config_from_args(parse_args(MUON)).muon
    assert default == MuonSettings()
    changed = {"--muon-momentum": ("0.95", "momentum", 0.95), "--muon-num-ns-steps": ("3", "num_ns_steps", 3),
               "--muon-scale-mode": ("unit_rms_norm", "scale_mode", "unit_rms_norm"),
               "--muon-extra-scale-factor": ("0.2", "extra_scale_factor", 0.2),
               "--muon-tp-mode": ("blockwise", "tp_mode", "blockwise"),
               "--muon-fp32-matmul-prec": ("low", "fp32_matmul_prec", "low")}
    for flag, (value, field, expected) in changed.items():
        settings = optimizer_config_from_args(parse_args(MUON + [flag, value])).muon
        assert getattr(settings, field) == expected != getattr(default, field), flag
    assert optimizer_config_from_args(parse_args(MUON + ["--muon-use-nesterov"])).muon.use_nesterov
    assert not optimizer_config_from_args(parse_args(MUON + ["--muon-no-split-qkv"])).muon.split_qkv


@pytest.mark.parametrize("extra, expected", [
    (["--muon-momentum", "0.95"], "--muon-momentum"),
    (["--muon-use-nesterov"], "--muon-use-nesterov"),
    (["--optimizer", "muon", "--use-torch-fsdp"], "use --use-torch-fsdp2 instead of --use-torch-fsdp"),
    (["--optimizer", "muon", "--swap-optimizer"], "--swap-optimizer"),
    (["--optimizer", "muon", "--muon-num-ns-steps", "0"], "--muon-num-ns-steps 0 must be at least 1"),
    (["--optimizer", "sgd", "--adam-beta2", "0.95"], "--adam-beta2"),
])
def test_bad_combinations_are_refused_in_one_line(extra, expected) -> None:
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + extra), 2)
    assert expected in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("extra, expected", [
    (["--qk-clip-threshold", "50"], "add --qk-clip or drop them"),
    (["--qk-clip", "--qk-clip-alpha", "1.5"], "--qk-clip-alpha within [0, 1]"),
    (["--qk-clip", "--qk-clip-threshold", "0"], "--qk-clip-threshold must be positive"),
    (["--qk-clip", "--qk-layernorm"], "--qk-clip: --qk-norm per_head normalises the queries and keys"),
    (["--qk-clip", "--context-parallel-size", "2", "--attention-dropout", "0"],
     "--qk-clip (its per-head logit records) is not supported with --context-parallel-size 2 yet with ring "
     "attention (megatron_cp_algo); use kvallgather_cp_algo or ulysses_cp_algo"),
])
def test_bad_qk_clip_settings_are_refused_in_one_line(extra, expected) -> None:
    with pytest.raises((ArgumentError, ValueError)) as info:
        validate_args(parse_args(BASE + extra), 2)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_qk_clip_flags_reach_the_optimizer() -> None:
    assert optimizer_config_from_args(parse_args(BASE)).qk_clip_threshold is None
    config = optimizer_config_from_args(parse_args(BASE + ["--qk-clip", "--qk-clip-threshold", "30",
                                                           "--qk-clip-alpha", "0.25"]))
    assert (config.qk_clip_threshold, config.qk_clip_alpha) == (30.0, 0.25)


def test_max_logits_follow_the_mask() -> None:
    """Each head's largest scaled product over the allowed pairs only (causal by default)."""
    generator = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 3, 5, 4, generator=generator), torch.randn(2, 3, 5, 4, generator=generator)
    scores = (q @ k.transpose(-1, -2)) * 0.5  # [b, n, s, s]
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = scores.masked_fill(~causal, float("-inf")).amax(dim=(0, 2, 3))
    torch.testing.assert_close(max_logits(q, k, None, 0.5), expected)
    diagonal = torch.eye(5, dtype=torch.bool)
    torch.testing.assert_close(max_logits(q, k, diagonal, 0.5), scores.diagonal(dim1=-2, dim2=-1).amax(dim=(0, 2)))


def test_adam_flags_serve_the_muon_fallback() -> None:
    args = parse_args(MUON + ["--adam-beta2", "0.95", "--muon-momentum", "0.95"])
    validate_args(args, 1)
    assert optimizer_config_from_args(args).adam_beta2 == 0.95


def test_which_parameters_muon_steps() -> None:
    matrix, vector = torch.zeros(8, 4), torch.zeros(8)
    assert uses_muon("decoder.layers.0.self_attention.linear_qkv.weight", matrix)
    assert uses_muon("decoder.layers.0.mlp.router.weight", matrix)
    for name in ("embedding.word_embeddings.weight", "embedding.position_embeddings.weight", "output_layer.weight",
                 "mtp.layers.0.output_layer.weight", "decoder.layers.0.mlp.linear_fc1.bias"):
        assert not uses_muon(name, matrix), name
    assert not uses_muon("decoder.layers.0.input_layernorm.weight", vector)
    assert not uses_muon("decoder.layers.0.mixer.conv1d.weight", torch.zeros(8, 1, 4))  # a kernel, not a matrix
    assert not uses_muon("decoder.layers.0.mlp.shared_gate.weight", torch.zeros(1, 8))  # a vector in 2-D
    experts = set_meta(torch.zeros(4, 8, 6), ParamMeta(is_expert=True))
    assert uses_muon("decoder.layers.0.mlp.experts.linear_fc1.weight", experts)


def test_scale_rules() -> None:
    assert muon_scale(64, 16, MuonSettings()) == 8.0
    assert muon_scale(16, 64, MuonSettings(extra_scale_factor=0.2)) == pytest.approx(1.6)
    assert muon_scale(64, 16, MuonSettings(scale_mode="unit_rms_norm")) == 2.0
    assert muon_scale(16, 64, MuonSettings(scale_mode="unit_rms_norm")) == 0.5
    assert muon_scale(16, 64, MuonSettings(scale_mode="shape_scaling")) == 1.0
    assert muon_scale(64, 16, MuonSettings(scale_mode="shape_scaling")) == 2.0


def test_newton_schulz_orthogonalises() -> None:
    """Five quintic steps push every singular value into Muon's band (about 0.7 to 1.2), tall or wide."""
    generator = torch.Generator().manual_seed(0)
    for shape in ((32, 12), (12, 32)):
        x = torch.randn(shape, generator=generator)
        singular = torch.linalg.svdvals(newton_schulz(x, 5))
        assert singular.min() > 0.6 and singular.max() < 1.25, singular
        assert torch.linalg.svdvals(newton_schulz(x, 1)).min() < 0.6  # one step is not there yet


def test_qkv_is_orthogonalised_as_three_matrices() -> None:
    generator = torch.Generator().manual_seed(1)
    update = torch.randn(16, 8, generator=generator)  # Q 8 rows, K 4, V 4
    meta = ParamMeta(tp_shard=TPShard(0, (Segment(2, 4), Segment(1, 4), Segment(1, 4))))
    name = "decoder.layers.0.self_attention.linear_qkv.weight"
    apart = orthogonalize_local(update, name, meta, MuonSettings(fp32_matmul_prec="high"), None)
    whole = orthogonalize_local(update, name, meta, MuonSettings(split_qkv=False, fp32_matmul_prec="high"), None)
    expected = torch.cat([newton_schulz(part, 5) * math.sqrt(8) for part in update.split([8, 4, 4])])
    torch.testing.assert_close(apart, expected)
    torch.testing.assert_close(whole, newton_schulz(update, 5) * math.sqrt(16))
    other = orthogonalize_local(update, "decoder.layers.0.mlp.linear_fc1.weight", meta, MuonSettings(), None)
    assert other.shape == update.shape and not torch.allclose(other, apart)


def test_nesterov_and_momentum() -> None:
    """Two steps of one matrix: the direction is NS(g + mu * m) with Nesterov, NS(m) without."""
    generator = torch.Generator().manual_seed(2)
    grads = [torch.randn(6, 4, generator=generator) for _ in range(2)]
    for nesterov in (False, True):
        settings = MuonSettings(momentum=0.5, use_nesterov=nesterov, fp32_matmul_prec="high")
        weight = torch.nn.Parameter(torch.ones(6, 4))
        optimizer = Muon([{"params": [weight], "muon": True}], lr=0.1, weight_decay=0.0, betas=(0.9, 0.99),
                         eps=1e-8, settings=settings)
        expected, momentum = torch.ones(6, 4), torch.zeros(6, 4)
        for grad in grads:
            weight.grad = grad.clone()
            optimizer.step()
            momentum = 0.5 * momentum + grad
            update = grad + 0.5 * momentum if nesterov else momentum
            expected = expected - 0.1 * newton_schulz(update, 5) * math.sqrt(6)
        torch.testing.assert_close(weight.detach(), expected)
        assert torch.equal(optimizer.state[weight]["momentum_buffer"], momentum)


def test_matmul_precision_is_set_inside_and_restored() -> None:
    before = torch.get_float32_matmul_precision()
    with matmul_precision("low", "cuda"):
        assert torch.get_float32_matmul_precision() == "medium"
    with matmul_precision("medium", "cuda"):
        assert torch.get_float32_matmul_precision() == "high"
    with matmul_precision("high", "cuda"):
        assert torch.get_float32_matmul_precision() == "highest"
    with matmul_precision("low", "cpu"):  # IEEE unless the CPU has AMX tiles
        assert torch.get_float32_matmul_precision() == ("medium" if reduced_fp32_matmul_pays("cpu") else "highest")
    assert torch.get_float32_matmul_precision() == before

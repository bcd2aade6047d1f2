"""Every benchmark runs: ``python bench/<name>.py --smoke`` exits 0 and prints one JSON object.

One test per file of ``bench/*.py`` (a new bench is picked up without editing
this file), each run as a user would run it: a subprocess from the repository
root, with the package imported as installed (no ``sys.path`` edits). Its
stdout must be exactly one line, a JSON object; log lines belong on stderr.
``--smoke`` sizes each bench to a few seconds.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES: List[Path] = sorted((ROOT / "bench").glob("*.py"))
TIMEOUT_S = 300


def test_benches_exist():
    assert len(BENCHES) >= 6, BENCHES


@functools.lru_cache(maxsize=None)
def smoke_run(bench: Path) -> subprocess.CompletedProcess:
    """``python bench/<name>.py --smoke`` from an empty directory, run once per session (tests of one bench's
    fields share the run)."""
    env = {**os.environ, "PYTHONPATH": ""}  # the installed package, as a user has it
    with tempfile.TemporaryDirectory(prefix="bench_smoke_") as cwd:
        return subprocess.run([sys.executable, str(bench), "--smoke"], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)


def smoke_record(bench: Path) -> dict:
    done = smoke_run(bench)
    assert done.returncode == 0, f"{bench.name} --smoke exited {done.returncode}:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"{bench.name} printed {len(lines)} lines on stdout:\n{done.stdout[-3000:]}"
    record = json.loads(lines[0])
    assert isinstance(record, dict) and record, lines[0]
    return record


@pytest.mark.parametrize("bench", BENCHES, ids=lambda path: path.stem)
def test_bench_smoke_prints_one_json_line(bench: Path) -> None:
    smoke_record(bench)


def test_checkpoint_bench_rows_and_ratios() -> None:
    """bench/checkpoint.py: every format's row is measured, the loads give back the saved weights, the async
    save is published, the resharding load resumes iteration 1. Timings are not compared: at the smoke size
    the async save's blocked time is not reliably below the sync save's."""
    record = smoke_record(ROOT / "bench" / "checkpoint.py")
    params = record["parameters"]
    assert params == record["resharding"]["parameters"]  # counted from the model and from the shape's formula
    for name in ("torch", "torch_dist"):
        row = record[name]
        assert row["save_s"] > 0 and row["load_s"] > 0 and row["loaded_equal"] is True, (name, row)
        assert row["bytes"] >= 12 * params, (name, row)  # fp32 weights and both Adam moments
    asyn = record["torch_dist_async"]
    assert 0 < asyn["blocked_s"] <= asyn["total_s"] and asyn["published"] is True, asyn
    assert asyn["bytes"] >= 12 * params, asyn
    reshard = record["resharding"]
    assert reshard["save_tp2_s"] > 0 and reshard["load_tp1_dp2_s"] > 0 and reshard["loaded_iteration"] == 1, reshard
    assert set(record["ratios"]) == {"async_blocked_over_sync_save", "dist_save_over_legacy_save",
                                     "dist_load_over_legacy_load", "dist_bytes_over_legacy_bytes"}
    assert all(isinstance(v, float) and v > 0 for v in record["ratios"].values()), record["ratios"]
    assert record["threads"] >= 1 and len(record["load_average_before"]) == 3


def test_linear_attention_bench_rows_ratios_and_slopes() -> None:
    """bench/linear_attention.py: a row per mixer and length, ratios to the attention row of the same length,
    saved bytes that grow with the sequence (every mixer keeps per-token activations), slopes from the shortest
    to the longest length, and the CP 2 rows whose ranks each keep about half of CP 1's activations."""
    record = smoke_record(ROOT / "bench" / "linear_attention.py")
    mixers = {"attention", "mamba2", "mamba1", "mamba1_heads", "gated_deltanet", "kda", "lightning", "rg_lru", "rwkv",
              "mlstm", "mamba_attention"}
    assert record["seqs"] == [64, 128] and set(record["table"]) == {"64", "128"}, record["seqs"]
    for seq, rows in record["table"].items():
        assert set(rows) == mixers, (seq, rows)
        base = rows["attention"]
        assert base["speed_ratio"] == base["saved_ratio"] == base["peak_ratio"] == 1.0, base
        for name, row in rows.items():
            assert row["tokens_per_s"] > 0 and 0 < row["saved_mb"] <= row["peak_mb"], (seq, name, row)
            assert abs(row["saved_ratio"] - row["saved_mb"] / base["saved_mb"]) < 0.02 * row["saved_ratio"] + 0.01
    for name in mixers:
        short, long = record["table"]["64"][name], record["table"]["128"][name]
        assert long["saved_mb"] > short["saved_mb"], name
        slope = record["memory_slope"][name]["saved_bytes_per_token"]
        assert abs(slope - (long["saved_mb"] - short["saved_mb"]) * 2 ** 20 / 64) < 0.02 * slope + 1024, name
    attention = record["table"]["128"]["attention"]["saved_mb"] / record["table"]["64"]["attention"]["saved_mb"]
    assert 1.8 < attention < 2.2, attention  # the fused causal kernel keeps no s x s tensor: linear in s
    cp = record["cp"]  # CP 2 against CP 1 at the longest length: every mixer, memory halved on each rank
    assert cp["seq"] == 128 and set(cp["rows"]) == mixers, cp
    for name, row in cp["rows"].items():
        assert row["cp1_step_s"] > 0 and row["cp2_step_s"] > 0, (name, row)
        assert abs(row["cp2_speedup"] - row["cp1_step_s"] / row["cp2_step_s"]) < 0.01 * row["cp2_speedup"] + 2e-3
        assert 0.35 < row["cp2_activation_ratio"] < 0.8, (name, row)  # each rank keeps about half the tokens


def _gpu_mfu_module():
    """bench/gpu_mfu.py as a module (bench/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_mfu", ROOT / "bench" / "gpu_mfu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_gpu_mfu_passes_only_flags_the_parser_accepts(monkeypatch) -> None:
    gpu_mfu = _gpu_mfu_module()
    monkeypatch.setattr(gpu_mfu, "FAST_FLAGS", ["--no-such-fused-flag", "--use-distributed-optimizer",
                                                "--sequence-parallel"])
    fsdp_argv = gpu_mfu.our_argv(gpu_mfu.TINY, "fsdp2", 2, True, None)  # FSDP2 refuses the distributed optimizer
    flags, skipped = gpu_mfu.fast_flags(fsdp_argv, tiny=True, world_size=2)
    assert flags == ["--sequence-parallel"], (flags, skipped)
    assert "parser" in skipped["--no-such-fused-flag"]
    assert "--use-distributed-optimizer" in skipped["--use-distributed-optimizer"]


@pytest.mark.slow
def test_gpu_mfu_sh_tiny_mode_with_variants(tmp_path) -> None:
    """``TINY=1 VARIANTS=on bash bench/gpu_mfu.sh``: ours, the transformers baseline, FSDP2 and TP2 on 2 CPU ranks."""
    env = {**os.environ, "TINY": "1", "VARIANTS": "on", "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_mfu.sh"), "--steps", "1", "--fp8-recipe", "tensorwise"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout[-3000:]
    record = json.loads(lines[0])
    assert record["mode"] == "tiny" and record["device_type"] == "cpu" and record["peak_tflops"] > 0
    gpu_mfu = _gpu_mfu_module()
    used = {flag for flag in record["flags"] if flag in gpu_mfu.FAST_FLAGS}  # "flags": the argv they add
    assert used | set(record["skipped_flags"]) == set(gpu_mfu.FAST_FLAGS), record
    assert not used & set(record["skipped_flags"])
    runs = [record["ours"], record["baseline"], record["ours_fp8"], record["variants"]["fsdp2"],
            record["variants"]["tp2"]]
    for run in runs:
        assert "error" not in run, run
        assert run["tokens_per_s"] > 0 and 0 < run["mfu"] < 1 and run["tflops_per_device"] > 0, run
    assert record["variants"]["fsdp2"]["world_size"] == record["variants"]["tp2"]["world_size"] == 2
    assert record["ratio_ours_vs_baseline"] == pytest.approx(
        record["ours"]["tokens_per_s"] / record["baseline"]["tokens_per_s"], rel=1e-2)
    assert record["ours_fp8"]["flags"] == ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"]
    assert record["ours_fp8"]["ratio_fp8_vs_bf16"] == pytest.approx(
        record["ours_fp8"]["tokens_per_s"] / record["ours"]["tokens_per_s"], rel=1e-2)


def test_train_throughput_emulates_an_avx2_cpu(tmp_path) -> None:
    """``--emulate-avx2`` restarts the bench with PyTorch and oneDNN limited to AVX2: PyTorch then reports the
    AVX2 capability and no bf16 support, so the suite's GEMM choice sees a CPU without bf16 units."""
    env = {**os.environ, "PYTHONPATH": "", "TMPDIR": str(tmp_path)}
    for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "TORCHINDUCTOR_CACHE_DIR"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_throughput.py"), "--smoke", "--dtypes", "fp32",
                           "--emulate-avx2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    # AVX2, or PyTorch's DEFAULT kernels on an x86 CPU without AVX2 at all
    assert record["cpu_capability"] in ("AVX2", "DEFAULT") and record["cpu_bf16_units"] is False
    assert record["emulated_avx2"]
    assert record["fp32"]["ours_tokens_per_s"] > 0


def test_sparse_attention_bench_rows_and_ratios() -> None:
    """bench/sparse_attention.py: dense MLA, DSA, DSA's warm-up and DeepSeek-V4's compressed attention at every
    length, ratios to dense MLA of the same length, the memory slopes, and the DSA-CP traffic rows (indexer keys plus
    fetched latents against the K/V all-gather, each part within its bound)."""
    record = smoke_record(ROOT / "bench" / "sparse_attention.py")
    assert record["topk"] < min(record["seqs"]) and record["cp"]["seq"] == max(record["seqs"])
    for name, row in record["cp"]["rows"].items():
        assert abs(row["dsa_mb"] - row["index_keys_mb"] - row["fetched_latents_mb"]) < 0.01, (name, row)
        assert 0 < row["fetched_latents_mb"] and 0 < row["ratio"] < 1, (name, row)
    for seq in record["seqs"]:
        rows = record["table"][str(seq)]
        assert set(rows) == {"attention", "dsa", "dsa_warmup", "v4"}, rows
        assert rows["attention"]["speed_ratio"] == rows["attention"]["peak_ratio"] == 1.0
        for row in rows.values():
            assert row["tokens_per_s"] > 0 and row["peak_mb"] > 0 and row["saved_mb"] > 0, row
            assert abs(row["peak_ratio"] - row["peak_mb"] / rows["attention"]["peak_mb"]) < 0.01, row
    assert set(record["memory_slope"]) == {"attention", "dsa", "dsa_warmup", "v4"}
    for name, row in record["v4_cp"]["rows"].items():  # DeepSeek-V4's exchange: its parts, below the K/V all-gather
        assert abs(row["v4_mb"] - row["halo_mb"] - row["prefix_mb"] - row["entries_mb"]) < 0.01, (name, row)
        assert 0 < row["halo_mb"] and 0 < row["entries_mb"] and 0 < row["ratio"] < 1, (name, row)

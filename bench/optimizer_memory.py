"""Bytes per parameter per rank for each optimizer mode, with a check against Megatron's formula.

    python bench/optimizer_memory.py
    python bench/optimizer_memory.py --smoke     # a tinier model, DP 1 and 2: seconds

Trains a small model for one step at DP = 1, 2 and 4 (gloo, CPU processes; one
launch per DP size) in fp32 and bf16, with the plain and the distributed
optimizer, and in bf16 with the distributed optimizer under
``--use-precision-aware-optimizer`` (bf16 moments; fp8 moments; fp16 master
weights; bf16 gradient buffers; all of these with fp8 moments), and counts on
DP rank 0 the bytes of model weights, gradient buffers, master weights (when
they are copies) and Adam moments, divided by the model's parameter count.

Two kinds of figures per row:

* ``ratio_to_plain``: bytes per parameter over those of the plain optimizer
  at the same dtype, measured in this run (the baseline);
* ``formula_check``: bytes per parameter over Megatron's published formula
  (distributed-optimizer docs: fp32 weights with fp32 grads 16 plain vs
  8 + 8/d distributed; bf16 weights with fp32 grads 18 vs 6 + 12/d). This is
  not a measured comparison with Megatron: 1.0 says our per-rank accounting
  matches the formula. Precision-aware rows are checked against the same
  accounting with their dtypes: bf16 weights 2 + gradients (4 fp32 | 2 bf16)
  + (master weights (4 | 2 fp16) + exp_avg + exp_avg_sq) / d, with d the DP
  size and a moment 4 (fp32), 2 (bf16, fp16) or 1 (fp8) bytes per element.
  The fp32 scale beside each fp8/fp16 moment (4 bytes per parameter piece) is
  measured but not in the formula: 4 bytes per tensor of thousands of
  elements, well under 0.1% here and less in real models.

Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
from typing import Dict, List, Tuple

import torch

from core.launcher import run_distributed

ARGV = ["--num-layers", "2", "--hidden-size", "128", "--ffn-hidden-size", "352", "--num-attention-heads", "4",
        "--seq-length", "32", "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "2",
        "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--make-vocab-size-divisible-by", "1", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--device", "cpu", "--eval-iters", "0"]
SMOKE = {"--hidden-size": "32", "--ffn-hidden-size": "64", "--vocab-size": "128", "--seq-length": "16"}
Mode = Tuple[str, bool, str]  # (dtype, distributed optimizer, precision-aware preset or "")
# --use-precision-aware-optimizer presets (bf16 model, distributed optimizer): dtype flag -> value
PRECISION_AWARE: Dict[str, Dict[str, str]] = {
    "bf16_moments": {"exp_avg": "bf16", "exp_avg_sq": "bf16"},
    "fp8_moments": {"exp_avg": "fp8", "exp_avg_sq": "fp8"},
    "fp16_main_params": {"main_params": "fp16"},
    "bf16_main_grads": {"main_grads": "bf16"},
    "all_low": {"main_grads": "bf16", "main_params": "fp16", "exp_avg": "fp8", "exp_avg_sq": "fp8"},
}
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def smoke_argv() -> List[str]:
    argv = list(ARGV)
    for flag, value in SMOKE.items():
        argv[argv.index(flag) + 1] = value
    return argv + ["--num-workers", "0"]  # no DataLoader processes to start


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(rank: int, world_size: int, argv: List[str]) -> Dict[str, float]:
    """Bytes per parameter on this rank after one training step, by kind."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    trainer.train_step(trainer.train_iterator())
    model_params = list(trainer.model.parameters())
    weights = _bytes(model_params)
    grads = sum(buffer.data.numel() * buffer.data.element_size() for buffer in trainer.dp.grad_buffers[0].buffers)
    optimizer = trainer.optimizer
    masters = [p.master for p in optimizer.pieces] if hasattr(optimizer, "pieces") else optimizer.master_params
    model_storage = {p.untyped_storage().data_ptr() for p in model_params}
    model_storage |= {b.param_data.untyped_storage().data_ptr() for b in trainer.dp.grad_buffers[0].buffers
                      if b.param_data is not None}
    master_copies = _bytes(m for m in masters if m.untyped_storage().data_ptr() not in model_storage)
    moments = _bytes(v for state in optimizer.optimizer.state.values() for k, v in state.items() if k != "step")
    count = sum(p.numel() for p in model_params)
    return {"weights": weights / count, "grads": grads / count, "master": master_copies / count,
            "moments": moments / count, "total": (weights + grads + master_copies + moments) / count}


def megatron_formula(dtype: str, distributed: bool, dp: int, preset: str = "") -> float:
    """Megatron's published bytes per parameter (distributed-optimizer docs), not a measurement; a
    precision-aware preset: the same accounting with its dtypes (bf16 weights, the distributed optimizer)."""
    if preset:
        dtypes = {"main_grads": "fp32", "main_params": "fp32", "exp_avg": "fp32", "exp_avg_sq": "fp32",
                  **PRECISION_AWARE[preset]}
        sharded = BYTES[dtypes["main_params"]] + BYTES[dtypes["exp_avg"]] + BYTES[dtypes["exp_avg_sq"]]
        return 2 + BYTES[dtypes["main_grads"]] + sharded / dp
    if dtype == "fp32":
        return 8 + 8 / dp if distributed else 16.0
    return 6 + 12 / dp if distributed else 18.0


def mode_flags(mode: Mode) -> List[str]:
    dtype, distributed, preset = mode
    flags = (["--bf16"] if dtype == "bf16" else []) + (["--use-distributed-optimizer"] if distributed else [])
    if preset:
        flags.append("--use-precision-aware-optimizer")
        for name, value in PRECISION_AWARE[preset].items():
            flags += [f"--{name.replace('_', '-')}-dtype", value]
    return flags


def measure_modes(rank: int, world_size: int, argv: List[str], modes: List[Mode]) -> Dict[Mode, Dict[str, float]]:
    """``run_distributed`` worker: every mode at this DP size, one after another in the same processes."""
    return {mode: measure(rank, world_size, argv + mode_flags(mode)) for mode in modes}


def modes_at(dp: int) -> List[Mode]:
    """The plain optimizer does not depend on DP: measured at DP = 1 only."""
    return ([(dtype, distributed, "") for dtype in ("fp32", "bf16") for distributed in (False, True)
             if distributed or dp == 1] + [("bf16", True, preset) for preset in PRECISION_AWARE])


def row(mode: Mode, dp: int, result: Dict[str, float], plain_total: float) -> Dict[str, object]:
    dtype, distributed, preset = mode
    formula = megatron_formula(dtype, distributed, dp, preset)
    return {"dtype": dtype, "optimizer": "distributed" if distributed else "plain", "dp": dp,
            "precision_aware": preset or None,
            "bytes_per_param": round(result["total"], 3),
            "breakdown": {k: round(v, 3) for k, v in result.items() if k != "total"},
            "ratio_to_plain": round(result["total"] / plain_total, 4),
            "megatron_formula": round(formula, 3), "formula_check": round(result["total"] / formula, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tinier model at DP 1 and 2")
    args = parser.parse_args()
    argv, sizes = (smoke_argv(), (1, 2)) if args.smoke else (ARGV, (1, 2, 4))
    measured = {dp: run_distributed(dp, measure_modes, argv, modes_at(dp))[0] for dp in sizes}
    plain = {dtype: measured[1][(dtype, False, "")]["total"] for dtype in ("fp32", "bf16")}
    rows = [row(mode, dp, result, plain[mode[0]]) for dp in sizes for mode, result in measured[dp].items()]
    print(json.dumps({"bench": "optimizer_memory", "rows": rows}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

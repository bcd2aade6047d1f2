"""Bytes per parameter per rank for each optimizer mode, with a check against Megatron's formula.

    python bench/optimizer_memory.py
    python bench/optimizer_memory.py --smoke     # a tinier model, DP 1 and 2: seconds

Trains a small model for one step at DP = 1, 2 and 4 (gloo, CPU processes; one
launch per DP size) in fp32 and bf16, with the plain and the distributed
optimizer, and counts on DP rank 0 the bytes of model weights, gradient
buffers, fp32 master weights (when they are copies) and Adam moments, divided
by the model's parameter count.

Two kinds of figures per row:

* ``ratio_to_plain``: bytes per parameter over those of the plain optimizer
  at the same dtype, measured in this run (the baseline);
* ``formula_check``: bytes per parameter over Megatron's published formula
  (distributed-optimizer docs: fp32 weights with fp32 grads 16 plain vs
  8 + 8/d distributed; bf16 weights with fp32 grads 18 vs 6 + 12/d). This is
  not a measured comparison with Megatron: 1.0 says our per-rank accounting
  matches the formula.

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
Mode = Tuple[str, bool]  # (dtype, distributed optimizer)


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


def megatron_formula(dtype: str, distributed: bool, dp: int) -> float:
    """Megatron's published bytes per parameter (distributed-optimizer docs), not a measurement."""
    if dtype == "fp32":
        return 8 + 8 / dp if distributed else 16.0
    return 6 + 12 / dp if distributed else 18.0


def mode_flags(mode: Mode) -> List[str]:
    dtype, distributed = mode
    return (["--bf16"] if dtype == "bf16" else []) + (["--use-distributed-optimizer"] if distributed else [])


def measure_modes(rank: int, world_size: int, argv: List[str], modes: List[Mode]) -> Dict[Mode, Dict[str, float]]:
    """``run_distributed`` worker: every mode at this DP size, one after another in the same processes."""
    return {mode: measure(rank, world_size, argv + mode_flags(mode)) for mode in modes}


def modes_at(dp: int) -> List[Mode]:
    """The plain optimizer does not depend on DP: measured at DP = 1 only."""
    return [(dtype, distributed) for dtype in ("fp32", "bf16") for distributed in (False, True)
            if distributed or dp == 1]


def row(mode: Mode, dp: int, result: Dict[str, float], plain_total: float) -> Dict[str, object]:
    dtype, distributed = mode
    formula = megatron_formula(dtype, distributed, dp)
    return {"dtype": dtype, "optimizer": "distributed" if distributed else "plain", "dp": dp,
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
    plain = {dtype: measured[1][(dtype, False)]["total"] for dtype in ("fp32", "bf16")}
    rows = [row(mode, dp, result, plain[mode[0]]) for dp in sizes for mode, result in measured[dp].items()]
    print(json.dumps({"bench": "optimizer_memory", "rows": rows}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

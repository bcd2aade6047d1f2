"""Bytes per parameter per rank for each optimizer mode, next to Megatron's table.

    python bench/optimizer_memory.py

Trains a small model for one step at DP = 1, 2 and 4 (gloo, CPU processes)
in fp32 and bf16, with the plain and the distributed optimizer, and counts
on DP rank 0 the bytes of model weights, gradient buffers, fp32 master
weights (when they are copies) and Adam moments, divided by the model's
parameter count. Megatron's published figures (distributed-optimizer docs):
fp32 weights with fp32 grads 16 plain vs 8 + 8/d distributed; bf16 weights
with fp32 grads 18 vs 6 + 12/d. Prints one JSON line.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from core.launcher import run_distributed  # noqa: E402

ARGV = ["--num-layers", "2", "--hidden-size", "128", "--ffn-hidden-size", "352", "--num-attention-heads", "4",
        "--seq-length", "32", "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "2",
        "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--make-vocab-size-divisible-by", "1", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--device", "cpu", "--eval-iters", "0"]


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(rank: int, world_size: int, extra: List[str]) -> Dict[str, float]:
    from mindspeed_llm.training.training import setup

    trainer = setup(ARGV + extra)
    trainer.train_step(trainer.train_iterator())
    model_params = list(trainer.model.parameters())
    weights = _bytes(model_params)
    grads = sum(buffer.data.numel() * buffer.data.element_size() for buffer in trainer.buffers.buffers)
    optimizer = trainer.optimizer
    masters = [p.master for p in optimizer.pieces] if hasattr(optimizer, "pieces") else optimizer.master_params
    model_storage = {p.untyped_storage().data_ptr() for p in model_params}
    model_storage |= {b.param_data.untyped_storage().data_ptr() for b in trainer.buffers.buffers
                      if b.param_data is not None}
    master_copies = _bytes(m for m in masters if m.untyped_storage().data_ptr() not in model_storage)
    moments = _bytes(v for state in optimizer.optimizer.state.values() for k, v in state.items() if k != "step")
    count = sum(p.numel() for p in model_params)
    return {"weights": weights / count, "grads": grads / count, "master": master_copies / count,
            "moments": moments / count, "total": (weights + grads + master_copies + moments) / count}


def megatron_table(dtype: str, distributed: bool, dp: int) -> float:
    if dtype == "fp32":
        return 8 + 8 / dp if distributed else 16.0
    return 6 + 12 / dp if distributed else 18.0


def main() -> None:
    rows = []
    for dtype in ("fp32", "bf16"):
        for distributed in (False, True):
            for dp in (1, 2, 4):
                if not distributed and dp > 1:
                    continue
                extra = (["--bf16"] if dtype == "bf16" else []) + (["--use-distributed-optimizer"] if distributed else [])
                result = run_distributed(dp, measure, extra)[0]
                rows.append({"dtype": dtype, "optimizer": "distributed" if distributed else "plain", "dp": dp,
                             "bytes_per_param": round(result["total"], 3),
                             "breakdown": {k: round(v, 3) for k, v in result.items() if k != "total"},
                             "megatron": round(megatron_table(dtype, distributed, dp), 3),
                             "ratio_to_megatron": round(result["total"] / megatron_table(dtype, distributed, dp), 4)})
    print(json.dumps({"bench": "optimizer_memory", "rows": rows}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

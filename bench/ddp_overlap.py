"""Step time at DP=2 with and without ``--overlap-grad-reduce``.

    python bench/ddp_overlap.py [--steps 6]
    python bench/ddp_overlap.py --smoke     # a tiny model, one timed step each way: seconds

Two gloo processes on the CPU (one launch) train the same model (several
gradient buckets, 4 micro-batches per step) for a few steps each way, one way
after the other; the median step time of each and their ratio (overlap / no
overlap) come out as one JSON line. On a 2-core CPU, compute and gloo's
communication share the cores, so little overlap is possible; on GPUs the
reductions run on their own stream while backward continues.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Dict, List

import torch

from core.launcher import run_distributed

ARGV = ["--num-layers", "4", "--hidden-size", "256", "--ffn-hidden-size", "704", "--num-attention-heads", "8",
        "--seq-length", "128", "--micro-batch-size", "2", "--global-batch-size", "16", "--train-iters", "100",
        "--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8000",
        "--make-vocab-size-divisible-by", "1", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--attention-dropout", "0", "--hidden-dropout", "0", "--device", "cpu", "--eval-iters", "0",
        "--ddp-bucket-size", "500000"]
SMOKE = {"--num-layers": "2", "--hidden-size": "32", "--ffn-hidden-size": "64", "--seq-length": "16",
         "--vocab-size": "128", "--ddp-bucket-size": "2000"}


def smoke_argv() -> List[str]:
    argv = list(ARGV)
    for flag, value in SMOKE.items():
        argv[argv.index(flag) + 1] = value
    return argv + ["--num-workers", "0"]  # no DataLoader processes to start


def step_times(argv: List[str], steps: int) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)  # warm-up
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.train_step(iterator)
        times.append(time.perf_counter() - start)
    return {"times": times, "buckets": len(trainer.dp.grad_buffers[0].buckets)}


def both_ways(rank: int, world_size: int, argv: List[str], steps: int) -> Dict[str, Dict[str, object]]:
    """``run_distributed`` worker: the step times without, then with, overlapped reduction."""
    return {"plain": step_times(argv, steps), "overlap": step_times(argv + ["--overlap-grad-reduce"], steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one timed step each way")
    args = parser.parse_args()
    argv, steps = (smoke_argv(), 1) if args.smoke else (ARGV, args.steps)
    runs = run_distributed(2, both_ways, argv, steps)[0]
    plain, overlap = runs["plain"], runs["overlap"]
    plain_s, overlap_s = statistics.median(plain["times"]), statistics.median(overlap["times"])
    print(json.dumps({"bench": "ddp_overlap", "dp": 2, "buckets": plain["buckets"],
                      "step_s_no_overlap": round(plain_s, 4), "step_s_overlap": round(overlap_s, 4),
                      "ratio_overlap_over_plain": round(overlap_s / plain_s, 3)}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

"""Pipeline bubble of 1F1B, interleaved 1F1B and zero-bubble (ZB-H1): simulated from the tables, and measured.

    python bench/pipeline_bubble.py [--pp 4] [--microbatches 8] [--vpp 2] [--no-measure]
                                    [--hidden 256] [--tokens 64] [--layers 2] [--repeats 3]
    python bench/pipeline_bubble.py --smoke     # pp 2, tiny stages, one repeat: seconds

Simulated: each table (core/pipeline_parallel/schedules.py) is run through the
event simulator (core/pipeline_parallel/simulate.py) with a fixed cost per
model chunk: forward F = 1, backward B = 2 for a whole stage (so F = 1/v,
B = 2/v for an interleaved chunk of 1/v of the stage's layers); zero-bubble
splits the backward into B = 1 (input gradient) and W = 1 (weight gradient).
Communication is free. The timeline is deterministic. Next to each: the
theoretical bubble ``(p-1)/(m+p-1)`` of 1F1B, ``(p-1)/(v m+p-1)`` of
interleaved 1F1B and ``(p-1)/(3m+p-1)`` of ZB-H1 (bubble (p-1)(F+B-W) over 3m
units of work), and the makespan as a ratio of 1F1B's.

Measured (unless ``--no-measure``): ``pp`` gloo processes on the CPU (one
thread each) run the real executor (``run_schedule``) on a tiny compute-bound
model: per stage ``--layers`` MLP blocks (ColumnParallelLinear h->4h, GELU,
RowParallelLinear 4h->h, TP = 1) on ``[tokens, 1, hidden]`` activations, so
every stage costs the same. Each compute step (F, B, W) is timestamped with the
machine-wide monotonic clock; per schedule the best of ``--repeats`` global
batches (after one warm-up) gives the makespan (first start to last end over
all ranks), each rank's idle fraction (1 - its compute time / makespan), the
mean F/B/W step costs, and the makespan as a ratio of 1F1B's in the same run.
``zero_bubble_unsplit`` runs the ZB-H1 table with weight-gradient deferral
switched off (B computes all gradients, W nothing: the executor before the
split was real) as a second baseline. The measurement needs ``pp`` free cores;
``cpu_count`` is printed with it (oversubscribed cores inflate the idle time).

Prints one JSON line.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from typing import Dict, List, Optional

import torch
from torch import nn

from core.launcher import run_distributed
from core.pipeline_parallel import schedules
from core.pipeline_parallel.schedules import (
    B, F, W, PipelineOptions, interleaved_one_f_one_b, one_f_one_b, run_schedule, zero_bubble,
)
from core.pipeline_parallel.simulate import simulate


def _figures(timeline, theory: float) -> Dict[str, object]:
    return {"makespan": round(timeline.makespan, 4),
            "idle_fraction": [round(x, 4) for x in timeline.idle_fraction],
            "theoretical_bubble": round(theory, 4),
            "peak_in_flight": timeline.peak_in_flight}


def simulated(pp: int, m: int, vpp: int) -> Dict[str, object]:
    plain = simulate(one_f_one_b(pp, m), {"F": 1.0, "B": 2.0})
    interleaved = simulate(interleaved_one_f_one_b(pp, vpp, m), {"F": 1.0 / vpp, "B": 2.0 / vpp})
    zb = simulate(zero_bubble(pp, m), {"F": 1.0, "B": 1.0, "W": 1.0})
    result: Dict[str, object] = {
        "1f1b": _figures(plain, (pp - 1) / (m + pp - 1)),
        "interleaved": _figures(interleaved, (pp - 1) / (vpp * m + pp - 1)),
        "zero_bubble": _figures(zb, (pp - 1) / (3 * m + pp - 1)),
    }
    for name in ("interleaved", "zero_bubble"):
        result[name]["makespan_vs_1f1b"] = round(result[name]["makespan"] / plain.makespan, 4)
    return result


# --------------------------------------------------------------------------- measured run

class _Stage(nn.Module):
    """``layers`` MLP blocks; the first stage reads ``batch["x"]``, the others the received activations."""

    def __init__(self, hidden: int, layers: int, seed: int) -> None:
        super().__init__()
        from core.parallel_state import Group
        from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear

        group = Group([0])
        self.blocks = nn.ModuleList()
        generator = torch.Generator().manual_seed(seed)
        for _ in range(layers):
            fc1 = ColumnParallelLinear(hidden, 4 * hidden, group=group, bias=True)
            fc2 = RowParallelLinear(4 * hidden, hidden, group=group, bias=True)
            with torch.no_grad():
                for param in (fc1.weight, fc2.weight):
                    param.copy_(torch.randn(param.shape, generator=generator) * hidden ** -0.5)
                fc1.bias.zero_()
                fc2.bias.zero_()
            self.blocks.append(nn.ModuleList([fc1, fc2]))
        self.input_tensor: Optional[torch.Tensor] = None

    def set_input_tensor(self, tensor: Optional[torch.Tensor]) -> None:
        self.input_tensor = tensor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fc1, fc2 in self.blocks:
            x = x + fc2(torch.nn.functional.gelu(fc1(x)))  # [s, 1, h]
        return x


def _timed(kind: str, function, log: List[tuple]):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        function(*args, **kwargs)
        log.append((kind, start, time.perf_counter()))
    return wrapper


@contextlib.contextmanager
def _no_deferral(_store):
    from core.tensor_parallel.layers import defer_weight_grads

    with defer_weight_grads(None):
        yield None


def _measure_worker(rank: int, pp: int, m: int, hidden: int, tokens: int, layers: int,
                    repeats: int) -> Dict[str, List[dict]]:
    """This stage's timestamped F/B/W steps per schedule and repeat (``run_distributed`` worker)."""
    import torch.distributed as dist

    from core.parallel_state import Group

    group = Group(list(range(pp)), dist.group.WORLD, rank)
    stage = _Stage(hidden, layers, seed=rank)
    last = rank == pp - 1
    generator = torch.Generator().manual_seed(0)
    batches = [{"x": torch.randn(tokens, 1, hidden, generator=generator)} for _ in range(m)]

    def forward_step(batch, model):
        x = batch["x"] if model.input_tensor is None else model.input_tensor
        out = model(x)
        return ((out.float() ** 2).mean(), {}) if last else (out, {})

    options = PipelineOptions(group, (tokens, 1, hidden), torch.float32, torch.device("cpu"))
    log: List[tuple] = []
    originals = (schedules._forward, schedules._backward, schedules._weight_backward, schedules.defer_weight_grads)
    schedules._forward = _timed(F, originals[0], log)
    schedules._backward = _timed(B, originals[1], log)
    schedules._weight_backward = _timed(W, originals[2], log)
    tables = {"1f1b": one_f_one_b(pp, m)[rank], "zero_bubble": zero_bubble(pp, m)[rank],
              "zero_bubble_unsplit": zero_bubble(pp, m)[rank]}
    runs: Dict[str, List[dict]] = {name: [] for name in tables}
    try:
        for repeat in range(repeats + 1):
            for name, actions in tables.items():
                schedules.defer_weight_grads = _no_deferral if name == "zero_bubble_unsplit" else originals[3]
                for param in stage.parameters():
                    param.grad = None
                dist.barrier()
                log.clear()
                begin = time.perf_counter()
                run_schedule(actions, [stage], forward_step, batches, options)
                end = time.perf_counter()
                if repeat:
                    runs[name].append({"begin": begin, "end": end, "log": list(log)})
    finally:
        schedules._forward, schedules._backward, schedules._weight_backward, schedules.defer_weight_grads = originals
    return runs


def _summarise(per_rank: List[Dict[str, List[dict]]], name: str, repeats: int) -> Dict[str, object]:
    best = None
    for repeat in range(repeats):
        runs = [ranks[name][repeat] for ranks in per_rank]
        starts = [min([r["begin"]] + [s for _, s, _ in r["log"]]) for r in runs]
        makespan = max(e for r in runs for _, _, e in r["log"]) - min(starts)
        if best is None or makespan < best[0]:
            best = (makespan, runs)
    makespan, runs = best
    busy = [sum(e - s for _, s, e in r["log"]) for r in runs]
    costs = {}
    for kind in (F, B, W):
        durations = [e - s for r in runs for k, s, e in r["log"] if k == kind]
        if durations:
            costs[kind] = round(statistics.mean(durations) * 1e3, 3)
    return {"makespan_ms": round(makespan * 1e3, 2),
            "idle_fraction": [round(1 - b / makespan, 4) for b in busy],
            "idle_ms": [round((makespan - b) * 1e3, 2) for b in busy],
            "mean_step_ms": costs}


def measured(pp: int, m: int, hidden: int, tokens: int, layers: int, repeats: int) -> Dict[str, object]:
    # perf_counter is CLOCK_MONOTONIC on Linux: one clock for every process of the machine
    ordered = run_distributed(pp, _measure_worker, m, hidden, tokens, layers, repeats)
    result: Dict[str, object] = {"cpu_count": os.cpu_count(), "model": f"{layers} x MLP h={hidden} 4h, "
                                 f"{tokens} tokens per micro-batch, fp32, 1 thread per rank"}
    for name in ("1f1b", "zero_bubble", "zero_bubble_unsplit"):
        result[name] = _summarise(ordered, name, repeats)
    plain = result["1f1b"]["makespan_ms"]
    for name in ("zero_bubble", "zero_bubble_unsplit"):
        result[name]["makespan_vs_1f1b"] = round(result[name]["makespan_ms"] / plain, 4)
    return result


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--vpp", type=int, default=2)
    parser.add_argument("--no-measure", action="store_true", help="only the simulated figures")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2, help="MLP blocks per stage in the measured run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="pp 2, 4 micro-batches, tiny stages, one repeat")
    args = parser.parse_args(argv)
    if args.smoke:
        args.pp, args.microbatches, args.vpp, args.hidden, args.tokens, args.layers, args.repeats = 2, 4, 2, 32, 8, 1, 1
    result: Dict[str, object] = {"bench": "pipeline_bubble", "pp": args.pp, "microbatches": args.microbatches,
                                 "vpp": args.vpp, "costs": "F=1 B=2 (ZB: B=1 W=1)"}
    result.update(simulated(args.pp, args.microbatches, args.vpp))
    if not args.no_measure:
        result["measured"] = measured(args.pp, args.microbatches, args.hidden, args.tokens, args.layers,
                                      args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

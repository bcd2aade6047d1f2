"""Context parallelism with the sequence length as the variable: memory, step time and communication per rank.

    python bench/context_parallel.py [--seqs 1024,2048,4096,8192] [--algos ring,ulysses,hybrid,kvallgather]
                                     [--cps 1,2,4] [--steps 1]
    python bench/context_parallel.py --smoke     # seq 256, CP 1 and 2, ring and Ulysses: seconds

The model is the Llama-shaped bench model of ``bench/train_throughput.py`` / ``bench/activation_memory.py``
(hidden 512, 8 heads of 64, FFN 1408, RMSNorm, SwiGLU, RoPE, fp32, dropout 0) scaled down to 2 layers and a
4096-token vocabulary, micro batch 1: with 8 layers and vocab 32000 one step at 8k tokens on one CPU core
takes about a minute and the whole table would not fit in ten minutes. For every sequence length, each CP
algorithm (``megatron_cp_algo`` = ring, ``ulysses_cp_algo``, ``hybrid_cp_algo`` with
``--ulysses-degree-in-cp 2`` at CP 4 only, ``kvallgather_cp_algo``) is trained by our ``Trainer`` at CP 1
(one run shared by every algorithm, in this process), 2 and 4 (one ``core.launcher.run_distributed`` launch
per CP size: gloo). Every rank has one thread; CP 4 runs 4 processes on the 2 cores of the reference
machine, so its times are oversubscribed: compare them across algorithms, not with CP 1. Per run and rank:

* ``peak_mb`` / ``activation_mb``: measured as ``bench/activation_memory.py`` measures them (its
  ``measure_memory``): on the CPU every tensor storage an operator creates during one training iteration
  is counted until freed. ``peak_mb`` is the iteration's peak above what was allocated when it started
  (weights and gradient buffers are already there, so it is activations, their gradients, the logits and
  temporaries); ``activation_mb`` is what the model's forward leaves allocated for the backward (the
  tensors saved for it, CP's included). The largest rank is reported, with its ratio to CP 1 (ideal: 1 / CP;
  ``activation_ratio_x_cp`` is that ratio times CP, 1 when ideal).
* ``step_s``: the median wall time of the timed training steps (forward + backward + the CP gradient
  all-reduce + the optimizer step), the slowest rank.
* communication: bytes this rank sends per training step, counted from the collectives actually issued
  (``torch.distributed`` and the ``core.tensor_parallel.mappings`` entry points are wrapped; a collective
  called inside another is counted once). Bytes "sent" follow the usual ring-algorithm convention for a
  group of ``P`` ranks: ``isend``: the tensor; ``all_to_all_single``: ``(P-1)/P`` of the input; all-gather:
  ``(P-1)/P`` of the gathered output; reduce-scatter: ``(P-1)/P`` of the input; all-reduce: ``2 (P-1)/P`` of
  the tensor. ``attn_mb`` is every collective but all-reduce (all the attention traffic); ``allreduce_mb`` is
  the gradient all-reduce over the ``dp_cp`` group plus the loss statistics.

The optimizer is SGD without momentum: it keeps no state, so the first training step (nothing is
allocated for the first time in it but a few small caches) is the one measured for memory and
communication, and the following ``--steps`` are timed; the optimizer plays no part in what CP changes.

Theoretical attention traffic per rank per step, with ``L`` layers, micro batch ``b``, ``s`` tokens, ``n``
query heads, ``g`` K/V heads (``g' = n`` where Ulysses repeats them), head dim ``d``, 4-byte floats and
``B = b (s / CP) g d 4`` the bytes of one rank's K (or V) block:

* ring (``R = CP``): forward ``2 (R-1) B`` (K and V, ``R-1`` hops); backward ``2 (R-1) B`` (K/V again) +
  ``2 R B`` (dK/dV travel ``R`` hops back to their owner): ``L (6R - 4) B`` in all;
* Ulysses (``U = CP``): four all-to-alls in the forward (q, k, v to heads; the output back) and four in the
  backward, each sending ``(U-1)/U`` of its local tensor: ``2 L (U-1)/U b (s/U) (2n + 2g') d 4``;
* hybrid (``U`` x ``R``): the Ulysses formula with ``U`` plus the ring's with ``R`` on the head-sharded
  blocks (``b (s/R) (g'/U) d 4 = B``);
* K/V all-gather: forward all-gathers K and V (``(CP-1)/CP`` of the full ``CP B`` each), backward
  reduce-scatters dK and dV (the same): ``4 L (CP-1) B``.

The gradient all-reduce (theory ``2 (CP-1)/CP`` x the fp32 gradient bytes) is the same for every algorithm.

Where memory does not fall to 1 / CP (full run, 8k tokens): Ulysses and the K/V all-gather attend through
``scaled_dot_product_attention`` with an explicit boolean mask built from the token positions, which the
CPU kernel turns into an fp32 ``[sq, sk]`` mask and saves for the backward: ``s x s`` per layer for Ulysses
(it does not shrink with CP at all), ``s/CP x s`` for the K/V all-gather (which also keeps the gathered
full K/V); CP 1 attends with ``is_causal`` and keeps no mask. The ring keeps ``1/CP`` of the activations,
but its block attention materialises fp32 ``[b, n, s/2CP, s/2CP]`` scores, probabilities and their
gradients in the backward, so its *peak* holds a term quadratic in ``s/CP`` that the flash kernel at CP 1
does not have.

The full run takes about 11 CPU-minutes (14 minutes of wall time on the 2-core reference machine while
other jobs loaded it); ``--seqs 1024,2048,4096`` takes about a quarter of that.

A readable table goes to stderr; one JSON line to stdout.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional

import torch
import torch.distributed as dist

from activation_memory import measure_memory, trainer_argv  # the same probe as the activation-memory bench
from core.launcher import run_distributed

SHAPES = {
    "bench": dict(layers=2, hidden=512, heads=8, ffn=1408, vocab=4096, mbs=1),
    "smoke": dict(layers=2, hidden=64, heads=4, ffn=176, vocab=1000, mbs=1),
}
ALGOS = {"ring": "megatron_cp_algo", "ulysses": "ulysses_cp_algo", "hybrid": "hybrid_cp_algo",
         "kvallgather": "kvallgather_cp_algo"}
FLOAT_BYTES = 4  # fp32 training
MB = 1024 ** 2


@dataclass(frozen=True)
class Run:
    """One training configuration: sequence length, CP algorithm (None at CP 1) and CP size."""

    seq: int
    algo: Optional[str]
    cp: int

    @property
    def key(self) -> str:
        return f"s{self.seq}_{self.algo or 'none'}_cp{self.cp}"

    def ulysses(self) -> int:
        """The Ulysses degree of this run (the whole CP group for Ulysses, 2 for the hybrid, else 1)."""
        return {"ulysses": self.cp, "hybrid": 2}.get(self.algo or "", 1)

    def argv(self, shape: Dict[str, int]) -> List[str]:
        argv = trainer_argv(dict(shape, seq=self.seq), "none") + [
            "--device", "cpu", "--distributed-backend", "gloo", "--log-interval", "1000000",
            "--optimizer", "sgd", "--sgd-momentum", "0"]  # no optimizer state: nothing allocated in the first step
        if self.cp > 1:
            argv += ["--context-parallel-size", str(self.cp), "--context-parallel-algo", ALGOS[self.algo]]
        if self.algo == "hybrid":
            argv += ["--ulysses-degree-in-cp", str(self.ulysses())]
        return argv


# ---------------------------------------------------------------------------------------- counting collectives
def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _group_size(kwargs: Dict[str, object]) -> int:
    return dist.get_world_size(kwargs.get("group"))


def _p2p_bytes(ops, *_, **__) -> int:
    return sum(_nbytes(op.tensor) for op in ops if getattr(op.op, "__name__", "") == "isend")


def _all_to_all_bytes(output, input, output_split_sizes=None, input_split_sizes=None, group=None, **_) -> int:
    size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if input_split_sizes is None:
        return _nbytes(input) * (size - 1) // size
    row = _nbytes(input) // max(input.size(0), 1)
    return (sum(input_split_sizes) - input_split_sizes[rank]) * row


def _all_gather_bytes(output, input, group=None, **_) -> int:
    size = dist.get_world_size(group)
    return _nbytes(output) * (size - 1) // size


def _reduce_scatter_bytes(output, input, op=None, group=None, **_) -> int:
    size = dist.get_world_size(group)
    return _nbytes(input) * (size - 1) // size


def _all_reduce_bytes(tensor, op=None, group=None, **_) -> int:
    size = dist.get_world_size(group)
    return 2 * _nbytes(tensor) * (size - 1) // size


# (module, attribute, kind, bytes this rank sends); mappings binds its all-gather/reduce-scatter at import
def _wrapped_functions() -> List[tuple]:
    from core.tensor_parallel import mappings

    table = [(dist, "batch_isend_irecv", "p2p", _p2p_bytes),
             (dist, "all_to_all_single", "all_to_all", _all_to_all_bytes),
             (mappings, "all_gather_single", "all_gather", _all_gather_bytes),
             (mappings, "reduce_scatter_single", "reduce_scatter", _reduce_scatter_bytes),
             (dist, "all_reduce", "all_reduce", _all_reduce_bytes)]
    for name in ("all_gather_single", "all_gather_into_tensor"):
        table.append((dist, name, "all_gather", _all_gather_bytes))
    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        table.append((dist, name, "reduce_scatter", _reduce_scatter_bytes))
    return table


@contextlib.contextmanager
def counting_collectives() -> Iterator[Dict[str, int]]:
    """Bytes this rank sends, by kind of collective, while the block runs (outermost calls only)."""
    sent: Dict[str, int] = defaultdict(int)
    inside = threading.local()
    originals = []

    def wrap(function: Callable, kind: str, count: Callable[..., int]) -> Callable:
        def counted(*args, **kwargs):
            if getattr(inside, "depth", 0) == 0:
                sent[kind] += count(*args, **kwargs)
            inside.depth = getattr(inside, "depth", 0) + 1
            try:
                return function(*args, **kwargs)
            finally:
                inside.depth -= 1
        return counted

    for module, name, kind, count in _wrapped_functions():
        if hasattr(module, name):
            originals.append((module, name, getattr(module, name)))
            setattr(module, name, wrap(getattr(module, name), kind, count))
    try:
        yield sent
    finally:
        for module, name, function in reversed(originals):
            setattr(module, name, function)


def theoretical_attention_bytes(run: Run, shape: Dict[str, int]) -> int:
    """Bytes one rank sends per step for attention under ``run`` (the formulas of the module docstring)."""
    if run.cp == 1:
        return 0
    layers, b, n, d = shape["layers"], shape["mbs"], shape["heads"], shape["hidden"] // shape["heads"]
    kv_heads = shape.get("kv_heads", n)
    ulysses = run.ulysses()
    if ulysses > 1 and kv_heads % ulysses:
        kv_heads = n  # K/V heads repeated to the query heads before the all-to-all
    local_tokens = b * run.seq // run.cp
    block = local_tokens * kv_heads * d * FLOAT_BYTES  # one rank's K (or V)
    total = 0
    if ulysses > 1:  # q, k, v, out in the forward and their gradients in the backward
        total += 2 * (ulysses - 1) * local_tokens * (2 * n + 2 * kv_heads) * d * FLOAT_BYTES // ulysses
    ring = run.cp // ulysses if run.algo in ("ring", "hybrid") else 1
    if ring > 1:
        total += (6 * ring - 4) * block
    if run.algo == "kvallgather":
        total += 4 * (run.cp - 1) * block
    return layers * total


# ---------------------------------------------------------------------------------------- the runs
def _one_run(argv: List[str], steps: int) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    with counting_collectives() as sent:  # SGD without momentum has no state: the first step can be measured
        memory = measure_memory(trainer, iterator)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.train_step(iterator)
        times.append(time.perf_counter() - start)
    grad_bytes = sum(p.numel() for model in trainer.models for p in model.parameters()) * FLOAT_BYTES
    del trainer, iterator
    gc.collect()
    return dict(memory, step_s=statistics.median(times), sent=dict(sent), grad_bytes=grad_bytes)


def worker(rank: int, world_size: int, jobs: Dict[str, List[str]], steps: int) -> Dict[str, Dict[str, object]]:
    """``run_distributed`` worker: every job of this world size, one after the other."""
    results = {}
    for key, argv in jobs.items():
        start = time.perf_counter()
        results[key] = _one_run(argv, steps)
        if rank == 0:
            print(f"[context_parallel] {key}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return results


def measure(runs: List[Run], shape: Dict[str, int], steps: int) -> Dict[str, Dict[str, object]]:
    """Every run, one launch per CP size; per run the largest rank's figures."""
    results: Dict[str, Dict[str, object]] = {}
    for cp in sorted({run.cp for run in runs}):
        jobs = {run.key: run.argv(shape) for run in runs if run.cp == cp}
        if cp == 1:  # in this process, with one thread as every rank has
            torch.set_num_threads(1)
            per_rank = [worker(0, 1, jobs, steps)]
        else:
            per_rank = run_distributed(cp, worker, jobs, steps, timeout=3600.0)
        for key in jobs:
            ranks = [rank_results[key] for rank_results in per_rank]
            sent = [r["sent"] for r in ranks]
            results[key] = {
                "peak_mb": max(r["peak_mb"] for r in ranks),
                "activation_mb": max(r["activation_mb"] for r in ranks),
                "step_s": max(r["step_s"] for r in ranks),
                "attn_bytes": max(sum(v for k, v in s.items() if k != "all_reduce") for s in sent),
                "allreduce_bytes": max(s.get("all_reduce", 0) for s in sent),
                "sent_by_kind": {k: max(s.get(k, 0) for s in sent) for k in sorted({k for s in sent for k in s})},
                "grad_bytes": ranks[0]["grad_bytes"],
            }
    return results


def table_rows(runs: List[Run], shape: Dict[str, int], results: Dict[str, Dict[str, object]]) -> List[Dict]:
    rows = []
    for run in runs:
        result = results[run.key]
        base = results[Run(run.seq, None, 1).key]
        theory = theoretical_attention_bytes(run, shape)
        grad_theory = 2 * (run.cp - 1) * result["grad_bytes"] // run.cp
        rows.append({
            "seq": run.seq, "algo": run.algo or "-", "cp": run.cp,
            "peak_mb": round(result["peak_mb"], 1), "peak_ratio": round(result["peak_mb"] / base["peak_mb"], 3),
            "activation_mb": round(result["activation_mb"], 1),
            "activation_ratio": round(result["activation_mb"] / base["activation_mb"], 3),
            "activation_ratio_x_cp": round(run.cp * result["activation_mb"] / base["activation_mb"], 3),  # 1 = ideal
            "step_s": round(result["step_s"], 3),
            "attn_mb": round(result["attn_bytes"] / MB, 2), "attn_theory_mb": round(theory / MB, 2),
            "allreduce_mb": round(result["allreduce_bytes"] / MB, 2),
            "grad_allreduce_theory_mb": round(grad_theory / MB, 2),
            "sent_mb_by_kind": {k: round(v / MB, 2) for k, v in result["sent_by_kind"].items()},
        })
    return rows


def print_table(rows: List[Dict]) -> None:
    header = (f"{'seq':>5} {'algo':>11} {'cp':>2} {'peak MB':>8} {'/CP1':>6} {'act MB':>8} {'/CP1':>6} "
              f"{'step s':>7} {'attn MB':>8} {'theory':>8} {'allred MB':>9} {'theory':>8}")
    print(header, file=sys.stderr)
    for r in rows:
        print(f"{r['seq']:>5} {r['algo']:>11} {r['cp']:>2} {r['peak_mb']:>8.1f} {r['peak_ratio']:>6.3f} "
              f"{r['activation_mb']:>8.1f} {r['activation_ratio']:>6.3f} {r['step_s']:>7.2f} {r['attn_mb']:>8.2f} "
              f"{r['attn_theory_mb']:>8.2f} {r['allreduce_mb']:>9.2f} {r['grad_allreduce_theory_mb']:>8.2f}",
              file=sys.stderr)


def plan(seqs: List[int], algos: List[str], cps: List[int]) -> List[Run]:
    """CP 1 once per sequence length, then every algorithm at every CP > 1 it runs at (hybrid: CP 4 and up)."""
    runs = []
    for seq in seqs:
        runs.append(Run(seq, None, 1))
        for cp in (c for c in cps if c > 1):
            runs += [Run(seq, algo, cp) for algo in algos if not (algo == "hybrid" and (cp < 4 or cp % 2))]
    return runs


def _ints(text: str) -> List[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=_ints, default=[1024, 2048, 4096, 8192])
    parser.add_argument("--algos", type=lambda t: t.split(","), default=list(ALGOS))
    parser.add_argument("--cps", type=_ints, default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=1, help="timed steps per run (after the measured one)")
    parser.add_argument("--smoke", action="store_true", help="seq 256, CP 1 and 2, ring and Ulysses: seconds")
    args = parser.parse_args()
    unknown = [algo for algo in args.algos if algo not in ALGOS]
    if unknown:
        parser.error(f"--algos: unknown {unknown}; choose from {list(ALGOS)}")
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: at least one timed step")
    if args.smoke:
        shape, seqs, algos, cps = SHAPES["smoke"], [256], ["ring", "ulysses"], [1, 2]
    else:
        shape, seqs, algos, cps = SHAPES["bench"], args.seqs, args.algos, sorted(set(args.cps) | {1})
    runs = plan(seqs, algos, cps)
    start = time.perf_counter()
    rows = table_rows(runs, shape, measure(runs, shape, args.steps))
    print_table(rows)
    print(json.dumps({
        "bench": "context_parallel",
        "model": "llama L{layers} h{hidden} heads{heads} ffn{ffn} V{vocab} mbs{mbs} fp32".format(**shape),
        "note": ("the bench model scaled to 2 layers and vocab 4096 so 8k tokens at CP 1 fit the time budget; "
                 "SGD without momentum (no optimizer state); one thread per rank, CP 4 = 4 processes on the "
                 "machine's cores (times oversubscribed); "
                 "memory: storages created during one iteration (peak above its start) and what the forward "
                 "keeps for backward, largest rank; bytes: sent per rank per step"),
        "threads_per_rank": 1, "wall_s": round(time.perf_counter() - start, 1), "runs": rows}))


if __name__ == "__main__":
    main()

"""Activation memory and step time of activation recompute, against no recompute in the same run.

    python bench/activation_memory.py [--steps 2] [--rounds 2] [--warmup 1] [--attention-dropout 0.1]
    python bench/activation_memory.py --smoke     # a tiny model, a few seconds

The Llama-shaped bench model of ``bench/train_throughput.py`` (8 layers,
hidden 512, 8 heads, FFN 1408, vocab 32000, seq 512, micro batch 4, fp32,
dropout 0 unless ``--attention-dropout``) is trained by our ``Trainer`` without recompute, with
``--recompute-granularity selective``, with ``--recompute-granularity full
--recompute-method uniform --recompute-num-layers 1`` and with MindSpeed's
``--recompute-activation-function``. For each, one training iteration is
measured for memory:

* ``peak_mb``: the peak of memory allocated during the iteration above what
  was allocated when it started (weights, gradient buffers and optimizer
  states are already there): the device allocator's statistics on a GPU/NPU;
  on the CPU every tensor storage an operator creates is counted until it is
  freed (a ``TorchDispatchMode``; the CPU allocator keeps no statistics, and
  ``tracemalloc`` does not see PyTorch's allocations);
* ``activation_mb``: what the forward leaves allocated for the backward
  (allocated at the end of the model's forward minus at its start);
* ``decoder_activation_mb``: the same for the transformer layers alone, the
  part recompute acts on (the logits and the loss are kept in every mode).

Then the modes' steps are timed in alternating blocks, so drifts in machine
speed hit all of them. Prints one JSON line with, per mode, the figures and
the ratios to no recompute (memory: none / mode; time: mode / none). The
target: full recompute cuts the decoder's activation memory at least 2x at
under 1.45x the step time.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from typing import Callable, Dict, Iterator, List

import torch

from core.memory_probe import MemoryProbe  # shared with the tests

SHAPES = {
    "llama": dict(layers=8, hidden=512, heads=8, ffn=1408, vocab=32000, seq=512, mbs=4),
    "smoke": dict(layers=2, hidden=64, heads=4, ffn=176, vocab=1000, seq=64, mbs=2),
}
MODES = {
    "none": [],
    "selective": ["--recompute-granularity", "selective"],
    "full": ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"],
    "activation_function": ["--recompute-activation-function"],
}
MB = 1024 ** 2


def trainer_argv(shape: Dict[str, int], mode: str, attention_dropout: float = 0.0) -> List[str]:
    argv = ["--num-layers", str(shape["layers"]), "--hidden-size", str(shape["hidden"]),
            "--num-attention-heads", str(shape["heads"]), "--ffn-hidden-size", str(shape["ffn"]),
            "--seq-length", str(shape["seq"]), "--max-position-embeddings", str(shape["seq"]),
            "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
            "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-dropout", str(attention_dropout),
            "--hidden-dropout", "0", "--micro-batch-size", str(shape["mbs"]),
            "--global-batch-size", str(shape["mbs"]), "--train-iters", "1000", "--lr", "1e-4", "--mock-data",
            "--tokenizer-type", "NullTokenizer", "--vocab-size", str(shape["vocab"]),
            "--make-vocab-size-divisible-by", "1", "--eval-iters", "0", "--num-workers", "0"]
    return argv + MODES[mode]


@contextlib.contextmanager
def _kept_by(module: torch.nn.Module, probe: MemoryProbe) -> Iterator[Callable[[], int]]:
    """Bytes still allocated when ``module``'s forward returns, above those at its start (its last call)."""
    marks = {"start": 0, "end": 0}
    handles = [module.register_forward_pre_hook(lambda *_: marks.update(start=probe.allocated())),
               module.register_forward_hook(lambda *_: marks.update(end=probe.allocated()))]
    try:
        yield lambda: marks["end"] - marks["start"]
    finally:
        for handle in handles:
            handle.remove()


def measure_memory(trainer, iterator) -> Dict[str, float]:
    """One training iteration under the probe: peak, forward-kept and decoder-kept megabytes."""
    probe = MemoryProbe()
    model = trainer.models[0]
    with _kept_by(model, probe) as kept_by_model, _kept_by(model.decoder, probe) as kept_by_decoder:
        with probe.measuring():
            trainer.train_step(iterator)
        return {"peak_mb": probe.peak_above_start() / MB, "activation_mb": kept_by_model() / MB,
                "decoder_activation_mb": kept_by_decoder() / MB}


def timed(step: Callable[[], object], count: int) -> List[float]:
    from core.device import accelerator

    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        accelerator().synchronize()
        times.append(time.perf_counter() - start)
    return times


def run(shape: Dict[str, int], steps: int, rounds: int, warmup: int,
        attention_dropout: float = 0.0) -> Dict[str, Dict[str, float]]:
    from mindspeed_llm.training.training import setup

    trainers = {mode: setup(trainer_argv(shape, mode, attention_dropout)) for mode in MODES}
    return compare_modes(trainers, measure_memory, steps, rounds, warmup, shape["mbs"] * shape["seq"])


def compare_modes(trainers: Dict[str, object], measure: Callable[[object, Iterator], Dict[str, float]],
                  steps: int, rounds: int, warmup: int, tokens_per_step: int) -> Dict[str, Dict[str, float]]:
    """Warm every trainer up (so optimizer states exist), take ``measure(trainer, iterator)`` of each, then
    time the modes in interleaved rounds; each result gains ``tokens_per_s`` (of the median step)."""
    iterators = {mode: trainer.train_iterator() for mode, trainer in trainers.items()}
    steps_of = {mode: (lambda t=trainer, it=iterators[mode]: t.train_step(it)) for mode, trainer in trainers.items()}
    for step in steps_of.values():
        timed(step, warmup)
    results = {mode: measure(trainers[mode], iterators[mode]) for mode in trainers}
    times: Dict[str, List[float]] = {mode: [] for mode in trainers}
    for _ in range(rounds):
        for mode, step in steps_of.items():
            times[mode] += timed(step, steps)
    for mode, result in results.items():
        result["tokens_per_s"] = tokens_per_step / statistics.median(times[mode])
    return results


def with_ratios(results: Dict[str, Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    base = results["none"]
    table = {}
    for mode, result in results.items():
        row = {key: round(value, 1) for key, value in result.items()}
        for key in ("peak_mb", "activation_mb", "decoder_activation_mb"):
            row[f"{key.replace('_mb', '')}_reduction"] = round(base[key] / max(result[key], 1e-9), 3)
        row["tokens_per_s_ratio"] = round(result["tokens_per_s"] / base["tokens_per_s"], 3)
        row["step_time_ratio"] = round(base["tokens_per_s"] / result["tokens_per_s"], 3)
        table[mode] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode per block")
    parser.add_argument("--rounds", type=int, default=2, help="alternating blocks")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="a tiny model and one timed step: seconds")
    parser.add_argument("--attention-dropout", type=float, default=0.0,
                        help="Megatron's default is 0.1: the attention kernel then keeps its s x s probabilities, "
                             "which selective recompute drops")
    args = parser.parse_args()
    shape = SHAPES["smoke" if args.smoke else "llama"]
    steps, rounds = (1, 1) if args.smoke else (args.steps, args.rounds)
    from core.device import accelerator

    table = with_ratios(run(shape, steps, rounds, args.warmup, args.attention_dropout))
    full = table["full"]
    result = {"model": "llama L{layers} h{hidden} heads{heads} ffn{ffn} V{vocab} s{seq} mbs{mbs}".format(**shape),
              "attention_dropout": args.attention_dropout,
              "device": accelerator().type, "threads": torch.get_num_threads(), "modes": table,
              "full_meets_target": full["decoder_activation_reduction"] >= 2.0 and full["step_time_ratio"] < 1.45}
    print(json.dumps(result))


if __name__ == "__main__":
    main()

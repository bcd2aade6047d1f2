"""Checkpoint save/load cost: the per-rank ``torch`` format vs ``torch_dist`` (DCP), sync and ``--async-save``.

    python bench/checkpoint.py [--rounds 3] [--workdir DIR] [--reshard-size small|bench]
    python bench/checkpoint.py --smoke     # (or --tiny) a tiny model, one round: seconds

One Llama-shaped model (20 layers, hidden 1024, 16 heads, FFN 2816, vocab
32000, untied embeddings: 322M parameters, printed), fp32 with Adam, trained
one iteration through ``setup()``/``train()`` with ``--mock-data`` so that the
optimizer's moments exist: a checkpoint holds the weights and both moments
(12 bytes per parameter, 3.6 GiB). In this process (one rank, the CPU):

- ``torch`` (``--ckpt-format torch``, the legacy per-rank file): the seconds of
  ``Trainer.save()``, the bytes on disk, the seconds of ``Trainer.load()``;
- ``torch_dist``: the same;
- ``torch_dist`` with ``--async-save``: the seconds ``Trainer.save()`` blocks
  the training step (the host copy of the state and DCP's planning) and the
  seconds until the background write is done (``trainer.async_saves.wait()``).

The three run interleaved for ``--rounds`` rounds; each timing keeps its
fastest round (every round's is in the JSON). Each save goes to its own
directory, written with fsync (both formats), and is removed after its load.
A load reads a checkpoint just written, so mostly from the page cache, alike
for both formats; it fills the same trainer after its weights were zeroed, and
the loaded weights are checked equal to the saved ones (``loaded_equal``).
The resharding row is one 2-process gloo launch (``core.launcher.run_distributed``):
a ``torch_dist`` checkpoint saved at TP2 and loaded at TP1 x DP2, each rank
reading its whole model from the two TP halves. It uses a smaller model
(8 layers, hidden 512: 58M parameters, named in the output) unless
``--reshard-size bench``: a torch_dist load holds about three copies of the
state, so two ranks of the 322M model would need over 30 GiB (the
single-process part peaks near 17 GiB).
Prints a table on stderr and one JSON line on stdout: the machine (threads,
CPU, load average before and after), each row, peak memory, and the ratios
``async_blocked_over_sync_save`` (required below 1/3),
``dist_save_over_legacy_save``, ``dist_load_over_legacy_load`` and
``dist_bytes_over_legacy_bytes``.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List

import torch


@dataclass(frozen=True)
class Shape:
    """The Llama-shaped bench model and its micro-batch."""

    layers: int = 20
    hidden: int = 1024
    heads: int = 16
    ffn: int = 2816
    vocab: int = 32000
    seq: int = 128

    def __str__(self) -> str:
        return f"llama L{self.layers} h{self.hidden} heads{self.heads} ffn{self.ffn} V{self.vocab} s{self.seq}"

    def parameters(self) -> int:
        """Weights of the untied Llama shape: embedding + output layer + per layer (QKVO, gate/up/down, 2 norms)
        + the final norm."""
        per_layer = 4 * self.hidden * self.hidden + 3 * self.hidden * self.ffn + 2 * self.hidden
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden


BENCH = Shape()
SMALL = Shape(layers=8, hidden=512, heads=8, ffn=1408, vocab=32000)
SMOKE = Shape(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seq=16)
SHAPES = {"bench": BENCH, "small": SMALL, "smoke": SMOKE}


def trainer_argv(shape: Shape, extra: List[str]) -> List[str]:
    """One fp32 Adam iteration of ``shape`` on mock data, no saving (the bench calls ``save()`` itself)."""
    return ["--num-layers", str(shape.layers), "--hidden-size", str(shape.hidden),
            "--num-attention-heads", str(shape.heads), "--ffn-hidden-size", str(shape.ffn),
            "--seq-length", str(shape.seq), "--max-position-embeddings", str(shape.seq),
            "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
            "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-dropout", "0",
            "--hidden-dropout", "0", "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-4",
            "--optimizer", "adam", "--mock-data", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", str(shape.vocab), "--make-vocab-size-divisible-by", "1", "--device", "cpu",
            "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1", *extra]


def trained(argv: List[str]):
    """A trainer after one iteration (its Adam moments exist)."""
    from mindspeed_llm.training.training import setup, train

    return train(setup(argv))


def bytes_on_disk(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(directory) for name in names)


def save_as(trainer, directory: str, ckpt_format: str, async_save: bool) -> float:
    """Seconds of ``trainer.save()`` to ``directory`` in ``ckpt_format`` (the flags a run with them would have)."""
    trainer.args.save, trainer.args.ckpt_format, trainer.args.async_save = directory, ckpt_format, async_save
    start = time.perf_counter()
    trainer.save()
    return time.perf_counter() - start


def load_from(trainer, directory: str) -> float:
    """Seconds of ``trainer.load()`` from ``directory`` (``--load``; the format is detected)."""
    trainer.args.load = directory
    start = time.perf_counter()
    trainer.load()
    return time.perf_counter() - start


def zero_weights(trainer) -> None:
    with torch.no_grad():
        for model in trainer.models:
            for param in model.parameters():
                param.zero_()


def fingerprints(trainer) -> Dict[str, str]:
    """A digest of each weight's bytes (a copy of a 300M model would cost the bench another 1.2 GiB)."""
    return {name: hashlib.blake2b(memoryview(tensor.contiguous().numpy()).cast("B")).hexdigest()
            for name, tensor in trainer.dp.named_weights().items()}


def sync_row(trainer, directory: str, ckpt_format: str, reference: Dict[str, str]) -> Dict[str, object]:
    """Save, size, zero the weights, load and check one format; the directory is removed afterwards."""
    save_s = save_as(trainer, directory, ckpt_format, async_save=False)
    size = bytes_on_disk(directory)
    zero_weights(trainer)
    load_s = load_from(trainer, directory)
    equal = fingerprints(trainer) == reference
    shutil.rmtree(directory)
    return {"save_s": round(save_s, 3), "bytes": size, "load_s": round(load_s, 3), "loaded_equal": equal}


def async_row(trainer, directory: str) -> Dict[str, object]:
    """The step's blocked seconds (``save()`` returns after the host copy) and the seconds to the finished write."""
    from core import checkpointing

    start = time.perf_counter()
    blocked_s = save_as(trainer, directory, "torch_dist", async_save=True)
    trainer.async_saves.wait()
    total_s = time.perf_counter() - start
    published = os.path.isfile(os.path.join(directory, checkpointing.TRACKER_FILENAME))
    size = bytes_on_disk(directory)
    shutil.rmtree(directory)
    return {"blocked_s": round(blocked_s, 3), "total_s": round(total_s, 3), "bytes": size, "published": published}


def best(runs: List[Dict[str, object]]) -> Dict[str, object]:
    """The fastest of each timing over the rounds (machine noise only adds time) and every round's under
    ``<timing>_rounds``; the other fields of the last round, ``loaded_equal``/``published`` only when every
    round had them."""
    merged = dict(runs[-1])
    for key in list(merged):
        if key.endswith("_s"):
            merged[key] = min(run[key] for run in runs)
            merged[f"{key}_rounds"] = [run[key] for run in runs]
        elif isinstance(merged[key], bool):
            merged[key] = all(run[key] for run in runs)
    return merged


def single_process(shape: Shape, workdir: str, rounds: int) -> Dict[str, object]:
    """The legacy, torch_dist and async rows on one rank, interleaved over ``rounds`` (the best of each)."""
    trainer = trained(trainer_argv(shape, ["--global-batch-size", "1"]))
    params = sum(p.numel() for model in trainer.models for p in model.parameters())
    reference = fingerprints(trainer)
    runs: Dict[str, List[Dict[str, object]]] = {"torch": [], "torch_dist": [], "torch_dist_async": []}
    for _ in range(rounds):
        runs["torch"].append(sync_row(trainer, os.path.join(workdir, "legacy"), "torch", reference))
        runs["torch_dist"].append(sync_row(trainer, os.path.join(workdir, "dist"), "torch_dist", reference))
        runs["torch_dist_async"].append(async_row(trainer, os.path.join(workdir, "async")))
    return {"parameters": params, "rounds": rounds, **{name: best(row) for name, row in runs.items()},
            "peak_rss_gib": peak_rss_gib()}


def reshard_worker(rank: int, world_size: int, shape: Shape, directory: str) -> Dict[str, float]:
    """``run_distributed`` worker: save a torch_dist checkpoint at TP2, load it at TP1 x DP2."""
    import torch.distributed as dist

    from mindspeed_llm.training.training import setup

    with contextlib.redirect_stdout(sys.stderr):  # the trainer's log lines; stdout carries the JSON alone
        saver = trained(trainer_argv(shape, ["--global-batch-size", "2", "--tensor-model-parallel-size", "2"]))
        save_s = save_as(saver, directory, "torch_dist", async_save=False)
        del saver
        gc.collect()
        loader = setup(trainer_argv(shape, ["--global-batch-size", "2"]))  # TP1 x DP2, as setup(--load) builds it
        dist.barrier()
        load_s = load_from(loader, directory)
        dist.barrier()
        loaded_iteration = loader.iteration
    return {"save_tp2_s": save_s, "load_tp1_dp2_s": load_s, "loaded_iteration": loaded_iteration,
            "peak_rss_gib": peak_rss_gib()}


def resharding(shape: Shape, workdir: str) -> Dict[str, object]:
    from core.launcher import run_distributed

    directory = os.path.join(workdir, "reshard")
    ranks = run_distributed(2, reshard_worker, shape, directory, timeout=1800.0)
    size = bytes_on_disk(directory)
    shutil.rmtree(directory)
    return {"model": str(shape), "parameters": shape.parameters(), "bytes": size,
            "save_tp2_s": round(max(r["save_tp2_s"] for r in ranks), 3),
            "load_tp1_dp2_s": round(max(r["load_tp1_dp2_s"] for r in ranks), 3),  # the slower rank
            "loaded_iteration": ranks[0]["loaded_iteration"],
            "peak_rss_gib_per_rank": max(r["peak_rss_gib"] for r in ranks)}


def peak_rss_gib() -> float:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss``, a spawned rank does not inherit
    its parent's)."""
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return round(kib / 1024 ** 2, 2)


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / max(denominator, 1e-9), 3)


def table_line(label: str, save_s: object = "", size: object = "", load_s: object = "") -> str:
    cells = [f"{value:.2f}" if isinstance(value, float) else str(value) for value in (save_s, size, load_s)]
    return f"{label:<38}" + "".join(f"{cell:>10}" for cell in cells)


def mib(row: Dict[str, object]) -> float:
    return round(row["bytes"] / 1024 ** 2, 1)


def table(result: Dict[str, object]) -> str:
    """The rows for a person (stderr): seconds and MiB on disk."""
    legacy, dist_row, asyn, reshard = (result["torch"], result["torch_dist"], result["torch_dist_async"],
                                       result["resharding"])
    other_model = "" if reshard["model"] == result["model"] else f"  ({reshard['model']})"
    lines = [f"{result['model']}: {result['parameters']:,} parameters, fp32 + Adam, best of {result['rounds']}",
             table_line("format", "save s", "MiB", "load s"),
             table_line("torch (legacy)", legacy["save_s"], mib(legacy), legacy["load_s"]),
             table_line("torch_dist", dist_row["save_s"], mib(dist_row), dist_row["load_s"]),
             table_line("torch_dist async: step blocked", asyn["blocked_s"], mib(asyn)),
             table_line("torch_dist async: write done", asyn["total_s"]),
             table_line("torch_dist TP2 -> TP1xDP2 (2 ranks)", reshard["save_tp2_s"], mib(reshard),
                        reshard["load_tp1_dp2_s"]) + other_model]
    lines += [f"{name}: {value}" for name, value in result["ratios"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", "--tiny", action="store_true", help="a tiny model: seconds")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of the single-process rows (each keeps its fastest)")
    parser.add_argument("--workdir", default=None, help="where the checkpoints are written (a temporary "
                                                        "directory inside it; default: the system's)")
    parser.add_argument("--reshard-size", choices=["bench", "small"], default="small",
                        help="the model of the 2-rank resharding row (small: each rank of a 2-rank run of the "
                             "bench model peaks near the single run's memory)")
    args = parser.parse_args()
    shape = SMOKE if args.smoke else BENCH
    reshard_shape = SMOKE if args.smoke else SHAPES[args.reshard_size]
    result: Dict[str, object] = {
        "bench": "checkpoint", "model": str(shape), "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="bench_checkpoint_", dir=args.workdir) as workdir:
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's log lines; stdout carries the JSON alone
            result.update(single_process(shape, workdir, 1 if args.smoke else args.rounds))
            gc.collect()
            result["resharding"] = resharding(reshard_shape, workdir)
    legacy, dist_row, asyn = result["torch"], result["torch_dist"], result["torch_dist_async"]
    result["ratios"] = {"async_blocked_over_sync_save": ratio(asyn["blocked_s"], dist_row["save_s"]),
                        "dist_save_over_legacy_save": ratio(dist_row["save_s"], legacy["save_s"]),
                        "dist_load_over_legacy_load": ratio(dist_row["load_s"], legacy["load_s"]),
                        "dist_bytes_over_legacy_bytes": ratio(dist_row["bytes"], legacy["bytes"])}
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(table(result), file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Preprocessing throughput: tools/preprocess_data.py at 1 and 2 workers vs a naive loop, same run.

Usage::

    python bench/preprocess.py [--documents 100000] [--workers 2]
    python bench/preprocess.py --smoke     # 300 documents, a small vocabulary, one repeat: seconds

Generates a corpus of short JSONL documents and a byte-level BPE tokenizer
(tools/train_tokenizer.py) in a temporary directory, then times, on the same
corpus and tokenizer (the tokenizer load is not timed):

- ``naive``: one process, ``json.loads`` + ``tokenize`` one document at a time,
  ids appended to a ``.bin`` with NumPy ``tofile``;
- ``workers_1`` / ``workers_N``: ``preprocess_data.run`` (``--append-eod``,
  writes ``.bin/.idx``).

The three are run ``--repeats`` times, interleaved, and each keeps its fastest
run, so that load from other processes on a shared machine skews them alike;
CPU seconds (the workers' included) and tokens per CPU second are reported too,
as they depend little on that load.
Prints one JSON line: documents/s and tokens/s of each, and the ratios to the
naive loop and of N workers to 1. Nothing is written outside the temporary dir.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import sys
import tempfile
import time
from typing import Callable, Dict, Tuple

import numpy as np

from mindspeed_llm.tokenizer import PretrainedFromHF
from tools import preprocess_data, train_tokenizer

WORDS = ("the of and to in is was for on with as by at from that this which model data token train "
         "parallel tensor pipeline sequence expert layer attention gradient optimizer loss batch "
         "checkpoint memory device network language learning rate schedule warmup decay").split()


def write_corpus(path: str, documents: int, seed: int = 0) -> None:
    """``documents`` JSONL records of 5-40 words, with some punctuation and digits."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(documents):
            words = rng.choices(WORDS, k=rng.randint(5, 40))
            text = " ".join(words).capitalize() + f". Step {rng.randint(0, 99999)}!"
            handle.write(json.dumps({"id": i, "text": text}) + "\n")


def _cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], Tuple[int, int, float]]) -> Dict[str, float]:
    cpu = _cpu_seconds()
    documents, tokens, seconds = fn()
    rates = _rates(documents, tokens, seconds)
    rates["cpu_seconds"] = round(_cpu_seconds() - cpu, 3)
    rates["tokens_per_cpu_s"] = round(tokens / rates["cpu_seconds"], 1)
    return rates


def naive(corpus: str, tokenizer: PretrainedFromHF, out_path: str) -> Tuple[int, int, float]:
    start = time.perf_counter()
    documents = tokens = 0
    with open(corpus, encoding="utf-8") as src, open(out_path, "wb") as out:
        for line in src:
            ids = tokenizer.tokenize(json.loads(line)["text"]) + [tokenizer.eod]
            np.asarray(ids, dtype=np.uint16).tofile(out)
            documents += 1
            tokens += len(ids)
    return documents, tokens, time.perf_counter() - start


def pipeline(corpus: str, tok_dir: str, prefix: str, workers: int) -> Tuple[int, int, float]:
    args = preprocess_data.build_parser().parse_args([
        "--input", corpus, "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", tok_dir,
        "--output-prefix", prefix, "--append-eod", "--workers", str(workers), "--log-interval", "1000000000"])
    summary = preprocess_data.run(args)
    return summary.documents, summary.tokens, summary.seconds


def _rates(documents: int, tokens: int, seconds: float) -> Dict[str, float]:
    return {"documents": documents, "tokens": tokens, "seconds": round(seconds, 3),
            "documents_per_s": round(documents / seconds, 1), "tokens_per_s": round(tokens / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="300 documents, vocabulary 300, one repeat")
    args = parser.parse_args()
    if args.smoke:
        args.documents, args.vocab_size, args.repeats = 300, 300, 1
    with tempfile.TemporaryDirectory() as tmp:
        corpus, tok_dir = os.path.join(tmp, "corpus.jsonl"), os.path.join(tmp, "tok")
        write_corpus(corpus, args.documents)
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON line alone
            train_tokenizer.main(["--input", corpus, "--vocab-size", str(args.vocab_size), "--output-dir", tok_dir])
        tokenizer = PretrainedFromHF(tok_dir)
        runs = {"naive": lambda: naive(corpus, tokenizer, os.path.join(tmp, "naive.bin")),
                "workers_1": lambda: pipeline(corpus, tok_dir, os.path.join(tmp, "w1"), 1),
                f"workers_{args.workers}": lambda: pipeline(corpus, tok_dir, os.path.join(tmp, "wn"), args.workers)}
        results: Dict[str, Dict[str, float]] = {}
        for _ in range(args.repeats):
            for name, fn in runs.items():
                rates = timed(fn)
                if name not in results or rates["seconds"] < results[name]["seconds"]:
                    results[name] = rates
    base = results["naive"]["tokens_per_s"]
    assert len({r["tokens"] for r in results.values()}) == 1, "the three runs disagree on the token count"
    line = {"bench": "preprocess", "cpus": os.cpu_count(), **results,
            "ratio_workers_1_vs_naive": round(results["workers_1"]["tokens_per_s"] / base, 3),
            f"ratio_workers_{args.workers}_vs_naive":
                round(results[f"workers_{args.workers}"]["tokens_per_s"] / base, 3),
            f"ratio_workers_{args.workers}_vs_1":
                round(results[f"workers_{args.workers}"]["tokens_per_s"] / results["workers_1"]["tokens_per_s"], 3)}
    print(json.dumps(line))


if __name__ == "__main__":
    main()

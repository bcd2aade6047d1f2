"""Preprocessing throughput: tools/preprocess_data.py at 1 and 2 workers vs a naive loop, same run.

Usage::

    python bench/preprocess.py [--documents 100000] [--workers 2]

Generates a corpus of short JSONL documents and a byte-level BPE tokenizer
(tools/train_tokenizer.py) in a temporary directory, then times, on the same
corpus and tokenizer (the tokenizer load is not timed):

- ``naive``: one process, ``json.loads`` + ``tokenize`` one document at a time,
  ids appended to a ``.bin`` with NumPy ``tofile``;
- ``workers_1`` / ``workers_N``: ``preprocess_data.run`` (``--append-eod``,
  writes ``.bin/.idx``).

Prints one JSON line: documents/s and tokens/s of each, and the ratios to the
naive loop and of N workers to 1. Nothing is written outside the temporary dir.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from typing import Dict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mindspeed_llm.tokenizer import PretrainedFromHF  # noqa: E402
from tools import preprocess_data, train_tokenizer  # noqa: E402

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


def naive(corpus: str, tokenizer: PretrainedFromHF, out_path: str) -> Dict[str, float]:
    start = time.perf_counter()
    documents = tokens = 0
    with open(corpus, encoding="utf-8") as src, open(out_path, "wb") as out:
        for line in src:
            ids = tokenizer.tokenize(json.loads(line)["text"]) + [tokenizer.eod]
            np.asarray(ids, dtype=np.uint16).tofile(out)
            documents += 1
            tokens += len(ids)
    return _rates(documents, tokens, time.perf_counter() - start)


def pipeline(corpus: str, tok_dir: str, prefix: str, workers: int) -> Dict[str, float]:
    args = preprocess_data.build_parser().parse_args([
        "--input", corpus, "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", tok_dir,
        "--output-prefix", prefix, "--append-eod", "--workers", str(workers), "--log-interval", "1000000000"])
    summary = preprocess_data.run(args)
    return _rates(summary.documents, summary.tokens, summary.seconds)


def _rates(documents: int, tokens: int, seconds: float) -> Dict[str, float]:
    return {"documents": documents, "tokens": tokens, "seconds": round(seconds, 3),
            "documents_per_s": round(documents / seconds, 1), "tokens_per_s": round(tokens / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=4000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus, tok_dir = os.path.join(tmp, "corpus.jsonl"), os.path.join(tmp, "tok")
        write_corpus(corpus, args.documents)
        train_tokenizer.main(["--input", corpus, "--vocab-size", str(args.vocab_size), "--output-dir", tok_dir])
        results = {"naive": naive(corpus, PretrainedFromHF(tok_dir), os.path.join(tmp, "naive.bin"))}
        results["workers_1"] = pipeline(corpus, tok_dir, os.path.join(tmp, "w1"), 1)
        results[f"workers_{args.workers}"] = pipeline(corpus, tok_dir, os.path.join(tmp, "wn"), args.workers)
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

"""Preprocessing throughput: tools/preprocess_data.py at 1 and 2 workers vs a naive loop and the tokenizer's ceiling.

Usage::

    python bench/preprocess.py [--documents 100000] [--workers 2]
    python bench/preprocess.py --smoke     # 300 documents, a small vocabulary, one repeat: seconds

Generates a corpus of short JSONL documents and a byte-level BPE tokenizer
(tools/train_tokenizer.py) in a temporary directory, then times, on the same
corpus and tokenizer (the tokenizer load is not timed):

- ``naive``: one process, ``json.loads`` + ``tokenize`` one document at a time,
  ids appended to a ``.bin`` with NumPy ``tofile``;
- ``workers_1`` / ``workers_N``: ``preprocess_data.run`` (``--append-eod``,
  writes ``.bin/.idx``);
- ``ceiling_1`` / ``ceiling_N``: the tokenizer's own ceiling, the fast (Rust)
  backend's ``encode_batch`` over the same texts, already read and decoded,
  with 1 and N Rayon threads, in a fresh process each (Rayon sizes its pool
  once); only the ``encode_batch`` call is timed, and its tokens are counted
  as the pipeline counts them (plus EOD, and BOS where the tokenizer adds it);
- ``ceiling_fast_1`` / ``ceiling_fast_N``: the same texts through the calls
  the pipeline makes: ``encode_batch_fast`` (no character offsets: the same
  ids for about a third less CPU) over chunks of ``preprocess_data``'s chunk
  size (cache-friendlier than one call over every text), by 1 and N threads
  each encoding on itself (``TOKENIZERS_PARALLELISM=false``); timed: the calls
  and the freeing of their results, no reading, decoding or writing. The
  pipeline beats ``ceiling_*`` (one ``encode_batch`` over every text), so
  ``fraction_of_ceiling_fast_workers_{1,N}`` is the stricter figure.

The runs are done ``--repeats`` times, interleaved, and each keeps its fastest
run, so that load from other processes on a shared machine skews them alike;
CPU seconds (the workers' included) and tokens per CPU second are reported too,
as they depend little on that load.
Prints one JSON line: documents/s and tokens/s of each, the ratios to the
naive loop and of N workers to 1, and ``fraction_of_ceiling_workers_{1,N}``
and ``fraction_of_ceiling_fast_workers_{1,N}``: the pipeline's tokens/s over
each ceiling's at the same number of threads.
Nothing is written outside the temporary dir.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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


def ceiling(corpus: str, tok_dir: str, threads: int) -> Dict[str, Dict[str, float]]:
    """The tokenizer's ceiling with ``threads`` Rayon threads, measured in a fresh process (module docstring)."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--ceiling-of", corpus, tok_dir], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the ceiling run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_ceiling(corpus: str, tok_dir: str) -> Dict[str, Dict[str, float]]:
    """In this process: ``ceiling`` and ``ceiling_fast`` (module docstring) over the corpus's texts, with
    ``RAYON_NUM_THREADS`` threads; the tokenizer's calls timed alone."""
    tokenizer = PretrainedFromHF(tok_dir)
    backend = tokenizer.tokenizer.backend_tokenizer  # the Rust tokenizer that preprocess_data's workers call
    threads = int(os.environ["RAYON_NUM_THREADS"])
    with open(corpus, encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    extra = (1 + int(tokenizer.add_bos)) * len(texts)  # the EOD of --append-eod, and BOS where the handler adds it
    cpu, start = time.process_time(), time.perf_counter()  # process_time: every thread of this process
    encodings = backend.encode_batch(texts, add_special_tokens=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    results = {"ceiling": _ceiling_rates(len(texts), sum(len(e) for e in encodings) + extra, seconds, cpu)}
    del encodings
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    chunk = preprocess_data.CHUNK_RECORDS
    batches = [texts[i:i + chunk] for i in range(0, len(texts), chunk)]
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # each call encodes on the thread that makes it
    with ThreadPoolExecutor(threads) as pool:
        cpu, start = time.process_time(), time.perf_counter()
        tokens = sum(pool.map(lambda batch: sum(map(len, encode(batch, add_special_tokens=False))), batches))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    results["ceiling_fast"] = _ceiling_rates(len(texts), tokens + extra, seconds, cpu)
    return results


def _ceiling_rates(documents: int, tokens: int, seconds: float, cpu: float) -> Dict[str, float]:
    rates = _rates(documents, tokens, seconds)
    rates.update(cpu_seconds=round(cpu, 3), tokens_per_cpu_s=round(tokens / max(cpu, 1e-9), 1))
    return rates


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
    parser.add_argument("--ceiling-of", nargs=2, metavar=("CORPUS", "TOKENIZER_DIR"),
                        help="internal: measure the tokenizer's ceiling in this process and print it")
    args = parser.parse_args()
    if args.ceiling_of:
        print(json.dumps(measure_ceiling(*args.ceiling_of)))
        return
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
            measured = [(name, timed(fn)) for name, fn in runs.items()]
            for threads in sorted({1, args.workers}):  # CPU seconds of the encode calls alone
                measured += [(f"{name}_{threads}", rates)
                             for name, rates in ceiling(corpus, tok_dir, threads).items()]
            for name, rates in measured:
                if name not in results or rates["seconds"] < results[name]["seconds"]:
                    results[name] = rates
    base = results["naive"]["tokens_per_s"]
    assert len({r["tokens"] for r in results.values()}) == 1, "the runs disagree on the token count"
    line = {"bench": "preprocess", "cpus": os.cpu_count(), **results,
            "ratio_workers_1_vs_naive": round(results["workers_1"]["tokens_per_s"] / base, 3),
            f"ratio_workers_{args.workers}_vs_naive":
                round(results[f"workers_{args.workers}"]["tokens_per_s"] / base, 3),
            f"ratio_workers_{args.workers}_vs_1":
                round(results[f"workers_{args.workers}"]["tokens_per_s"] / results["workers_1"]["tokens_per_s"], 3),
            **{f"fraction_of_{ceiling}_workers_{n}":
               round(results[f"workers_{n}"]["tokens_per_s"] / results[f"{ceiling}_{n}"]["tokens_per_s"], 3)
               for ceiling in ("ceiling", "ceiling_fast") for n in sorted({1, args.workers})}}
    print(json.dumps(line))


if __name__ == "__main__":
    main()

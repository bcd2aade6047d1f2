"""Benchmark: building the GPT sample index for 10 million samples, C++ helper vs NumPy reference.

    python bench/build_sample_idx.py [--num-samples 10000000] [--seq-length 1024] [--num-docs 1000000]
    python bench/build_sample_idx.py --smoke     # 20000 samples of 128 tokens: under a second

Documents have random lengths in [1, 2 * seq_length); the document index repeats shuffled
epochs until it holds enough tokens. Both builders run on the same input in the same process
and must agree. Prints one JSON line: both times in seconds and ``speedup`` (reference / C++).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from core.datasets import helpers


def make_input(num_samples: int, seq_length: int, num_docs: int, seed: int):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 2 * seq_length, num_docs).astype(np.int32)  # [docs]
    tokens_per_epoch = int(sizes.sum(dtype=np.int64))
    num_epochs = -(-(num_samples * seq_length + 1) // tokens_per_epoch)
    document_index = np.concatenate([rng.permutation(num_docs).astype(np.int32) for _ in range(num_epochs)])
    return sizes, document_index, num_epochs, tokens_per_epoch


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=10_000_000)
    parser.add_argument("--seq-length", type=int, default=1024)
    parser.add_argument("--num-docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="20000 samples of 128 tokens from 2000 documents")
    args = parser.parse_args()
    if args.smoke:
        args.num_samples, args.seq_length, args.num_docs = 20_000, 128, 2_000
    sizes, document_index, num_epochs, tokens_per_epoch = make_input(args.num_samples, args.seq_length,
                                                                     args.num_docs, args.seed)
    call = (sizes, document_index, args.seq_length, num_epochs, tokens_per_epoch)
    helpers.build_sample_idx(sizes[:2], np.array([0, 1], np.int32), 1, 1, int(sizes[:2].sum()))  # load the extension
    fast, cpp_s = timed(helpers.build_sample_idx, *call)
    slow, numpy_s = timed(helpers.build_sample_idx_reference, *call)
    if not np.array_equal(fast, slow):
        raise SystemExit("C++ and NumPy sample indices differ")
    print(json.dumps({"bench": "build_sample_idx", "samples_built": int(fast.shape[0] - 1),
                      "seq_length": args.seq_length, "document_index_entries": int(len(document_index)),
                      "epochs": num_epochs, "cpp_s": round(cpp_s, 4), "numpy_reference_s": round(numpy_s, 4),
                      "speedup": round(numpy_s / cpp_s, 2)}))


if __name__ == "__main__":
    main()

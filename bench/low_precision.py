"""Low-precision training against bf16 in the same run: the loss gap and the step time of each FP8 and FP4 recipe.

    python bench/low_precision.py [--iters 200] [--recipes tensorwise,blockwise,mxfp8,hif8]
    python bench/low_precision.py --smoke      # 10 iterations on mock data: seconds

The quick-start model (examples/quickstart.sh: 2 layers, hidden 128, GQA, SwiGLU, seq 128) trains ``--iters``
iterations on the quick-start corpus (``outputs/quickstart/data``; run the quick start once to make it, else the
bench trains on mock data and says so), one process, bf16 weights, the same seed and batches, once in bf16, once
per FP8 recipe (``--fp8-format``/``--fp8-recipe``) and once per FP4 recipe (``--fp4-format e2m1 --fp4-recipe``).
Each row (stderr) gives the mean of the last 50 iterations' losses, its gap to bf16's in percent, and the median
step time as a ratio to bf16's; stdout gets one JSON line with the same rows. On the CPU the FP8 and FP4 GEMMs are
emulated (quantise, dequantise, fp32 product), so they are slower there: the time ratio that matters is a GPU's.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "outputs", "quickstart", "data", "stdlib_text_document")
TOKENIZER = os.path.join(ROOT, "outputs", "quickstart", "tokenizer")
MODEL = ["--num-layers", "2", "--hidden-size", "128", "--ffn-hidden-size", "352", "--num-attention-heads", "4",
         "--group-query-attention", "--num-query-groups", "2", "--seq-length", "128", "--max-position-embeddings",
         "128", "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
         "--untie-embeddings-and-output-weights", "--attention-dropout", "0", "--hidden-dropout", "0",
         "--make-vocab-size-divisible-by", "1"]
RECIPES: Dict[str, List[str]] = {
    "bf16": [],
    "delayed": ["--fp8-format", "hybrid", "--fp8-recipe", "delayed", "--fp8-amax-history-len", "16",
                "--fp8-amax-compute-algo", "max"],
    "tensorwise": ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    "rowwise": ["--fp8-format", "e4m3", "--fp8-recipe", "rowwise"],
    "blockwise": ["--fp8-format", "e4m3", "--fp8-recipe", "blockwise"],
    "mxfp8": ["--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"],
    "hif8": ["--fp8-format", "hif8", "--fp8-recipe", "tensorwise"],
    "nvfp4": ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
    "mxfp4": ["--fp4-format", "e2m1", "--fp4-recipe", "mxfp4"],
}
LOSS = re.compile(r"iteration\s+(\d+)/.*?elapsed time per iteration \(ms\): ([0-9.]+).*?\| lm loss: ([0-9.E+-]+) \|")


def data_args(iters: int, smoke: bool) -> Tuple[List[str], str]:
    """The corpus flags (the quick start's data when present) and what the run trains on."""
    if not smoke and os.path.exists(DATA + ".bin"):
        return (["--data-path", DATA, "--split", "100,0,0", "--tokenizer-type", "PretrainedFromHF",
                 "--tokenizer-name-or-path", TOKENIZER], "the quick-start corpus")
    return ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "4000"], "mock data"


def train(recipe: List[str], iters: int, data: List[str]) -> Tuple[List[float], List[float]]:
    """Per-iteration losses and step times (ms) of one run."""
    argv = [sys.executable, os.path.join(ROOT, "pretrain_gpt.py"), *MODEL, *data, "--micro-batch-size", "8",
            "--global-batch-size", "16", "--train-iters", str(iters), "--lr", "1.5e-3", "--min-lr", "1.5e-4",
            "--lr-warmup-iters", str(max(iters // 15, 1)), "--lr-decay-style", "cosine", "--weight-decay", "0.01",
            "--clip-grad", "1.0", "--seed", "1234", "--device", "cpu", "--bf16", "--log-interval", "1",
            "--eval-iters", "0", *recipe]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench/low_precision.py: {' '.join(recipe) or 'bf16'} failed:\n{done.stderr[-2000:]}")
    rows = [(float(ms), float(loss)) for _, ms, loss in LOSS.findall(done.stdout)]
    return [loss for _, loss in rows], [ms for ms, _ in rows]


def compare(runs: Dict[str, List[str]], iters: int, data: List[str]) -> Dict[str, Dict[str, float]]:
    """Train each of ``runs`` (name -> extra flags; the first is the baseline) and give each its row: the mean
    loss of the last 50 iterations, its gap to the baseline's in percent, the median step time and its ratio to
    the baseline's (also printed, one line each, on stderr)."""
    tail = min(50, iters)
    rows: Dict[str, Dict[str, float]] = {}
    base_name = next(iter(runs))
    for name, flags in runs.items():
        losses, times = train(flags, iters, data)
        loss, step = statistics.mean(losses[-tail:]), statistics.median(times[1:] or times)
        base = rows.get(base_name, {"loss": loss, "step_ms": step})
        rows[name] = {"loss": round(loss, 4), "gap_percent": round(100 * (loss - base["loss"]) / base["loss"], 3),
                      "step_ms": round(step, 1), f"time_vs_{base_name}": round(step / base["step_ms"], 3)}
        print(f"{name:<14} loss {loss:.4f}  gap {rows[name]['gap_percent']:+6.2f}%  step {step:7.1f} ms  "
              f"x{rows[name][f'time_vs_{base_name}']:.2f}", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--recipes", default=",".join(name for name in RECIPES if name != "bf16"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    iters = 10 if args.smoke else args.iters
    data, what = data_args(iters, args.smoke)
    print(f"quick-start model, {iters} iterations on {what}, one process, bf16 weights; loss = mean of the last "
          f"{min(50, iters)} iterations; FP8 and FP4 GEMMs emulated on the CPU", file=sys.stderr)
    rows = compare({name: RECIPES[name] for name in ["bf16"] + args.recipes.split(",")}, iters, data)
    print(json.dumps({"iters": iters, "data": what, "gemm": "emulated", "rows": rows}))


if __name__ == "__main__":
    main()

"""Muon against AdamW in the same run: the loss after ``--iters`` iterations and the step time.

    python bench/muon.py [--iters 200]
    python bench/muon.py --smoke      # 10 iterations on mock data: seconds

The quick-start model and corpus of ``bench/low_precision.py`` (its ``train``: one process, bf16 weights, the same
seed, batches and learning-rate schedule), once with AdamW (the baseline) and once per Muon row:

* ``muon_matched``: ``--muon-scale-mode spectral --muon-extra-scale-factor 0.2``, Moonlight's rule that matches
  AdamW's update RMS, so AdamW's learning rate and weight decay are used as they are;
* ``muon_nesterov``: the same with ``--muon-use-nesterov`` and momentum 0.95 (Keller Jordan's setting).

Each row (stderr) gives the mean of the last 50 iterations' losses, its gap to AdamW's in percent, and the median
step time as a ratio to AdamW's (Newton-Schulz runs five pairs of matrix products per weight matrix each step);
stdout gets one JSON line with the same rows.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from low_precision import compare, data_args  # noqa: E402  (the same model, corpus and schedule)

ROWS: Dict[str, List[str]] = {
    "adamw": [],
    "muon_matched": ["--optimizer", "muon", "--muon-scale-mode", "spectral", "--muon-extra-scale-factor", "0.2"],
    "muon_nesterov": ["--optimizer", "muon", "--muon-scale-mode", "spectral", "--muon-extra-scale-factor", "0.2",
                      "--muon-use-nesterov", "--muon-momentum", "0.95"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    iters = 10 if args.smoke else args.iters
    data, what = data_args(iters, args.smoke)
    print(f"quick-start model, {iters} iterations on {what}, one process, bf16 weights; loss = mean of the last "
          f"{min(50, iters)} iterations", file=sys.stderr)
    print(json.dumps({"iters": iters, "data": what, "rows": compare(ROWS, iters, data)}))


if __name__ == "__main__":
    main()

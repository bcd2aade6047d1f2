"""The metrics of examples/posttrain.sh, read from Megatron's iteration lines (``| name: value |``).

    grep "iteration" sft.log | python examples/posttrain_metrics.py --columns sft
        one row per logged iteration: the stage's objective (``lm loss``) and its own metrics
    python examples/posttrain_metrics.py --summary sft.log dpo.log orm.log
        first -> last of each metric; exits non-zero unless each stage learned: SFT's loss fell, DPO's
        reward accuracy and margin rose, the reward model's accuracy rose (or started and stayed at 1),
        GRPO's mean reward rose (examples/grpo.sh)
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, Iterable, List

# the columns shown per stage (the log file's name without .log)
STAGE_METRICS = {"sft": ("lm loss",),
                 "dpo": ("lm loss", "rewards/accuracies", "rewards/margins", "logps/chosen", "logps/rejected"),
                 "orm": ("lm loss", "accuracy", "rewards/margins"),
                 "grpo": ("reward mean", "reward std", "kl", "clip fraction", "response length")}
FIELD = re.compile(r"\| ?([A-Za-z/ ]+?): ([-+0-9.Ee]+|nan) ")
ITERATION = re.compile(r"iteration +(\d+)/")


def parse(lines: Iterable[str]) -> List[Dict[str, float]]:
    """Each iteration line -> {"iteration": n, metric name: value}."""
    rows = []
    for line in lines:
        found = ITERATION.search(line)
        if found:
            row = {name.strip(): float(value) for name, value in FIELD.findall(line + " ")}
            rows.append({"iteration": float(found.group(1)), **row})
    return rows


def columns(stage: str, rows: List[Dict[str, float]]) -> None:
    names = STAGE_METRICS[stage]
    print("    " + "".join(f"{name:>20}" for name in ("iteration",) + names))
    for row in rows:
        values = "".join(f"{row.get(name, float('nan')):>20.4f}" for name in names)
        print(f"    {int(row['iteration']):>20}{values}")


def learned(stage: str, first: Dict[str, float], last: Dict[str, float]) -> List[str]:
    """What did not move the way training should move it (a metric missing from the log did not move)."""
    def moved(name: str, better: str) -> bool:
        before, after = first.get(name, float("nan")), last.get(name, float("nan"))
        # a rising share may also start and stay at 1
        return after < before if better == "falls" else after > before or (better == "rises to 1" and after == 1.0)

    checks = {"sft": [("lm loss", "falls")],
              "dpo": [("rewards/accuracies", "rises to 1"), ("rewards/margins", "rises")],
              "orm": [("accuracy", "rises to 1")],
              "grpo": [("reward mean", "rises to 1")]}
    return [f"{stage}: {name} did not improve ({first.get(name, float('nan')):.4f} -> "
            f"{last.get(name, float('nan')):.4f})" for name, better in checks[stage] if not moved(name, better)]


def summary(logs: List[str]) -> int:
    failures = []
    print("== summary (first -> last logged iteration)")
    for log in logs:
        stage = os.path.basename(log).removesuffix(".log")
        with open(log, encoding="utf-8") as f:
            rows = parse(f)
        if len(rows) < 2:
            failures.append(f"{stage}: fewer than 2 iteration lines in {log}")
            continue
        first, last = rows[0], rows[-1]
        missing = [name for name in STAGE_METRICS[stage] if name not in first or name not in last]
        moves = ", ".join(f"{name} {first[name]:.4f} -> {last[name]:.4f}" for name in STAGE_METRICS[stage]
                          if name not in missing)
        print(f"   {stage}: {moves}")
        failures += learned(stage, first, last)
    for failure in failures:
        print(f"walk-through FAILED: {failure}")
    return 1 if failures else 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--columns", choices=sorted(STAGE_METRICS), help="stage whose iteration lines come on stdin")
    mode.add_argument("--summary", nargs="+", metavar="LOG", help="the stages' logs, named <stage>.log")
    args = parser.parse_args(argv)
    if args.columns:
        columns(args.columns, parse(sys.stdin))
        return 0
    return summary(args.summary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Pipeline bubble of 1F1B, interleaved 1F1B and zero-bubble (ZB-H1), from the schedule tables.

    python bench/pipeline_bubble.py [--pp 4] [--microbatches 8] [--vpp 2]

Each table (core/pipeline_parallel/schedules.py) is run through the event
simulator (core/pipeline_parallel/simulate.py) with a fixed cost per model
chunk: forward F = 1, backward B = 2 for a whole stage (so F = 1/v, B = 2/v
for an interleaved chunk of 1/v of the stage's layers); zero-bubble splits the
backward into B = 1 (input gradient) and W = 1 (weight gradient).
Communication is free. The timeline is deterministic.

Prints one JSON line: per schedule the makespan, each rank's idle fraction and
peak in-flight micro-batches, next to the theoretical bubble
``(p-1)/(m+p-1)`` of 1F1B, ``(p-1)/(v m+p-1)`` of interleaved 1F1B and
``(p-1)/(3m+p-1)`` of ZB-H1 (bubble (p-1)(F+B-W) over 3m units of work), and
each schedule's makespan as a ratio of 1F1B's (the baseline of the same run).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.pipeline_parallel.schedules import interleaved_one_f_one_b, one_f_one_b, zero_bubble  # noqa: E402
from core.pipeline_parallel.simulate import simulate  # noqa: E402


def _figures(timeline, theory: float) -> Dict[str, object]:
    return {"makespan": round(timeline.makespan, 4),
            "idle_fraction": [round(x, 4) for x in timeline.idle_fraction],
            "theoretical_bubble": round(theory, 4),
            "peak_in_flight": timeline.peak_in_flight}


def run(pp: int, m: int, vpp: int) -> Dict[str, object]:
    plain = simulate(one_f_one_b(pp, m), {"F": 1.0, "B": 2.0})
    interleaved = simulate(interleaved_one_f_one_b(pp, vpp, m), {"F": 1.0 / vpp, "B": 2.0 / vpp})
    zb = simulate(zero_bubble(pp, m), {"F": 1.0, "B": 1.0, "W": 1.0})
    result: Dict[str, object] = {
        "bench": "pipeline_bubble", "pp": pp, "microbatches": m, "vpp": vpp, "costs": "F=1 B=2 (ZB: B=1 W=1)",
        "1f1b": _figures(plain, (pp - 1) / (m + pp - 1)),
        "interleaved": _figures(interleaved, (pp - 1) / (vpp * m + pp - 1)),
        "zero_bubble": _figures(zb, (pp - 1) / (3 * m + pp - 1)),
    }
    for name in ("interleaved", "zero_bubble"):
        result[name]["makespan_vs_1f1b"] = round(result[name]["makespan"] / plain.makespan, 4)
    return result


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--vpp", type=int, default=2)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.pp, args.microbatches, args.vpp)))


if __name__ == "__main__":
    main()

"""Per-subject and overall accuracy (the overall one over every question), printed and written as JSON."""
from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Any, Dict, List, Sequence, Tuple


def accuracy_report(task: str, judged: Sequence[Tuple[str, bool]]) -> Dict[str, Any]:
    """``{"task", "subjects": {name: {"total", "correct", "accuracy"}}, "overall": {...}}``."""
    subjects: "OrderedDict[str, List[bool]]" = OrderedDict()
    for subject, correct in judged:
        subjects.setdefault(subject, []).append(bool(correct))

    def entry(values: List[bool]) -> Dict[str, Any]:
        return {"total": len(values), "correct": sum(values), "accuracy": sum(values) / len(values) if values else 0.0}

    metric = "pass@1" if task == "human_eval" else "accuracy"
    return {"task": task, "metric": metric, "subjects": {name: entry(v) for name, v in subjects.items()},
            "overall": entry([c for _, c in judged])}


def format_report(report: Dict[str, Any]) -> str:
    """A table: subject, questions, accuracy; the overall line last."""
    rows = [(name, e["total"], e["accuracy"]) for name, e in report["subjects"].items()]
    rows.append(("total", report["overall"]["total"], report["overall"]["accuracy"]))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'subject':<{width}}  {'questions':>9}  {report['metric']:>8}"]
    lines += [f"{name:<{width}}  {total:>9d}  {acc:>8.4f}" for name, total, acc in rows]
    return "\n".join(lines)


def write_report(report: Dict[str, Any], path: str) -> None:
    """JSON at ``path`` (its directory created), written to a temporary name and renamed."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2, ensure_ascii=False)
    os.replace(temporary, path)

"""Readers of each benchmark's published file layout, into plain records.

``--task-data-path`` names the directory MindSpeed-LLM users point at (or files in it):

- MMLU (Hendrycks' ``data.tar``): ``test/{subject}_test.csv`` and few-shot ``dev/{subject}_dev.csv``, no header,
  rows ``question,A,B,C,D,answer``; the path is ``data/test`` (``data`` also works).
- CMMLU: ``test/{subject}.csv`` and ``dev/{subject}.csv`` with the header ``,Question,A,B,C,D,Answer``.
- C-Eval: ``val/{subject}_val.csv`` and ``dev/{subject}_dev.csv`` with ``id,question,A,B,C,D,answer[,explanation]``.
- GSM8K: ``test.jsonl`` (and optionally ``train.jsonl`` for few-shot), ``question`` and ``answer`` ending ``#### N``.
- BoolQ: ``*.jsonl`` (``dev.jsonl``) with ``question``, ``passage`` and ``answer`` (or SuperGLUE's ``label``).
- BBH: ``bbh/{task}.json`` = ``{"examples": [{"input", "target"}]}``; optionally ``cot-prompts/{task}.txt``
  beside ``bbh/`` (the repository's root works as the path too).
- AGIEval: ``{task}.jsonl`` with ``passage``, ``question``, ``options`` and ``label`` (or ``answer`` for cloze).
- HellaSwag: ``*.jsonl`` (``hellaswag_val.jsonl``) with ``ctx``, ``endings`` and ``label``.
- HumanEval: ``HumanEval.jsonl`` (or ``*.jsonl``) with ``task_id``, ``prompt``, ``test`` and ``entry_point``.

Every reader returns ``{subject: [record, ...]}`` in file-name order; a directory without the expected file
raises :class:`EvaluationError` naming the file expected.
"""
from __future__ import annotations

import csv
import glob
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from mindspeed_llm.evaluation.errors import EvaluationError

Record = Dict[str, Any]
Subjects = Dict[str, List[Record]]
LETTERS = "ABCDEFGHIJ"


def _matching(paths: Sequence[str], suffix: str, task: str, expected: str) -> List[str]:
    """Files ending ``suffix`` among ``paths`` (directories are listed); none: an error naming ``expected``."""
    found: List[str] = []
    for path in paths:
        if os.path.isdir(path):
            found += sorted(glob.glob(os.path.join(path, "*" + suffix)))
        elif os.path.isfile(path) and path.endswith(suffix):
            found.append(path)
        elif not os.path.exists(path):
            raise EvaluationError(f"{task}: --task-data-path {path} does not exist; expected {expected}")
    if not found:
        raise EvaluationError(f"{task}: no {expected} in --task-data-path {' '.join(paths)}")
    return found


def _subdir_if_present(paths: Sequence[str], name: str) -> List[str]:
    """``path/name`` for each directory that has it (the archive's root given instead of its split)."""
    return [os.path.join(p, name) if os.path.isdir(os.path.join(p, name)) else p for p in paths]


def _read_jsonl(path: str) -> List[Record]:
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    raise EvaluationError(f"{path} line {number}: not a JSON object") from None
    return records


def _require(record: Record, keys: Sequence[str], path: str) -> Record:
    missing = [k for k in keys if k not in record]
    if missing:
        raise EvaluationError(f"{path}: a record lacks {', '.join(missing)} (fields: {', '.join(sorted(record))})")
    return record


def _choice_row(row: Sequence[str], path: str) -> Record:
    """``question, A, B, C, D, answer`` -> a record."""
    if len(row) < 6 or row[5].strip() not in LETTERS[:4]:
        raise EvaluationError(f"{path}: expected rows question,A,B,C,D,answer (answer a letter A-D), got {row[:6]}")
    return {"question": row[0], "choices": list(row[1:5]), "answer": row[5].strip()}


def read_choice_csv(path: str, header: bool) -> List[Record]:
    """A multiple-choice CSV: positional without ``header`` (MMLU); by column name with one (CMMLU, C-Eval)."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    if not header:
        return [_choice_row(row, path) for row in rows if row]
    names = [name.strip().lower() for name in rows[0]] if rows else []
    wanted = ["question", "a", "b", "c", "d", "answer"]
    if any(name not in names for name in wanted):
        raise EvaluationError(f"{path}: the header needs Question,A,B,C,D,Answer columns, got {rows[:1]}")
    index = [names.index(name) for name in wanted]
    return [_choice_row([row[i] for i in index], path) for row in rows[1:] if row]


def _few_shot_file(test_path: str, test_suffix: str, dev_suffix: str, dev_dir: str = "dev") -> Optional[str]:
    """The dev split beside a test file: ``../dev/{subject}{dev_suffix}`` or ``{subject}{dev_suffix}`` next to it."""
    folder, name = os.path.split(test_path)
    subject = name[: -len(test_suffix)]
    for candidate in (os.path.join(os.path.dirname(folder), dev_dir, subject + dev_suffix),
                      os.path.join(folder, subject + dev_suffix)):
        if os.path.isfile(candidate) and os.path.abspath(candidate) != os.path.abspath(test_path):
            return candidate
    return None


def _choice_benchmark(paths: Sequence[str], task: str, split: str, suffix: str, dev_suffix: str,
                      header: bool, expected: str) -> Dict[str, Dict[str, List[Record]]]:
    """``{subject: {"test": rows, "dev": rows}}`` of a per-subject CSV benchmark."""
    out: Dict[str, Dict[str, List[Record]]] = {}
    for path in _matching(_subdir_if_present(paths, split), suffix, task, expected):
        subject = os.path.basename(path)[: -len(suffix)]
        dev = _few_shot_file(path, suffix, dev_suffix)
        out[subject] = {"test": read_choice_csv(path, header), "dev": read_choice_csv(dev, header) if dev else []}
    return out


def read_mmlu(paths: Sequence[str]) -> Dict[str, Dict[str, List[Record]]]:
    return _choice_benchmark(paths, "mmlu", "test", "_test.csv", "_dev.csv", False,
                             "{subject}_test.csv (MMLU's data/test layout)")


def read_cmmlu(paths: Sequence[str]) -> Dict[str, Dict[str, List[Record]]]:
    return _choice_benchmark(paths, "cmmlu", "test", ".csv", ".csv", True,
                             "{subject}.csv (CMMLU's test/ layout)")


def read_ceval(paths: Sequence[str]) -> Dict[str, Dict[str, List[Record]]]:
    return _choice_benchmark(paths, "ceval", "val", "_val.csv", "_dev.csv", True,
                             "{subject}_val.csv (C-Eval's val/ layout)")


def read_gsm8k(paths: Sequence[str]) -> Dict[str, List[Record]]:
    """``{"gsm8k": test records, "train": few-shot records (may be empty)}``."""
    tests = [p for p in _matching(paths, ".jsonl", "gsm8k", "test.jsonl (GSM8K's layout)")
             if os.path.basename(p) != "train.jsonl"]
    if not tests:
        raise EvaluationError(f"gsm8k: no test.jsonl in --task-data-path {' '.join(paths)}")
    records = [_require(r, ("question", "answer"), p) for p in tests for r in _read_jsonl(p)]
    train = [os.path.join(os.path.dirname(tests[0]), "train.jsonl")]
    shots = _read_jsonl(train[0]) if os.path.isfile(train[0]) else []
    return {"gsm8k": records, "train": shots}


def read_boolq(paths: Sequence[str]) -> Subjects:
    out: Subjects = {}
    for path in _matching(paths, ".jsonl", "boolq", "dev.jsonl (BoolQ's layout)"):
        records = []
        for record in _read_jsonl(path):
            _require(record, ("question", "passage"), path)
            answer = record.get("answer", record.get("label"))
            if not isinstance(answer, (bool, int)):
                raise EvaluationError(f"{path}: a record lacks a boolean answer (or label)")
            records.append({**record, "answer": bool(answer)})
        out[os.path.basename(path)[:-len(".jsonl")]] = records
    return out


def read_bbh(paths: Sequence[str]) -> Subjects:
    """``{task: examples}``; each example carries ``cot_prompt`` (``cot-prompts/{task}.txt``, or "")."""
    out: Subjects = {}
    for path in _matching(_subdir_if_present(paths, "bbh"), ".json", "bbh", "{task}.json (BBH's bbh/ layout)"):
        with open(path, encoding="utf-8") as handle:
            try:
                examples = json.load(handle)["examples"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise EvaluationError(f"{path}: expected {{\"examples\": [{{\"input\", \"target\"}}]}}") from None
        task = os.path.basename(path)[:-len(".json")]
        cot = _bbh_cot_prompt(os.path.dirname(path), task)
        out[task] = [{**_require(e, ("input", "target"), path), "cot_prompt": cot} for e in examples]
    return out


def _bbh_cot_prompt(folder: str, task: str) -> str:
    """BBH's published chain-of-thought exemplars (``cot-prompts/{task}.txt``; its header up to ``-----`` cut)."""
    for candidate in (os.path.join(folder, "cot-prompts", task + ".txt"),
                      os.path.join(os.path.dirname(folder), "cot-prompts", task + ".txt")):
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                text = handle.read()
            return text.split("-----", 1)[1].strip() if "-----" in text else text.strip()
    return ""


def read_agieval(paths: Sequence[str]) -> Subjects:
    out: Subjects = {}
    for path in _matching(paths, ".jsonl", "agieval", "{task}.jsonl (AGIEval's data/v1 layout)"):
        records = [_require(r, ("question",), path) for r in _read_jsonl(path)]
        for record in records:
            if not record.get("label") and not record.get("answer"):
                raise EvaluationError(f"{path}: a record has neither label nor answer")
        out[os.path.basename(path)[:-len(".jsonl")]] = records
    return out


def read_hellaswag(paths: Sequence[str]) -> Subjects:
    out: Subjects = {}
    for path in _matching(paths, ".jsonl", "hellaswag", "hellaswag_val.jsonl (HellaSwag's data/ layout)"):
        records = [_require(r, ("ctx", "endings", "label"), path) for r in _read_jsonl(path)]
        out[os.path.basename(path)[:-len(".jsonl")]] = [{**r, "label": int(r["label"])} for r in records]
    return out


def read_human_eval(paths: Sequence[str]) -> Subjects:
    out: Subjects = {}
    for path in _matching(paths, ".jsonl", "human_eval", "HumanEval.jsonl (HumanEval's data/ layout)"):
        out[os.path.basename(path)[:-len(".jsonl")]] = [
            _require(r, ("task_id", "prompt", "test", "entry_point"), path) for r in _read_jsonl(path)]
    return out

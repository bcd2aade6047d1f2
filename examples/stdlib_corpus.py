"""Build a small real-text corpus from the docstrings of the installed Python standard library.

    python examples/stdlib_corpus.py --output corpus.jsonl [--max-documents 20000]

Nothing is downloaded and nothing is imported: each ``*.py`` file of the
standard library is parsed with ``ast`` and the docstrings of its module,
classes and functions become documents (``{"text": ...}`` per line), in a
fixed order, so the corpus is the same on every run with the same Python.
"""
from __future__ import annotations

import argparse
import ast
import json
import sysconfig
from pathlib import Path
from typing import Iterator

MIN_CHARACTERS = 80


def docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text and len(text) >= MIN_CHARACTERS:
                yield text


def stdlib_files() -> Iterator[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        parts = set(path.relative_to(root).parts)
        if not parts & {"site-packages", "test", "tests", "idlelib", "lib2to3"}:
            yield path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--max-documents", type=int, default=20000)
    args = parser.parse_args()
    count = characters = 0
    with open(args.output, "w", encoding="utf-8") as out:
        for path in stdlib_files():
            for text in docstrings(path):
                out.write(json.dumps({"text": text}) + "\n")
                count += 1
                characters += len(text)
                if count >= args.max_documents:
                    break
            if count >= args.max_documents:
                break
    print(f"wrote {count} documents ({characters / 1e6:.1f} M characters) to {args.output}")


if __name__ == "__main__":
    main()

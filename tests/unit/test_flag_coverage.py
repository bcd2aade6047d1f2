"""Every flag a parser accepts either acts or is refused (DESIGN.md, principle 13).

The test walks the actions of the training parser and of the tools' parsers.
A flag passes when the source reads its attribute outside validation code
(``args.<dest>``, ``getattr(args, "<dest>"...)`` or a ``# consumes: --flag``
marker where the read takes another form), or when it is listed in the one
table of refused flags, ``mindspeed_llm.arguments.REFUSED_FLAGS``. A flag of the
config table (``core/transformer/config.py``) is set by one generic args -> config
step, so it passes when its config field is read (``config.<field>``,
``cfg.<field>``, ``self.<field>``). Reads inside
validation (functions named ``check*``/``validate*``, with or without a leading
underscore, and the refusal tables themselves) do not count: checking a flag is
not using it. Self-checks prove the scan can fail.
"""
from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Set

import pytest

from mindspeed_llm import arguments
from mindspeed_llm.arguments import (DEPENDENT_FLAGS, REFUSED_FLAGS, ArgumentError, config_flag_dest, parse_args,
                                     table_flag_fields, validate_args)
from mindspeed_llm.convert import arguments as convert_arguments
from tools import preprocess_data

REPO = Path(__file__).resolve().parents[2]
VALIDATION_NAME = re.compile(r"^_?(check|validate)")
TABLE_NAMES = {"REFUSED_FLAGS", "DEPENDENT_FLAGS"}
# parser -> where its flags may be read (the tools have their own parsers; the training parser
# serves the top-level entries and the packages)
PARSERS: Dict[str, Callable[[], argparse.ArgumentParser]] = {
    "training": arguments.all_flags_parser,  # every entry's flags (mindspeed_llm/entry_flags.py)
    "preprocess_data": preprocess_data.build_parser,
    "convert_ckpt": convert_arguments.build_parser,
}
ROOTS: Dict[str, Sequence[str]] = {
    "training": ("core", "mindspeed_llm", "*.py"),
    "preprocess_data": ("core", "mindspeed_llm", "tools/preprocess_data.py"),
    "convert_ckpt": ("core", "mindspeed_llm", "tools/convert_ckpt.py"),
}
BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "8", "--seq-length", "32",
        "--micro-batch-size", "2", "--train-iters", "100", "--lr", "1e-3"]


def _validation_lines(tree: ast.Module) -> Set[int]:
    """Line numbers of validation functions and of the refusal tables."""
    lines: Set[int] = set()
    for node in ast.walk(tree):
        named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and VALIDATION_NAME.match(node.name)
        table = isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(t, ast.Name) and t.id in TABLE_NAMES
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
        if named or table:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def consuming_source(text: str) -> str:
    """The source without its validation code (those lines blanked)."""
    skip = _validation_lines(ast.parse(text))
    return "\n".join("" if number in skip else line for number, line in enumerate(text.splitlines(), 1))


def _files(roots: Iterable[str]) -> List[Path]:
    found: List[Path] = []
    for root in roots:
        path = REPO / root
        found += sorted(path.rglob("*.py")) if path.is_dir() else sorted(REPO.glob(root))
    return found


READ = re.compile(r"\bargs\.(\w+)|getattr\(\s*[\w.]*args\s*,\s*[\"'](\w+)[\"']|#\s*consumes:\s*--([\w-]+)")


def consumed(sources: Iterable[str]) -> Set[str]:
    """The dests the sources read (a ``# consumes: --flag`` marker counts as a read of ``flag``)."""
    names: Set[str] = set()
    for text in sources:
        for match in READ.finditer(text):
            names.add((match.group(1) or match.group(2) or match.group(3)).replace("-", "_"))
    return names


FIELD_READ = re.compile(r"(?=\b(?:\w*config|\w*cfg|self)\.(\w+))")  # a lookahead: self.config.x counts x


def table_flags_read(sources: Iterable[str]) -> Set[str]:
    """The dests of the config table's flags whose field the sources read."""
    attributes = {match.group(1) for text in sources for match in FIELD_READ.finditer(text)}
    return {config_flag_dest(f) for f in table_flag_fields() if f.name in attributes}


def unconsumed(parser: argparse.ArgumentParser, read: Set[str], refused: Set[str]) -> List[str]:
    """The flags of ``parser`` that nothing reads and no table refuses."""
    def is_read(action: argparse.Action) -> bool:
        marked = {flag.lstrip("-").replace("-", "_") for flag in action.option_strings}
        return action.dest in read or bool(marked & read)
    return [action.option_strings[0] for action in parser._actions
            if action.dest not in (argparse.SUPPRESS, "help") and action.dest not in refused
            and not is_read(action)]


def _sources(name: str) -> List[str]:
    return [consuming_source(path.read_text(encoding="utf-8")) for path in _files(ROOTS[name])]


@pytest.fixture(scope="module")
def reads() -> Dict[str, Set[str]]:
    sources = {name: _sources(name) for name in PARSERS}
    return {name: consumed(texts) | table_flags_read(texts) for name, texts in sources.items()}


@pytest.mark.parametrize("name", list(PARSERS))
def test_every_flag_is_consumed_or_refused(name: str, reads: Dict[str, Set[str]]) -> None:
    refused = {refusal.dest for refusal in REFUSED_FLAGS} if name == "training" else set()
    missing = unconsumed(PARSERS[name](), reads[name], refused)
    assert not missing, (f"{name}: flags accepted but never read: {missing}; wire them, or add them to "
                         "REFUSED_FLAGS in mindspeed_llm/arguments.py with the issue that will add them")


# ----------------------------------------------------------------------------- the scan can fail

def test_an_unread_flag_is_reported(reads: Dict[str, Set[str]]) -> None:
    parser = arguments.all_flags_parser()
    parser.add_argument("--flag-nobody-reads", type=int, default=0)
    assert unconsumed(parser, reads["training"], set())[-1:] == ["--flag-nobody-reads"]
    assert unconsumed(parser, reads["training"], {"flag_nobody_reads"}) == unconsumed(
        arguments.all_flags_parser(), reads["training"], set())


def test_validation_reads_do_not_count() -> None:
    text = ("def _check_sizes(args):\n    return args.checked_only\n\n"
            "def validate_more(args):\n    return getattr(args, 'validated_only', 0)\n\n"
            "REFUSED_FLAGS = (lambda args: args.refused_only,)\n\n"
            "def build(args):\n    return args.used + known.marked  # consumes: --marked\n")
    parser = argparse.ArgumentParser()
    for flag in ("--checked-only", "--validated-only", "--refused-only", "--used", "--marked"):
        parser.add_argument(flag)
    assert unconsumed(parser, consumed([consuming_source(text)]), set()) == [
        "--checked-only", "--validated-only", "--refused-only"]


def test_a_config_field_nobody_reads_is_reported() -> None:
    """A table flag counts only through its field's readers (validation excluded)."""
    text = ("def _validate_sizes(self):\n    return self.qk_layernorm\n\n"
            "def forward(config):\n    return config.post_norm\n")
    read = table_flags_read([consuming_source(text)])
    assert "post_norm" in read and "qk_layernorm" not in read


# ----------------------------------------------------------------------------- the tables are enforced

@pytest.mark.parametrize("refusal", REFUSED_FLAGS, ids=lambda refusal: refusal.dest)
def test_refused_flags_are_refused_from_the_command_line_and_yaml(refusal, tmp_path: Path) -> None:
    assert refusal.dest in {action.dest for action in arguments.all_flags_parser()._actions}
    assert "issue" in refusal.message and "\n" not in refusal.message
    validate_args(parse_args(BASE), 1)  # control: the base run is valid
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + list(refusal.example)), 8)
    assert str(info.value) == refusal.message
    flag, value = refusal.example
    config = tmp_path / "cfg.yaml"
    config.write_text(f"{flag.lstrip('-')}: {value}\n")
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + ["--yaml-cfg", str(config)]), 8)
    assert str(info.value) == refusal.message


def _example_value(action: argparse.Action) -> List[str]:
    """A value for ``action`` other than its default (none for a switch)."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [next(str(choice) for choice in action.choices if choice != action.default)]
    return {int: ["3"], float: ["0.5"]}.get(action.type, ["somewhere"])


# the flags that leave BASE's context for one where the flag has no effect (BASE is Adam with a linear decay)
INACTIVE_CONTEXT: Dict[str, List[str]] = {
    **{dest: ["--optimizer", "sgd"] for dest in ("adam_beta1", "adam_beta2", "adam_eps")},
    "min_lr": ["--lr-decay-style", "constant"],
}


@pytest.mark.parametrize("dest, needs", [(dest, needs) for dest, _, needs in DEPENDENT_FLAGS])
def test_flags_without_what_makes_them_act_are_refused(dest: str, needs: str) -> None:
    action = {a.dest: a for a in arguments.all_flags_parser()._actions}[dest]
    flag = action.option_strings[0]
    context = INACTIVE_CONTEXT.get(dest, [])
    validate_args(parse_args(BASE + context), 1)  # control: the context alone is valid
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + context + [flag] + _example_value(action)), 1)
    assert str(info.value) == f"{flag} has no effect without {needs}; add {needs} or drop {flag}"

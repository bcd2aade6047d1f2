"""Flag groups shared by the training entries and the tools, declared once.

``pretrain_gpt.py`` (through :mod:`mindspeed_llm.arguments`),
``tools/preprocess_data.py`` and ``tools/convert_ckpt.py`` add the same
tokenizer and pipeline-layout flags with these functions, so the names, the
types and the choices cannot drift apart. A tool may pick its own defaults
(``preprocess_data.py`` defaults to ``--tokenizer-type PretrainedFromHF``)
through the functions' parameters.

:class:`FlagParser` is an ``ArgumentParser`` that raises a one-line exception
of the caller's class (``ArgumentError``, ``PreprocessError``,
``ConversionError``) instead of printing the usage and exiting, so every
entry reports bad flags the same way as its other input errors. Given ``flag_owners`` (a function from an
option string to the entries that have it, see :mod:`mindspeed_llm.entry_flags`), its "unrecognized
arguments" line names the entry of each foreign flag: ``error: unrecognized arguments: --temperature 0.7
(--temperature is a flag of inference.py, evaluation.py, posttrain.py --stage grpo)``.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Type

TOKENIZER_TYPES = ("NullTokenizer", "PretrainedFromHF", "SentencePieceTokenizer", "GPT2BPETokenizer")
# what each tokenizer reads: (dest, flag, what it is)
TOKENIZER_INPUTS = {
    "PretrainedFromHF": (("tokenizer_name_or_path", "--tokenizer-name-or-path", "a Hugging Face tokenizer directory"),),
    "SentencePieceTokenizer": (("tokenizer_model", "--tokenizer-model", "the .model file"),),
    "GPT2BPETokenizer": (("vocab_file", "--vocab-file", "GPT-2's vocab.json"),
                         ("merge_file", "--merge-file", "GPT-2's merges.txt")),
}


class ArgumentError(ValueError):
    """A flag or a combination of flags is invalid; the message is one line naming the flags."""


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that raises ``error_class(message)`` instead of printing usage and exiting."""

    def __init__(self, *args, error_class: Type[Exception] = ArgumentError,
                 flag_owners: Optional[Callable[[str], Optional[str]]] = None, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.error_class = error_class
        self.flag_owners = flag_owners

    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse writes "argument --x: <the type's message>"; ours already start with "--x "
        message = re.sub(r"^argument (\S+): (?=\1 )", "", message)
        if message.startswith(UNRECOGNIZED) and self.flag_owners is not None:
            hints = foreign_flag_hints(message[len(UNRECOGNIZED):].split(), self.flag_owners)
            message += f" ({'; '.join(hints)})" if hints else ""
        raise self.error_class(message)


UNRECOGNIZED = "unrecognized arguments: "  # argparse's words for what no flag of the parser takes


def foreign_flag_hints(tokens: Sequence[str], flag_owners: Callable[[str], Optional[str]]) -> List[str]:
    """``--x is a flag of <entries>`` (``--x, --y are flags of <entries>``) for the options in ``tokens`` that
    other entries have, one hint per set of entries."""
    by_owners: Dict[str, List[str]] = {}
    for option in dict.fromkeys(token.split("=", 1)[0] for token in tokens if token.startswith("--")):
        owners = flag_owners(option)
        if owners:
            by_owners.setdefault(owners, []).append(option)
    return [f"{options[0]} is a flag of {owners}" if len(options) == 1 else
            f"{', '.join(options)} are flags of {owners}" for owners, options in by_owners.items()]


class IntList:
    """argparse type of a comma-separated list of integers: ``"3,5"`` -> ``(3, 5)``, ``""`` -> ``()``."""

    __name__ = "comma-separated list of integers"  # argparse and the YAML reader name the type with it

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def __call__(self, text: str) -> Tuple[int, ...]:
        items = [item.strip() for item in str(text).split(",") if item.strip()]
        try:
            return tuple(int(item) for item in items)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{self.flag} {text!r} is not a comma-separated list of integers; "
                                             "write e.g. 3,5") from None


def add_tokenizer_args(parser: argparse.ArgumentParser, default_type: Optional[str] = None) -> None:
    """``--tokenizer-type`` and the files each tokenizer reads (see mindspeed_llm/tokenizer)."""
    group = parser.add_argument_group("tokenizer")
    group.add_argument("--tokenizer-type", choices=TOKENIZER_TYPES, default=default_type)
    group.add_argument("--tokenizer-name-or-path", type=str, default=None,
                       help="PretrainedFromHF: a Hugging Face tokenizer directory (or a name in the local cache)")
    group.add_argument("--tokenizer-model", type=str, default=None, help="SentencePieceTokenizer: the .model file")
    group.add_argument("--vocab-file", type=str, default=None, help="GPT2BPETokenizer: vocab.json")
    group.add_argument("--merge-file", type=str, default=None, help="GPT2BPETokenizer: merges.txt")
    group.add_argument("--vocab-size", type=int, default=None,
                       help="NullTokenizer's vocabulary (ids 0..N-1, N-1 is end-of-document); in training, the "
                            "model's vocabulary before padding (default: the tokenizer's)")
    group.add_argument("--trust-remote-code", action="store_true",
                       help="PretrainedFromHF: allow the tokenizer's own Python code (transformers' option)")


def add_pipeline_layout_args(parser: argparse.ArgumentParser, title: str = "pipeline layout") -> None:
    """How layers are placed over pipeline stages and virtual chunks (core/pipeline_parallel/layout.py)."""
    group = parser.add_argument_group(title)
    group.add_argument("--num-layer-list", type=IntList("--num-layer-list"), default=None,
                       help="layers per pipeline stage, e.g. 3,5,5,3 (one per stage, summing to --num-layers "
                            "with the noop layers)")
    group.add_argument("--num-layers-per-virtual-pipeline-stage", type=int, default=None,
                       help="layers per virtual chunk (the interleaved pipeline schedule)")
    group.add_argument("--virtual-pipeline-model-parallel-size", type=int, default=None,
                       help="model chunks per pipeline stage (alternative to --num-layers-per-virtual-pipeline-stage)")
    group.add_argument("--noop-layers", type=IntList("--noop-layers"), default=None,
                       help="global numbers of parameterless identity layers, e.g. 0,7 ('' for none)")


def tokenizer_error(args: argparse.Namespace) -> Optional[str]:
    """The one-line problem with the tokenizer flags, or None: a missing input of the chosen
    tokenizer, or a file that does not exist."""
    if args.tokenizer_type == "NullTokenizer" and args.vocab_size is None:
        return "--tokenizer-type NullTokenizer needs --vocab-size"
    for dest, flag, what in TOKENIZER_INPUTS.get(args.tokenizer_type or "", ()):
        value = getattr(args, dest)
        if not value:
            return f"--tokenizer-type {args.tokenizer_type} needs {flag} ({what})"
        if dest != "tokenizer_name_or_path" and not os.path.isfile(value):
            return f"{flag} {value}: no such file; fix the path"
    return None

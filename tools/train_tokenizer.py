"""Train a small byte-level BPE tokenizer and save it for ``AutoTokenizer.from_pretrained``.

Usage::

    python tools/train_tokenizer.py --input corpus/ 'more/*.jsonl' --vocab-size 8000 \
        --output-dir my_tokenizer [--json-keys text] [--min-frequency 2]

Inputs are files, directories (searched recursively) or globs of ``.txt``
(each line is text) and ``.jsonl`` (the ``--json-keys`` fields of each record,
plus ShareGPT ``conversations`` values when present); ``.gz`` versions too.
The output directory holds ``tokenizer.json``, ``tokenizer_config.json`` (with
a ChatML-style chat template) and ``special_tokens_map.json``. Special tokens:
``<|endoftext|>`` (EOS and BOS), ``<|pad|>`` (pad), ``<|im_start|>`` and
``<|im_end|>`` (chat turns). Errors print one ``error: ...`` line, exit 2.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import sys
from typing import IO, Iterator, List, Sequence

EOS, PAD, IM_START, IM_END = "<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [EOS, PAD, IM_START, IM_END]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SUFFIXES = (".txt", ".jsonl", ".txt.gz", ".jsonl.gz")


class TokenizerTrainingError(Exception):
    pass


def expand_inputs(patterns: Sequence[str]) -> List[str]:
    """Files named by ``patterns`` (files, directories, globs), sorted within each pattern."""
    files: List[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            found = sorted(os.path.join(root, name) for root, _, names in os.walk(pattern)
                           for name in names if name.endswith(SUFFIXES))
        elif os.path.isfile(pattern):
            found = [pattern]
        else:
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not found:
            raise TokenizerTrainingError(f"--input {pattern}: no such file, or no .txt/.jsonl files there")
        files.extend(found)
    return files


def _open_text(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def iter_texts(files: Sequence[str], json_keys: Sequence[str]) -> Iterator[str]:
    """Every training text of ``files``: lines of .txt, the named fields of .jsonl records."""
    for path in files:
        is_jsonl = path.endswith((".jsonl", ".jsonl.gz"))
        with _open_text(path) as handle:
            for line_no, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                if not is_jsonl:
                    yield line.rstrip("\n")
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TokenizerTrainingError(f"{path}:{line_no}: malformed JSON ({exc.msg})") from exc
                yield from _record_texts(record, json_keys)


def _non_empty(texts: Iterator[str], files: Sequence[str], json_keys: Sequence[str]) -> Iterator[str]:
    """``texts`` unchanged, or an error naming the inputs when they hold no text at all (a tokenizer of the
    256 bytes alone would be trained silently)."""
    first = next(texts, None)
    if first is None:
        raise TokenizerTrainingError(f"no text in {', '.join(files)} (blank lines only, or .jsonl records "
                                     f"without a string in --json-keys {' '.join(json_keys)}); check the input")
    yield first
    yield from texts


def _record_texts(record: dict, json_keys: Sequence[str]) -> Iterator[str]:
    for key in json_keys:
        if isinstance(record.get(key), str):
            yield record[key]
    for turn in record.get("conversations", []) or []:
        if isinstance(turn, dict) and isinstance(turn.get("value"), str):
            yield turn["value"]


def train_bpe(texts: Iterator[str], vocab_size: int, min_frequency: int = 2):
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``texts``, special tokens first."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def save_for_transformers(tokenizer, output_dir: str, model_max_length: int = 1 << 20) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json to ``output_dir``."""
    from transformers import PreTrainedTokenizerFast
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=EOS, eos_token=EOS,
                                      unk_token=None, pad_token=PAD,
                                      additional_special_tokens=[IM_START, IM_END],
                                      model_max_length=model_max_length, clean_up_tokenization_spaces=False)
    wrapped.chat_template = CHAT_TEMPLATE
    os.makedirs(output_dir, exist_ok=True)
    wrapped.save_pretrained(output_dir)
    _write_special_tokens_map(output_dir)


def _write_special_tokens_map(output_dir: str) -> None:
    # transformers 5 no longer writes this file; older loaders and users' tools still read it
    path = os.path.join(output_dir, "special_tokens_map.json")
    mapping = {"bos_token": EOS, "eos_token": EOS, "pad_token": PAD,
               "additional_special_tokens": [IM_START, IM_END]}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(mapping, handle, indent=2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--input", nargs="+", required=True, help="files, directories or globs")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--json-keys", nargs="+", default=["text"])
    parser.error = _fail  # type: ignore[method-assign]
    return parser


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.vocab_size < len(SPECIAL_TOKENS) + 256:
            raise TokenizerTrainingError(f"--vocab-size {args.vocab_size} must be at least "
                                         f"{len(SPECIAL_TOKENS) + 256} (256 bytes + special tokens)")
        files = expand_inputs(args.input)
        texts = _non_empty(iter_texts(files, args.json_keys), files, args.json_keys)
        tokenizer = train_bpe(texts, args.vocab_size, args.min_frequency)
        save_for_transformers(tokenizer, args.output_dir)
    except (TokenizerTrainingError, OSError, UnicodeDecodeError) as exc:
        _fail(str(exc))
    print(f"trained a {tokenizer.get_vocab_size()}-token byte-level BPE on {len(files)} file(s); "
          f"saved to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

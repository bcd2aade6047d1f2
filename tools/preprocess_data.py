"""Tokenize a corpus into Megatron ``.bin/.idx`` indexed datasets (MindSpeed-LLM flags).

Pretraining text::

    python preprocess_data.py --input 'corpus/*.jsonl.gz' --json-keys text \\
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path ./my_tokenizer \\
        --output-prefix data/corpus --append-eod --workers 8
    # writes data/corpus_text_document.bin/.idx (one per --json-keys key)

Instruction data (Alpaca or ShareGPT), packed into sequences of at most 4096 tokens::

    python preprocess_data.py --input alpaca.json --handler-name AlpacaStyleInstructionHandler \\
        --prompt-type qwen --tokenizer-type PretrainedFromHF --tokenizer-name-or-path ./qwen \\
        --output-prefix data/alpaca --seq-length 4096 --pack \\
        --map-keys '{"prompt":"instruction","query":"input","response":"output"}'
    # writes data/alpaca_packed_{input_ids,attention_mask,labels}_document.bin/.idx and
    # data/alpaca_packed_settings.json (handler, --prompt-type, --seq-length, --pack: posttrain.py checks it)

Pairwise (DPO) data: ``--handler-name AlpacaStylePairwiseHandler`` or
``SharegptStylePairwiseHandler`` write
``{prefix}_packed_{chosen_input_ids,chosen_labels,rejected_input_ids,rejected_labels}_document``.
What the handlers write (labels, the attention-mask file of document ids,
packing) is described in ``mindspeed_llm/data/handlers.py``.

Inputs (``--input``: a file, a directory searched recursively, or a glob),
read in sorted order within each directory or glob. A directory or glob takes
only corpus files, and says which it took and which it skipped (one line each
on stdout): files in the formats below, never hidden files or files under
hidden directories, never what this suite writes beside data (``.bin``/``.idx``,
``.npy`` index caches, the ``<md5>-...-description.txt`` of an index cache,
``*_packed_settings.json``). A file named explicitly is always read (an
unsupported format is an error). Formats:

- ``.jsonl``: one JSON object per line (blank lines are ignored);
- ``.json``: a JSON list of objects;
- ``.parquet``: rows as objects (needs ``pyarrow``);
- ``.txt``: one document per line, stored under the first ``--json-keys`` key
  (pretraining only; an empty line is an empty document);
- any of these gzip-compressed with a ``.gz`` suffix.

Bad input: a malformed JSON line, invalid UTF-8, a missing key or a malformed
conversation stops the run with ``error: FILE:LINE: ...`` (exit code 2) unless
``--skip-bad-records`` skips and counts it; empty documents are always skipped
and counted. Errors leave no ``.idx`` behind: the builder writes temporary
names and the ``.idx`` files are put in place last, all together.

``--workers N`` tokenizes in N workers; the output is byte-identical to one
worker (results are written in input order). Pretraining text with a fast
Hugging Face tokenizer is tokenized a chunk of records per call by N threads
of one process (the Rust backend runs without the GIL, one thread each); other
handlers and tokenizers run in N processes. A progress bar (documents/s,
tokens/s; a log line every ``--log-interval`` documents when stderr is not a
terminal) and a closing summary (documents, tokens, skipped records by reason)
are printed.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import gzip
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

if not __package__:  # run as a script (python tools/X.py) from a checkout not installed with pip install -e
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from core.datasets.indexed_dataset import IndexedDatasetBuilder, best_dtype
from mindspeed_llm.data.handlers import (HANDLERS, BadRecord, Sample, build_emitter, build_handler, output_files,
                                         settings_path)
from mindspeed_llm.data.templates import PROMPT_TYPES
from mindspeed_llm.flags import FlagParser, add_tokenizer_args, tokenizer_error
from mindspeed_llm.tokenizer import build_tokenizer

FORMATS = (".jsonl", ".json", ".parquet", ".txt")
CHUNK_RECORDS = 256  # records per task sent to a worker
ALWAYS_SKIPPED = ("empty",)


class PreprocessError(Exception):
    """Reported as one ``error: ...`` line, exit code 2."""


# ------------------------------------------------------------------------------------------ flags


def build_parser() -> argparse.ArgumentParser:
    parser = FlagParser(description="Tokenize a corpus into .bin/.idx indexed datasets", error_class=PreprocessError)
    data = parser.add_argument_group("input data")
    data.add_argument("--input", required=True,
                      help="a file, a directory (searched recursively) or a glob; a directory or glob takes only "
                           f"corpus files ({', '.join(FORMATS)}, optionally .gz), never hidden files or this "
                           "suite's own outputs (.bin/.idx, index caches and their -description.txt, "
                           "*_packed_settings.json), and lists what it took and skipped")
    data.add_argument("--json-keys", nargs="+", default=["text"], help="keys of the text (pretraining)")
    data.add_argument("--handler-name", default="GeneralPretrainHandler", choices=sorted(HANDLERS))
    data.add_argument("--prompt-type", default="empty", choices=PROMPT_TYPES,
                      help="template of instruction data; 'tokenizer' uses the tokenizer's chat template")
    data.add_argument("--map-keys", default=None, help="JSON: our field name -> the data's field name")
    data.add_argument("--skip-bad-records", action="store_true",
                      help="skip and count malformed records instead of stopping")
    add_tokenizer_args(parser, default_type="PretrainedFromHF")
    out = parser.add_argument_group("output")
    out.add_argument("--append-eod", action="store_true", help="end every pretraining document with EOD")
    out.add_argument("--output-prefix", required=True)
    out.add_argument("--seq-length", type=int, default=None, help="truncate (and pack) to this many tokens")
    out.add_argument("--pack", action="store_true", help="pack instruction samples into --seq-length sequences")
    out.add_argument("--seed", type=int, default=1234, help="shuffle seed of --pack")
    run = parser.add_argument_group("runtime")
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--log-interval", type=int, default=10000)
    return parser


def validate_args(args: argparse.Namespace) -> None:
    for flag in ("workers", "log_interval"):
        if getattr(args, flag) < 1:
            raise PreprocessError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.seq_length is not None and args.seq_length < 1:
        raise PreprocessError("--seq-length must be at least 1")
    if args.pack and args.seq_length is None:
        raise PreprocessError("--pack needs --seq-length")
    instruction = args.handler_name != "GeneralPretrainHandler"
    if args.pack and args.handler_name not in ("AlpacaStyleInstructionHandler", "SharegptStyleInstructionHandler"):
        raise PreprocessError("--pack applies to AlpacaStyleInstructionHandler/SharegptStyleInstructionHandler")
    if not instruction and args.seq_length is not None:
        raise PreprocessError("--seq-length applies to instruction and pairwise handlers; pretraining "
                              "documents are cut into sequences at training time")
    if len(set(args.json_keys)) != len(args.json_keys):
        raise PreprocessError(f"--json-keys {args.json_keys}: repeated key")
    problem = tokenizer_error(args)
    if problem:
        raise PreprocessError(problem)
    if args.vocab_size is not None and args.tokenizer_type != "NullTokenizer":
        raise PreprocessError(f"--vocab-size is read only by --tokenizer-type NullTokenizer (the {args.tokenizer_type} "
                              "tokenizer has its own vocabulary); drop it")


# ------------------------------------------------------------------------------------------ input


def _format_of(path: str) -> Optional[str]:
    name = path[:-3] if path.endswith(".gz") else path
    return next((fmt for fmt in FORMATS if name.endswith(fmt)), None)


# files this suite writes beside data that have a corpus format: an index cache's description
# (core/datasets/gpt_dataset.py) and an instruction dataset's settings (mindspeed_llm/data/handlers.py)
OWN_FILES = re.compile(r"[0-9a-f]{32}-.+-description\.txt|.+_packed_settings\.json")
LISTED_NAMES = 10  # names shown in the taken / skipped lines before "and N more"


def is_corpus_file(path: str, root: str) -> bool:
    """Whether a file found under a directory or glob ``root`` is corpus input (see the module docstring)."""
    relative = os.path.relpath(path, root) if root else os.path.basename(path)  # (a glob names its directories)
    hidden = any(part.startswith(".") and part not in (".", "..") for part in relative.split(os.sep))
    return not hidden and _format_of(path) is not None and not OWN_FILES.fullmatch(os.path.basename(path))


@dataclass
class Inputs:
    """The files ``--input`` names (read in this order) and those a directory or glob held but skipped."""
    files: List[str]
    skipped: List[str] = field(default_factory=list)
    root: Optional[str] = None  # the directory searched (names are shown relative to it)

    def lines(self) -> List[str]:
        """What the run takes and skips, one line each (nothing for one file named explicitly)."""
        if self.root is None and not self.skipped and len(self.files) == 1:
            return []
        where = f" from {self.root}" if self.root else ""
        lines = [f"input: {len(self.files)} file(s){where}: {self._names(self.files)}"]
        if self.skipped:
            lines.append(f"input: skipped {len(self.skipped)} file(s) that are not corpus input (hidden, not "
                         f"{'/'.join(FORMATS)}, or this suite's own outputs): {self._names(self.skipped)}")
        return lines

    def _names(self, paths: Sequence[str]) -> str:
        names = [os.path.relpath(p, self.root) if self.root else p for p in paths]
        more = f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else ""
        return ", ".join(names[:LISTED_NAMES]) + more


def expand_inputs(pattern: str) -> Inputs:
    """The input files named by ``pattern`` (a file, a directory or a glob), sorted; a directory or glob
    keeps only corpus files (:func:`is_corpus_file`)."""
    if os.path.isfile(pattern):
        if _format_of(pattern) is None:
            raise PreprocessError(f"--input {pattern}: not a corpus file; supported: {', '.join(FORMATS)} "
                                  "(optionally .gz)")
        return Inputs([pattern])
    if os.path.isdir(pattern):
        root = pattern
        found = sorted(os.path.join(folder, name) for folder, _, names in os.walk(pattern) for name in names)
    else:
        root = None
        found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not found:
            raise PreprocessError(f"--input {pattern}: no such file or directory, and no file matches it")
    inputs = Inputs([f for f in found if is_corpus_file(f, root)], [f for f in found if not is_corpus_file(f, root)],
                    root)
    if not inputs.files:
        skipped = f" (skipped {len(inputs.skipped)}: {inputs._names(inputs.skipped)})" if inputs.skipped else ""
        raise PreprocessError(f"--input {pattern}: no corpus files there{skipped}; supported: {', '.join(FORMATS)} "
                              "(optionally .gz), not hidden")
    return inputs


def check_inputs(files: Sequence[str], handler_name: str, json_keys: Sequence[str]) -> None:
    formats = {_format_of(f) for f in files}
    if ".parquet" in formats:
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise PreprocessError("reading .parquet input needs pyarrow: pip install pyarrow") from None
    if ".txt" in formats and handler_name != "GeneralPretrainHandler":
        raise PreprocessError(f"--input has .txt files, which hold plain text; {handler_name} needs "
                              ".jsonl/.json/.parquet records")
    if ".txt" in formats and len(json_keys) > 1:
        raise PreprocessError(f"--input has .txt files (one text per line) but --json-keys names "
                              f"{len(json_keys)} keys; give one")


@dataclass(frozen=True)
class RawRecord:
    path: str
    line: int           # 1-based line (jsonl, txt) or record number (json, parquet)
    kind: str           # "jsonl" | "txt": payload is the line's bytes; "object": an already parsed value
    payload: Any


def _open_binary(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def iter_raw_records(files: Sequence[str]) -> Iterator[RawRecord]:
    """Every record of every file, in order, undecoded where possible (decoding runs in the workers)."""
    for path in files:
        fmt = _format_of(path)
        try:
            if fmt in (".jsonl", ".txt"):
                yield from _iter_lines(path, fmt[1:])
            elif fmt == ".json":
                yield from _iter_json_list(path)
            else:
                yield from _iter_parquet(path)
        except (OSError, EOFError) as exc:
            raise PreprocessError(f"{path}: cannot read ({exc})") from exc


UTF8_BOM = b"\xef\xbb\xbf"  # what some editors put at the start of a UTF-8 file: not text


def _iter_lines(path: str, kind: str) -> Iterator[RawRecord]:
    with _open_binary(path) as handle:
        for line_no, line in enumerate(handle, 1):
            if line_no == 1 and line.startswith(UTF8_BOM):
                line = line[len(UTF8_BOM):]
            if kind == "jsonl" and not line.strip():
                continue
            yield RawRecord(path, line_no, kind, line)


def _iter_json_list(path: str) -> Iterator[RawRecord]:
    with _open_binary(path) as handle:
        data = handle.read()
    try:
        records = json.loads(data.decode("utf-8-sig"))  # (a leading BOM is not text)
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise PreprocessError(f"{path}:{line}: invalid UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise PreprocessError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg}, column {exc.colno})") from exc
    if not isinstance(records, list):
        raise PreprocessError(f"{path}: a .json input must hold a list of records (use .jsonl for one per line)")
    for number, record in enumerate(records, 1):
        yield RawRecord(path, number, "object", record)


def _iter_parquet(path: str) -> Iterator[RawRecord]:
    import pyarrow.parquet as pq
    number = 0
    for batch in pq.ParquetFile(path).iter_batches():
        for record in batch.to_pylist():
            number += 1
            yield RawRecord(path, number, "object", record)


# ------------------------------------------------------------------------------------------ workers

_WORKER: Dict[str, Any] = {}


def init_worker(args: argparse.Namespace) -> None:
    """Build the tokenizer and handler of this process (once per worker)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer = build_tokenizer(args)
    _WORKER["handler"] = build_handler(args.handler_name, tokenizer, args.json_keys, args.append_eod,
                                       args.prompt_type, args.map_keys)
    _WORKER["text_key"] = args.json_keys[0]


@dataclass(frozen=True)
class Chunk:
    """Consecutive records of one file, sent to a worker as one task (cheap to pickle)."""
    path: str
    kind: str
    lines: List[int]
    payloads: List[Any]


@dataclass
class ChunkResult:
    """A chunk's good samples, concatenated per output name, and its bad records."""
    path: str
    flat: Dict[str, np.ndarray]                 # name -> [total tokens of the good samples]
    lengths: np.ndarray                         # [good samples, names]
    bad: List[Tuple[int, str, str]] = field(default_factory=list)  # (line, reason, message)


def _decode(kind: str, payload: Any, text_key: str) -> Dict[str, Any]:
    if kind == "object":
        value = payload
    else:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRecord("invalid_utf8", f"invalid UTF-8 (byte {exc.start} of the line)") from exc
        if kind == "txt":
            return {text_key: text.rstrip("\r\n")}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadRecord("malformed_json", f"malformed JSON ({exc.msg}, column {exc.colno})") from exc
    if not isinstance(value, dict):
        raise BadRecord("bad_type", f"record is a JSON {type(value).__name__}, expected an object")
    return value


def encode_chunk(chunk: Chunk) -> ChunkResult:
    """Decode and encode each record; failures come back as ``bad`` entries, never as exceptions.

    A handler with ``encode_batch`` encodes the chunk's records in one call; when that call raises (a tokenizer
    error), the chunk is encoded record by record, which reports the error as ``encode`` does.
    """
    handler, text_key = _WORKER["handler"], _WORKER["text_key"]
    if hasattr(handler, "encode_batch"):
        result = _encode_chunk_batched(chunk, handler, text_key)
        if result is not None:
            return result
    good: List[Sample] = []
    bad: List[Tuple[int, str, str]] = []
    for line, payload in zip(chunk.lines, chunk.payloads):
        try:
            good.append(handler.encode(_decode(chunk.kind, payload, text_key)))
        except BadRecord as exc:
            bad.append((line, exc.reason, str(exc)))
        except ValueError as exc:  # the tokenizer refused the text (e.g. NullTokenizer ids out of range)
            bad.append((line, "tokenizer_error", f"tokenizer: {exc}"))
    names = list(good[0]) if good else []
    flat = {name: np.concatenate([s[name] for s in good]) for name in names}
    lengths = np.array([[len(s[name]) for name in names] for s in good], dtype=np.int64)
    lengths = lengths.reshape(len(good), len(names))  # [good samples, names], also when empty
    return ChunkResult(chunk.path, flat, lengths, bad)


def _encode_chunk_batched(chunk: Chunk, handler, text_key: str) -> Optional[ChunkResult]:
    """:func:`encode_chunk` through ``handler.encode_batch``; None when the batch raised."""
    records: List[Dict[str, Any]] = []
    record_lines: List[int] = []
    bad: List[Tuple[int, str, str]] = []
    for line, payload in zip(chunk.lines, chunk.payloads):
        try:
            records.append(_decode(chunk.kind, payload, text_key))
            record_lines.append(line)
        except BadRecord as exc:
            bad.append((line, exc.reason, str(exc)))
    try:
        flat, lengths, failed = handler.encode_batch(records)
    except Exception:  # noqa: BLE001 (replayed record by record, where encode raises or reports it)
        return None
    bad += [(record_lines[index], exc.reason, str(exc)) for index, exc in failed.items()]
    bad.sort(key=lambda entry: entry[0])  # input order (a chunk's lines are distinct)
    return ChunkResult(chunk.path, flat, lengths, bad)


def _chunks(records: Iterable[RawRecord], size: int) -> Iterator[Chunk]:
    """Records grouped into chunks of at most ``size``; a chunk never spans two files."""
    current: Optional[Chunk] = None
    for record in records:
        if current is None or len(current.lines) == size or current.path != record.path:
            if current is not None:
                yield current
            current = Chunk(record.path, record.kind, [], [])
        current.lines.append(record.line)
        current.payloads.append(record.payload)
    if current is not None:
        yield current


def ordered_results(args: argparse.Namespace, records: Iterable[RawRecord],
                    handler: Optional[Any] = None) -> Iterator[ChunkResult]:
    """Chunks of results in input order, from ``--workers`` threads or processes.

    Like ``Pool.imap`` over chunks, but at most ``4 * workers`` chunks are in
    flight, so a large corpus is never read into memory ahead of the workers.
    One worker encodes in this process, with ``handler`` when given (no second tokenizer load).
    A handler whose tokenizer encodes batches without the GIL (``releases_gil``: a fast Hugging Face
    tokenizer) with ``encode_batch`` is run by ``--workers`` threads of this process: while they tokenize,
    this thread reads the next chunks and writes the finished ones, and no record is pickled.
    Other handlers run in ``--workers`` processes.
    """
    threaded = handler is not None and hasattr(handler, "encode_batch") and \
        getattr(handler.tokenizer, "releases_gil", False)
    if args.workers == 1 or threaded:
        if handler is None:
            init_worker(args)
        else:
            _WORKER.update(handler=handler, text_key=args.json_keys[0])
    chunks = _chunks(records, CHUNK_RECORDS)
    window = 4 * args.workers
    if args.workers == 1:
        with _tokenizer_on_calling_thread():
            yield from map(encode_chunk, chunks)
    elif threaded:
        with _tokenizer_on_calling_thread(), ThreadPoolExecutor(args.workers) as pool:
            try:
                yield from _in_order((pool.submit(encode_chunk, chunk).result for chunk in chunks), window)
            finally:
                pool.shutdown(cancel_futures=True)
    else:
        with multiprocessing.Pool(args.workers, initializer=init_worker, initargs=(args,)) as pool:
            yield from _in_order((pool.apply_async(encode_chunk, (chunk,)).get for chunk in chunks), window)


def _in_order(submitted: Iterator[Callable[[], ChunkResult]], window: int) -> Iterator[ChunkResult]:
    """The results of submitted tasks (each a callable that waits for its result), in order, with at most
    ``window`` submitted and not yet returned."""
    pending: Deque[Callable[[], ChunkResult]] = deque()
    for wait in submitted:
        pending.append(wait)
        if len(pending) >= window:
            yield pending.popleft()()
    while pending:
        yield pending.popleft()()


@contextlib.contextmanager
def _tokenizer_on_calling_thread() -> Iterator[None]:
    """``TOKENIZERS_PARALLELISM=false`` while this process encodes: a fast tokenizer's batch then runs on the
    thread that calls it, not on its Rayon pool, so ``--workers`` alone sets how many cores tokenize."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


# ------------------------------------------------------------------------------------------ output


def check_output_prefix(prefix: str) -> None:
    """Fail before any work when ``{prefix}_*`` files cannot be created."""
    directory = os.path.dirname(os.path.abspath(prefix))
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".preprocess_probe_"):
            pass
    except OSError as exc:
        raise PreprocessError(f"--output-prefix {prefix}: cannot write in {directory} ({exc.strerror or exc})") from exc
    if os.path.isdir(prefix):
        raise PreprocessError(f"--output-prefix {prefix} is a directory; give a file prefix such as {os.path.join(prefix, 'data')}")


class OutputSet:
    """One ``IndexedDatasetBuilder`` per output name; all ``.idx`` files appear together at ``commit()``."""

    def __init__(self, prefix: str, dtypes: Dict[str, type], settings: Optional[Dict[str, Any]] = None) -> None:
        self.prefix = prefix
        self.settings = settings  # recorded in settings_path(prefix) at commit (instruction and pairwise data)
        self.builders: Dict[str, IndexedDatasetBuilder] = {}
        for name, dtype in dtypes.items():
            self.builders[name] = IndexedDatasetBuilder(self.path(name) + ".bin", dtype)

    def path(self, name: str) -> str:
        return f"{self.prefix}_{name}_document"

    def add_item(self, name: str, array: np.ndarray) -> None:
        self.builders[name].add_item(array)

    def end_document(self, name: str) -> None:
        self.builders[name].end_document()

    def add_documents(self, name: str, flat: np.ndarray, lengths: np.ndarray) -> None:
        self.builders[name].add_documents(flat, lengths)

    def commit(self) -> List[str]:
        """Finalize every builder to pending ``.idx`` names, then rename them all into place."""
        pending = []
        for name, builder in self.builders.items():
            builder.finalize(self.path(name) + ".idx.pending")
            pending.append(self.path(name))
        if self.settings is not None:  # before the .idx files: a readable dataset always has its settings
            with open(settings_path(self.prefix) + ".pending", "w", encoding="utf-8") as handle:
                json.dump(self.settings, handle, indent=1, sort_keys=True)
            os.replace(settings_path(self.prefix) + ".pending", settings_path(self.prefix))
        for path in pending:
            os.replace(path + ".idx.pending", path + ".idx")
        return pending

    def abort(self) -> None:
        for name, builder in self.builders.items():
            builder.abort()
            for suffix in (".idx.pending", ".idx.pending.tmp"):
                if os.path.exists(self.path(name) + suffix):
                    os.remove(self.path(name) + suffix)
        if os.path.exists(settings_path(self.prefix) + ".pending"):
            os.remove(settings_path(self.prefix) + ".pending")


def output_dtypes(kind: str, json_keys: Sequence[str], vocab_size: int,
                  seq_length: Optional[int]) -> Dict[str, type]:
    """Token ids: the smallest dtype for the vocabulary; labels int32 (-100); document ids by length."""
    dtypes = {}
    for name in output_files(kind, json_keys):
        if name.endswith("labels"):
            dtypes[name] = np.int32
        elif name.endswith("attention_mask"):
            dtypes[name] = best_dtype((seq_length or 1) + 1)
        else:
            dtypes[name] = best_dtype(vocab_size)
    return dtypes


# ------------------------------------------------------------------------------------------ the run


def dataset_settings_of(args: argparse.Namespace, kind: str) -> Optional[Dict[str, Any]]:
    """What an instruction or pairwise dataset records of its making (None for pretraining text)."""
    if kind == "pretrain":
        return None
    return {"handler_name": args.handler_name, "prompt_type": args.prompt_type, "seq_length": args.seq_length,
            "pack": args.pack}


@dataclass
class Summary:
    documents: int = 0
    tokens: int = 0
    skipped: Counter = field(default_factory=Counter)
    truncated: int = 0
    sequences: int = 0
    seconds: float = 0.0
    outputs: List[str] = field(default_factory=list)

    def line(self) -> str:
        rate = max(self.seconds, 1e-9)
        skipped = ", ".join(f"{reason}: {n}" for reason, n in sorted(self.skipped.items())) or "none"
        return (f"done: {self.documents} documents, {self.tokens} tokens in {self.seconds:.1f} s "
                f"({self.documents / rate:.0f} documents/s, {self.tokens / rate:.0f} tokens/s); "
                f"{self.sequences} sequences written, {self.truncated} truncated; "
                f"skipped {sum(self.skipped.values())} ({skipped})")


class Progress:
    """A tqdm bar on a terminal; otherwise a log line every ``interval`` documents."""

    def __init__(self, interval: int) -> None:
        from tqdm import tqdm
        self.bar = tqdm(unit=" docs", dynamic_ncols=True, disable=None, file=sys.stderr)
        self.interval, self.next_log = interval, interval
        self.start, self.documents, self.tokens = time.perf_counter(), 0, 0

    def update(self, documents: int, tokens: int) -> None:
        self.documents += documents
        self.tokens += tokens
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        if not self.bar.disable:
            self.bar.update(documents)
            self.bar.set_postfix_str(f"{self.tokens / elapsed:.0f} tokens/s", refresh=False)
        elif self.documents >= self.next_log:
            print(f"processed {self.documents} documents ({self.documents / elapsed:.0f} documents/s, "
                  f"{self.tokens / elapsed:.0f} tokens/s)", file=sys.stderr)
            self.next_log += self.interval

    def close(self) -> None:
        self.bar.close()


def consume(results: Iterable[ChunkResult], emitter, skip_bad: bool, progress: Progress,
            summary: Summary) -> None:
    """Hand good samples to the emitter in order; count or raise on bad ones."""
    for result in results:
        for line, reason, message in result.bad:
            if not skip_bad and reason not in ALWAYS_SKIPPED:
                raise PreprocessError(f"{result.path}:{line}: {message} (--skip-bad-records skips such records)")
            summary.skipped[reason] += 1
        emitter.add_flat(result.flat, result.lengths)
        good = len(result.lengths)
        summary.documents += good
        tokens = sum(int(a.size) for name, a in result.flat.items() if not name.endswith("labels"))
        progress.update(good + len(result.bad), tokens)


def run(args: argparse.Namespace) -> Summary:
    """Validate everything, then tokenize and write; returns the summary."""
    validate_args(args)
    inputs = expand_inputs(args.input)
    files = inputs.files
    check_inputs(files, args.handler_name, args.json_keys)
    check_output_prefix(args.output_prefix)
    try:
        tokenizer = build_tokenizer(args)
        handler = build_handler(args.handler_name, tokenizer, args.json_keys, args.append_eod,
                                args.prompt_type, args.map_keys)
        if args.append_eod or handler.kind != "pretrain":
            tokenizer.eod  # noqa: B018 (fails now, not in a worker, when there is no EOS)
    except (ValueError, FileNotFoundError, NotImplementedError, OSError) as exc:
        raise PreprocessError(str(exc)) from exc
    for line in inputs.lines():
        print(line, flush=True)
    summary = Summary()
    start = time.perf_counter()
    outputs = OutputSet(args.output_prefix, output_dtypes(handler.kind, args.json_keys, tokenizer.vocab_size,
                                                          args.seq_length), dataset_settings_of(args, handler.kind))
    progress = Progress(args.log_interval)
    try:
        emitter = build_emitter(handler.kind, outputs, args.seq_length, args.pack, args.seed)
        results = ordered_results(args, iter_raw_records(files), handler)
        consume(results, emitter, args.skip_bad_records, progress, summary)
        emitter.finish()
        if summary.documents == 0:
            raise PreprocessError(f"--input {args.input}: no usable documents "
                                  f"(skipped: {dict(summary.skipped) or 'none'})")
        summary.outputs = outputs.commit()
    except BaseException:
        outputs.abort()
        raise
    finally:
        progress.close()
    summary.tokens, summary.truncated = emitter.stats["tokens"], emitter.stats["truncated"]
    summary.sequences, summary.seconds = emitter.stats["sequences"], time.perf_counter() - start
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        summary = run(args)
    except PreprocessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary.line())
    for path in summary.outputs:
        print(f"wrote {path}.bin/.idx")
    return 0


if __name__ == "__main__":
    sys.exit(main())

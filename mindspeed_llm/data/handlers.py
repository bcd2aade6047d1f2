"""Dataset handlers (``--handler-name``): records -> token ids -> ``.bin/.idx`` items.

A handler has two halves:

- ``encode(record) -> Sample`` runs in the workers: one JSON record
  (a dict, fields renamed by ``--map-keys``) becomes a dict of int32 arrays,
  or raises ``BadRecord(reason, message)``. ``GeneralPretrainHandler`` also has
  ``encode_batch(records)``: the same samples for many records, concatenated,
  from one ``tokenize_batch`` call;
- an ``Emitter`` runs in the main process, in input order: it truncates,
  packs and hands arrays to a ``Sink`` (``add_item(name, array)``,
  ``end_document(name)``; ``add_documents(name, flat, lengths)`` for many
  one-item documents at once) whose names are the output files.

Handlers (MindSpeed-LLM names) and what they write, per prefix:

- ``GeneralPretrainHandler``: per ``--json-keys`` key ``K``,
  ``{prefix}_{K}_document``; one item and one document per record
  (BOS first when the tokenizer adds one, EOD last with ``--append-eod``).
- ``AlpacaStyleInstructionHandler`` / ``SharegptStyleInstructionHandler``:
  ``{prefix}_packed_{input_ids,attention_mask,labels}_document``. Labels are
  aligned with ``input_ids`` (not shifted); prompt tokens, system text and
  user turns are ``IGNORE_INDEX`` (-100), only assistant replies are trained.
  One item (= one document) per training sequence. ``attention_mask`` holds
  per-token document ids: 1 for an unpacked sample; with ``--pack``, 1..k for
  the k samples packed in the sequence. 0 is reserved for padding, which is
  never written to disk (sequences are at most ``--seq-length`` long and
  padded by the dataset at batching time).
- ``AlpacaStylePairwiseHandler`` / ``SharegptStylePairwiseHandler``:
  ``{prefix}_packed_{chosen_input_ids,chosen_labels,rejected_input_ids,rejected_labels}_document``,
  one item per pair; only the final reply is trained (history replies masked).

Instruction and pairwise datasets also get ``{prefix}_packed_settings.json``: the handler name,
``--prompt-type``, ``--seq-length`` and ``--pack`` they were written with (``dataset_settings``
reads it back; ``posttrain.py --prompt-type`` is checked against it).

``--seq-length`` truncates longer sequences (counted). ``--pack`` (instruction
handlers) shuffles the samples with ``--seed`` and packs them greedily, in that
order, into sequences of at most ``--seq-length`` tokens: a sample joins the
current sequence while it fits, else the sequence is closed.
"""
from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from typing import Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from mindspeed_llm.data.templates import IGNORE_INDEX, ChatEncoder, Turn

Sample = Dict[str, np.ndarray]  # name -> int32 array [n]

INSTRUCTION_FILES = ("input_ids", "attention_mask", "labels")
PAIRWISE_FILES = ("chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels")

ALPACA_KEYS = {"prompt": "instruction", "query": "input", "response": "output",
               "system": "system", "history": "history", "chosen": "chosen", "rejected": "rejected"}
SHAREGPT_KEYS = {"messages": "conversations", "role_tag": "from", "content_tag": "value",
                 "user_tag": "human", "assistant_tag": "gpt", "system_tag": "system",
                 "system": "system", "chosen": "chosen", "rejected": "rejected"}
USER_ROLES = ("human", "user")
ASSISTANT_ROLES = ("gpt", "assistant")


class BadRecord(Exception):
    """A record that cannot be encoded; ``reason`` keys the skip counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Sink(Protocol):
    def add_item(self, name: str, array: np.ndarray) -> None: ...

    def end_document(self, name: str) -> None: ...

    def add_documents(self, name: str, flat: np.ndarray, lengths: np.ndarray) -> None: ...


def parse_map_keys(text: Optional[str], defaults: Mapping[str, str]) -> Dict[str, str]:
    """``--map-keys`` JSON (our name -> the data's field name) merged over ``defaults``."""
    keys = dict(defaults)
    if not text:
        return keys
    try:
        given = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--map-keys is not valid JSON: {exc.msg}") from exc
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise ValueError("--map-keys must be a JSON object of strings, e.g. "
                         "'{\"prompt\":\"instruction\",\"query\":\"input\",\"response\":\"output\"}'")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"--map-keys: unknown key(s) {unknown}; known: {sorted(defaults)}")
    keys.update(given)
    return keys


# ----------------------------------------------------------------------------------------- encoders


def _text_field(record: Mapping, field: str, required: bool = True) -> str:
    if field not in record or record[field] is None:
        if required:
            raise BadRecord("missing_key", f"missing key {field!r} (keys: {sorted(record)})")
        return ""
    value = record[field]
    if not isinstance(value, str):
        raise BadRecord("bad_type", f"key {field!r} is a {type(value).__name__}, expected a string")
    return value


def _int32(ids: Sequence[int]) -> np.ndarray:
    return np.asarray(ids, dtype=np.int32)


def _join_turns(pairs: Sequence[Tuple[List[int], List[int]]], train_all: bool = True) -> Tuple[List[int], List[int]]:
    """Concatenate (prompt, response) pairs; labels mask prompts (and, unless train_all, all but the last reply)."""
    ids: List[int] = []
    labels: List[int] = []
    for index, (prompt, response) in enumerate(pairs):
        trained = train_all or index == len(pairs) - 1
        ids += prompt + response
        labels += [IGNORE_INDEX] * len(prompt) + (response if trained else [IGNORE_INDEX] * len(response))
    return ids, labels


class GeneralPretrainHandler:
    """Plain text per ``--json-keys`` key -> one document of token ids."""

    kind = "pretrain"

    def __init__(self, tokenizer, json_keys: Sequence[str] = ("text",), append_eod: bool = False) -> None:
        self.tokenizer = tokenizer
        self.json_keys = tuple(json_keys)
        self.append_eod = append_eod
        # read once: an HF tokenizer's special ids go through transformers' __getattr__ on every access
        self.eod = tokenizer.eod if append_eod else None
        self.bos = tokenizer.bos if tokenizer.add_bos else None

    @property
    def output_names(self) -> Tuple[str, ...]:
        return self.json_keys

    def encode(self, record: Mapping) -> Sample:
        sample = {}
        for key in self.json_keys:
            ids = self.tokenizer.tokenize(self._text(record, key))
            if self.bos is not None:
                ids = [self.bos] + ids
            if self.eod is not None:
                ids = ids + [self.eod]
            sample[key] = _int32(ids)
        return sample

    def encode_batch(self, records: Sequence[Mapping]
                     ) -> Tuple[Dict[str, np.ndarray], np.ndarray, Dict[int, BadRecord]]:
        """What :meth:`encode` gives each record, from one ``tokenize_batch`` call: per key the good samples'
        arrays concatenated (``flat[key]``), their lengths ``[good records, keys]``, and the bad records by index.

        Every text that ``encode`` would tokenize is tokenized, those of a record found bad at a later key
        included, so a tokenizer error is raised here whenever ``encode`` would meet one (the caller then
        encodes record by record to report it as ``encode`` does).
        """
        texts: List[str] = []   # the texts of every record, key by key
        starts: List[int] = []  # where each good record's texts begin in ``texts``
        bad: Dict[int, BadRecord] = {}
        for index, record in enumerate(records):
            start = len(texts)
            try:
                for key in self.json_keys:
                    text = record.get(key)  # a usable text, tested as _text does (cheaper than the call)
                    texts.append(text if type(text) is str and text and not text.isspace()
                                 else self._text(record, key))
            except BadRecord as exc:
                bad[index] = exc
            else:
                starts.append(start)
        tokenize_batch = getattr(self.tokenizer, "tokenize_batch", None)
        ids = tokenize_batch(texts) if tokenize_batch else [self.tokenizer.tokenize(text) for text in texts]
        keys = len(self.json_keys)
        flat, lengths = {}, np.zeros((len(starts), keys), dtype=np.int64)  # [good records, keys]
        for k, key in enumerate(self.json_keys):
            documents = ids[k::keys] if not bad else [ids[start + k] for start in starts]
            flat[key], lengths[:, k] = self._join(documents)
        return flat, lengths, bad

    def _text(self, record: Mapping, key: str) -> str:
        text = _text_field(record, key)
        if not text.strip():
            raise BadRecord("empty", f"empty text in key {key!r}")
        return text

    def _join(self, documents: List[List[int]]) -> Tuple[np.ndarray, np.ndarray]:
        """The documents' ids, BOS and EOD added as :meth:`encode` adds them, concatenated: ([tokens], [docs])."""
        body_lengths = np.fromiter(map(len, documents), dtype=np.int64, count=len(documents))  # [docs]
        body = np.fromiter(itertools.chain.from_iterable(documents), dtype=np.int32,
                           count=int(body_lengths.sum()))  # [body tokens]
        before, after = int(self.bos is not None), int(self.eod is not None)
        if not before + after:
            return body, body_lengths
        lengths = body_lengths + before + after  # [docs]
        flat = np.empty(int(lengths.sum()), dtype=np.int32)  # [tokens]
        ends = np.cumsum(lengths)  # [docs]
        if before:
            flat[ends - lengths] = self.bos
        if after:
            flat[ends - 1] = self.eod
        # body token j of document d sits after the d documents before it and their special tokens
        shift = np.repeat(np.arange(len(documents), dtype=np.int64) * (before + after) + before, body_lengths)
        flat[np.arange(len(body), dtype=np.int64) + shift] = body
        return flat, lengths


class _ChatHandler:
    """Shared by the instruction and pairwise handlers: a template and renamed fields."""

    default_keys: Mapping[str, str] = {}

    def __init__(self, tokenizer, prompt_type: str = "empty", map_keys: Optional[str] = None) -> None:
        self.tokenizer = tokenizer
        self.encoder = ChatEncoder(tokenizer, prompt_type)
        self.keys = parse_map_keys(map_keys, self.default_keys)


class _AlpacaFields(_ChatHandler):
    default_keys = ALPACA_KEYS

    def conversation(self, record: Mapping, with_response: bool) -> Tuple[str, List[Turn], str, str]:
        """(system, history turns, query, response) of an Alpaca record."""
        k = self.keys
        query = _text_field(record, k["prompt"])
        extra = _text_field(record, k["query"], required=False)
        query = f"{query}\n{extra}" if extra else query
        if not query.strip():
            raise BadRecord("empty", f"empty instruction in key {k['prompt']!r}")
        response = _text_field(record, k["response"]) if with_response else ""
        return _text_field(record, k["system"], required=False), self._history(record), query, response

    def _history(self, record: Mapping) -> List[Turn]:
        history = record.get(self.keys["history"]) or []
        if not isinstance(history, list) or not all(
                isinstance(turn, (list, tuple)) and len(turn) == 2 and all(isinstance(t, str) for t in turn)
                for turn in history):
            raise BadRecord("bad_type", f"key {self.keys['history']!r} must be a list of [query, response] pairs")
        return [(q, a) for q, a in history]


class AlpacaStyleInstructionHandler(_AlpacaFields):
    """instruction/input/output[/system/history] -> input_ids and labels (prompts masked)."""

    kind = "instruction"
    output_names = ("input_ids", "labels")

    def encode(self, record: Mapping) -> Sample:
        system, history, query, response = self.conversation(record, with_response=True)
        if not response.strip():
            raise BadRecord("empty", f"empty response in key {self.keys['response']!r}")
        ids, labels = _join_turns(self.encoder.encode_turns(system, history + [(query, response)]))
        return {"input_ids": _int32(ids), "labels": _int32(labels)}


class _SharegptFields(_ChatHandler):
    default_keys = SHAREGPT_KEYS

    def conversation(self, record: Mapping, ends_with_user: bool) -> Tuple[str, List[Tuple[str, str]]]:
        """(system, [(role, text), ...]) with roles 'user'/'assistant', alternating from 'user'."""
        k = self.keys
        messages = record.get(k["messages"])
        if messages is None:
            raise BadRecord("missing_key", f"missing key {k['messages']!r} (keys: {sorted(record)})")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRecord("bad_type", f"key {k['messages']!r} must be a list of objects")
        system = _text_field(record, k["system"], required=False)
        turns = [self._role_text(m) for m in messages]
        if turns and turns[0][0] == "system":
            system = turns.pop(0)[1]
        expected = ["user", "assistant"] * (len(turns) // 2 + 1)
        roles = [role for role, _ in turns]
        if not turns or roles != expected[:len(turns)] or (len(turns) % 2 == 1) != ends_with_user:
            end = "a user" if ends_with_user else "an assistant"
            raise BadRecord("invalid_conversation", f"conversation must alternate user/assistant turns, "
                            f"start with a user turn and end with {end} turn; got roles {roles}")
        return system, turns

    def _role_text(self, message: Mapping) -> Tuple[str, str]:
        k = self.keys
        role = message.get(k["role_tag"])
        text = _text_field(message, k["content_tag"])
        if role in (k["user_tag"],) + USER_ROLES:
            return "user", text
        if role in (k["assistant_tag"],) + ASSISTANT_ROLES:
            return "assistant", text
        if role == k["system_tag"]:
            return "system", text
        raise BadRecord("invalid_conversation", f"unsupported role {role!r} in key {k['role_tag']!r}")

    def reply(self, record: Mapping, field: str) -> str:
        value = record.get(self.keys[field])
        if value is None:
            raise BadRecord("missing_key", f"missing key {self.keys[field]!r} (keys: {sorted(record)})")
        if isinstance(value, dict):
            role, text = self._role_text(value)
            if role != "assistant":
                raise BadRecord("invalid_conversation", f"key {self.keys[field]!r} must be an assistant turn")
            return text
        if not isinstance(value, str):
            raise BadRecord("bad_type", f"key {self.keys[field]!r} must be a string or a message object")
        return value


def _pairs(turns: Sequence[Tuple[str, str]]) -> List[Turn]:
    return [(turns[i][1], turns[i + 1][1]) for i in range(0, len(turns) - 1, 2)]


class SharegptStyleInstructionHandler(_SharegptFields):
    """conversations [{from: human|gpt|system, value}] -> input_ids and labels (assistant turns trained)."""

    kind = "instruction"
    output_names = ("input_ids", "labels")

    def encode(self, record: Mapping) -> Sample:
        system, turns = self.conversation(record, ends_with_user=False)
        if not any(text.strip() for role, text in turns if role == "assistant"):
            raise BadRecord("empty", "no non-empty assistant turn")
        ids, labels = _join_turns(self.encoder.encode_turns(system, _pairs(turns)))
        return {"input_ids": _int32(ids), "labels": _int32(labels)}


def _pairwise_sample(encoder: ChatEncoder, system: str, history: List[Turn], query: str,
                     chosen: str, rejected: str) -> Sample:
    sample = {}
    for name, reply in (("chosen", chosen), ("rejected", rejected)):
        if not reply.strip():
            raise BadRecord("empty", f"empty {name} response")
        ids, labels = _join_turns(encoder.encode_turns(system, history + [(query, reply)]), train_all=False)
        sample[f"{name}_input_ids"], sample[f"{name}_labels"] = _int32(ids), _int32(labels)
    return sample


class AlpacaStylePairwiseHandler(_AlpacaFields):
    """instruction/input/chosen/rejected[/system/history] -> chosen and rejected ids and labels."""

    kind = "pairwise"
    output_names = PAIRWISE_FILES

    def encode(self, record: Mapping) -> Sample:
        system, history, query, _ = self.conversation(record, with_response=False)
        chosen = _text_field(record, self.keys["chosen"])
        rejected = _text_field(record, self.keys["rejected"])
        return _pairwise_sample(self.encoder, system, history, query, chosen, rejected)


class SharegptStylePairwiseHandler(_SharegptFields):
    """conversations ending with a user turn, plus chosen/rejected assistant replies."""

    kind = "pairwise"
    output_names = PAIRWISE_FILES

    def encode(self, record: Mapping) -> Sample:
        system, turns = self.conversation(record, ends_with_user=True)
        chosen, rejected = self.reply(record, "chosen"), self.reply(record, "rejected")
        return _pairwise_sample(self.encoder, system, _pairs(turns), turns[-1][1], chosen, rejected)


HANDLERS = {cls.__name__: cls for cls in (
    GeneralPretrainHandler, AlpacaStyleInstructionHandler, SharegptStyleInstructionHandler,
    AlpacaStylePairwiseHandler, SharegptStylePairwiseHandler)}


def build_handler(name: str, tokenizer, json_keys: Sequence[str] = ("text",), append_eod: bool = False,
                  prompt_type: str = "empty", map_keys: Optional[str] = None):
    """The handler called ``name`` (``--handler-name``) over ``tokenizer``."""
    if name not in HANDLERS:
        raise ValueError(f"--handler-name {name}: unknown; choose one of {', '.join(HANDLERS)}")
    if name == "GeneralPretrainHandler":
        return GeneralPretrainHandler(tokenizer, json_keys, append_eod)
    return HANDLERS[name](tokenizer, prompt_type, map_keys)


# ----------------------------------------------------------------------------------------- emitters


def output_files(kind: str, json_keys: Sequence[str] = ("text",)) -> Tuple[str, ...]:
    """The output names (``{prefix}_{name}_document``) a handler kind writes."""
    if kind == "pretrain":
        return tuple(json_keys)
    return tuple(f"packed_{name}" for name in (INSTRUCTION_FILES if kind == "instruction" else PAIRWISE_FILES))


def settings_path(prefix: str) -> str:
    """Where an instruction or pairwise dataset records how it was written (see the module docstring)."""
    return f"{prefix}_packed_settings.json"


def dataset_settings(prefix: str) -> Optional[Dict[str, object]]:
    """The settings ``preprocess_data.py`` recorded for ``prefix``; None when it recorded none."""
    path = settings_path(prefix)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        try:
            settings = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg}); re-run preprocess_data.py") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: expected a JSON object; re-run preprocess_data.py")
    return settings


def _truncate(array: np.ndarray, seq_length: Optional[int]) -> np.ndarray:
    return array if seq_length is None else array[:seq_length]


class Emitter:
    """Writes samples to a sink in input order; ``finish()`` flushes what is buffered."""

    def __init__(self, sink: Sink, seq_length: Optional[int] = None) -> None:
        self.sink = sink
        self.seq_length = seq_length
        self.stats: Counter = Counter()  # truncated, sequences, tokens

    def _write(self, name: str, array: np.ndarray) -> None:
        self.sink.add_item(name, array)
        self.sink.end_document(name)

    def add_flat(self, flat: Dict[str, np.ndarray], lengths: np.ndarray) -> None:
        """Many samples at once, in order: ``flat[name]`` their arrays concatenated, ``lengths[i, k]`` the
        length of sample ``i``'s array of the ``k``-th name."""
        for sample in split_flat(flat, lengths):
            self.add(sample)

    def finish(self) -> None:
        pass


def split_flat(flat: Dict[str, np.ndarray], lengths: np.ndarray) -> Iterator[Sample]:
    """The samples of :meth:`Emitter.add_flat`'s concatenated arrays, one at a time."""
    names = list(flat)
    ends = np.cumsum(lengths, axis=0)  # [samples, names]
    for row in range(len(lengths)):
        yield {name: flat[name][ends[row, k] - lengths[row, k]:ends[row, k]] for k, name in enumerate(names)}


class PretrainEmitter(Emitter):
    def add(self, sample: Sample) -> None:
        for key, ids in sample.items():
            self._write(key, ids)
            self.stats["tokens"] += len(ids)
        self.stats["sequences"] += 1

    def add_flat(self, flat: Dict[str, np.ndarray], lengths: np.ndarray) -> None:
        """One write per name for the whole batch (each sample one document), not one per sample."""
        for k, (name, ids) in enumerate(flat.items()):
            self.sink.add_documents(name, ids, lengths[:, k])  # ids: [sum of lengths[:, k]]
            self.stats["tokens"] += len(ids)
        self.stats["sequences"] += len(lengths)


class PairwiseEmitter(Emitter):
    def add(self, sample: Sample) -> None:
        too_long = self.seq_length is not None and any(len(a) > self.seq_length for a in sample.values())
        self.stats["truncated"] += int(too_long)
        for name in PAIRWISE_FILES:
            self._write(f"packed_{name}", _truncate(sample[name], self.seq_length))
        self.stats["tokens"] += sum(len(_truncate(sample[n], self.seq_length)) for n in PAIRWISE_FILES[::2])
        self.stats["sequences"] += 1


class InstructionEmitter(Emitter):
    """Unpacked: one sequence per sample. Packed: buffered, shuffled and packed at ``finish()``."""

    def __init__(self, sink: Sink, seq_length: Optional[int] = None, pack: bool = False, seed: int = 1234) -> None:
        super().__init__(sink, seq_length)
        if pack and seq_length is None:
            raise ValueError("--pack needs --seq-length")
        self.pack = pack
        self.seed = seed
        self.buffer: List[Tuple[np.ndarray, np.ndarray]] = []

    def add(self, sample: Sample) -> None:
        ids, labels = sample["input_ids"], sample["labels"]
        if self.seq_length is not None and len(ids) > self.seq_length:
            self.stats["truncated"] += 1
            ids, labels = ids[:self.seq_length], labels[:self.seq_length]
        if self.pack:
            self.buffer.append((ids, labels))
        else:
            self._write_sequence([ids], [labels])

    def finish(self) -> None:
        if not self.pack:
            return
        order = np.random.default_rng(self.seed).permutation(len(self.buffer))
        lengths = [len(self.buffer[i][0]) for i in order]
        for group in greedy_pack(lengths, self.seq_length):
            chosen = [self.buffer[order[i]] for i in group]
            self._write_sequence([ids for ids, _ in chosen], [labels for _, labels in chosen])
        self.buffer = []

    def _write_sequence(self, ids: List[np.ndarray], labels: List[np.ndarray]) -> None:
        doc_ids = np.concatenate([np.full(len(a), k + 1, dtype=np.int32) for k, a in enumerate(ids)])  # [s]
        self._write("packed_input_ids", np.concatenate(ids))        # [s]
        self._write("packed_attention_mask", doc_ids)               # [s], 1..k
        self._write("packed_labels", np.concatenate(labels))        # [s], -100 where not trained
        self.stats["tokens"] += len(doc_ids)
        self.stats["sequences"] += 1


def greedy_pack(lengths: Sequence[int], capacity: int) -> List[List[int]]:
    """Indices of ``lengths`` grouped in order: a group grows while its total stays <= ``capacity``."""
    groups: List[List[int]] = []
    current: List[int] = []
    used = 0
    for index, length in enumerate(lengths):
        if current and used + length > capacity:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += length
    return groups + ([current] if current else [])


def build_emitter(kind: str, sink: Sink, seq_length: Optional[int] = None, pack: bool = False,
                  seed: int = 1234) -> Emitter:
    if pack and kind != "instruction":
        raise ValueError("--pack applies to instruction handlers (Alpaca/ShareGPT instruction data) only")
    if kind == "pretrain":
        return PretrainEmitter(sink, None)
    if kind == "pairwise":
        return PairwiseEmitter(sink, seq_length)
    return InstructionEmitter(sink, seq_length, pack, seed)

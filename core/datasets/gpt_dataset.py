"""GPT pretraining datasets over Megatron indexed datasets: splits, epochs, shuffling, blending.

A :class:`GPTDataset` covers one split (a range of sequences) of one ``.bin/.idx`` corpus and
yields ``{"text": int64 tensor [seq_length + 1]}``; consecutive samples of the token stream
overlap by one token (the label of the last position). Three index arrays define it:

- document index ``[epochs x documents]`` int32: the split's sequence ids, each epoch a fresh
  permutation from ``numpy.random.RandomState(seed)`` (Megatron shuffles all epochs as one
  array; shuffling per epoch guarantees every document is read once per epoch). When the last
  epoch contributes under 80% of an epoch's samples, its samples are shuffled separately
  (Megatron's "separate last epoch" rule), so full epochs are consumed first;
- sample index ``[samples + 1, 2]``: (document-index position, offset) of each sample start,
  built by the C++ helper (``core/datasets/helpers.py``);
- shuffle index ``[samples]``: the order in which samples are served.

They are cached as ``.npy`` files in ``cache_path`` (default ``<corpus dir>/cache/GPTDataset_indices``)
under ``{md5(description)}-GPTDataset-{split}-{kind}.npy``; the description (JSON, saved beside
them) lists everything the arrays depend on, the md5 of the sequence lengths and document boundaries
included, so data rewritten under the same prefix never reuses stale indices. Rank 0 builds them; the others wait at a barrier
and memory-map them (:func:`build_pretraining_datasets`). Nothing depends on the parallel layout.

With ``scan_max_token_id`` each corpus's largest token id is found when it opens (the whole ``.bin`` read once, in
chunks) and cached in the same directory as ``{key}-max_token_id.json``, the key an md5 of the ``.idx`` fingerprint,
the dtype, the ``.bin`` size and its first and last MiB; rank 0 scans, the others read the file after the barrier,
so every rank holds the same :attr:`IndexedDataset.max_token_id` (:func:`corpus_max_token_ids` collects them).

:class:`BlendedDataset` mixes datasets by weight with the C++ greedy blending index.
``--data-path`` accepts ``PREFIX``, ``W1 PREFIX1 W2 PREFIX2 ...`` (weights normalised; each
dataset gets ``ceil(ceil(n * w) * 1.005)`` samples, Megatron's margin) or several prefixes
without weights (weighted by their token counts). ``--split 969,30,1`` cuts each corpus into
train/valid/test sequence ranges (Megatron's rounding); ``--train-data-path`` /
``--valid-data-path`` / ``--test-data-path`` give each split its own blend instead.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from core.datasets import helpers
from core.datasets.indexed_dataset import (IndexedDataset, IndexedDatasetError, check_indexed_files, get_bin_path,
                                           scan_max_token_id)

SPLIT_NAMES = ("train", "valid", "test")
BLEND_MARGIN = 1.005  # Megatron's surplus of samples per blended dataset
SEPARATE_LAST_EPOCH_THRESHOLD = 0.80
INDEX_KINDS = ("document_index", "sample_index", "shuffle_index")
MAX_TOKEN_ID_FORMAT = 1  # bump when the max_token_id.json cache changes meaning
BIN_EDGE_BYTES = 2**20  # bytes hashed at each end of a .bin for the max_token_id cache key

Blend = Tuple[List[str], Optional[List[float]]]  # prefixes, weights (None: unweighted)
Sample = Dict[str, torch.Tensor]


class DatasetCacheError(RuntimeError):
    """A rank other than 0 found no cached index (rank 0 must build it before the barrier)."""


@dataclass
class GPTDatasetConfig:
    """What the GPT datasets depend on; flag names follow Megatron's arguments."""
    seq_length: int
    seed: int = 1234
    split: Optional[str] = "969, 30, 1"
    data_path: Optional[Union[str, Sequence[str]]] = None
    train_data_path: Optional[Union[str, Sequence[str]]] = None
    valid_data_path: Optional[Union[str, Sequence[str]]] = None
    test_data_path: Optional[Union[str, Sequence[str]]] = None
    cache_path: Optional[str] = None
    train_valid_test_num_samples: Tuple[int, int, int] = (0, 0, 0)
    add_extra_token_to_sequence: bool = True
    drop_last_partial_sequence: bool = True
    separate_last_epoch: bool = True
    mmap: bool = True
    fields: bool = False  # also return tokens/labels/loss_mask/position_ids
    eod: Optional[int] = None
    reset_position_ids: bool = False
    eod_mask_loss: bool = False
    scan_max_token_id: bool = False  # find each corpus's largest token id when it opens (cached; see _open)

    @property
    def extra_tokens(self) -> int:
        return int(self.add_extra_token_to_sequence)


# ---- parsing flags ---------------------------------------------------------------------------


def parse_blend(paths: Optional[Union[str, Sequence[str]]], flag: str = "data path") -> Optional[Blend]:
    """``"p"`` / ``["0.3", "a", "0.7", "b"]`` / ``"0.3 a 0.7 b"`` / ``["a", "b"]`` -> (prefixes, weights).

    ``flag`` names the setting in error messages (``--data-path``, ``--train-data-path``, ...)."""
    if paths is None:
        return None
    items = paths.split() if isinstance(paths, str) else [word for item in paths for word in str(item).split()]
    if not items:
        return None
    try:
        float(items[0])
    except ValueError:
        return items, None
    example = f"e.g. {flag} 0.3 PREFIX1 0.7 PREFIX2, or prefixes alone"
    if len(items) % 2:
        raise ValueError(f"{flag} {' '.join(items)!r}: expected 'WEIGHT PREFIX' pairs, got an odd number of words "
                         f"({len(items)}); give {example}")
    try:
        weights = [float(word) for word in items[0::2]]
    except ValueError as error:
        raise ValueError(f"{flag} {' '.join(items)!r}: a weight is not a number ({error}); give {example}") from None
    if any(not math.isfinite(weight) or weight < 0 for weight in weights) or sum(weights) <= 0:
        raise ValueError(f"{flag} {' '.join(items)!r}: weights must be finite and >= 0 with a positive sum; "
                         f"give {example}")
    return items[1::2], weights


def normalize(weights: Sequence[float]) -> List[float]:
    total = float(sum(weights))
    return [weight / total for weight in weights]


def parse_split(split: str) -> List[float]:
    """``"969, 30, 1"`` or ``"98/2/0"`` -> three normalised fractions."""
    problem = (f"--split {split!r}: give up to three non-negative numbers with a positive sum "
               "(train, validation, test shares), e.g. --split 969,30,1")
    text = split.replace("/", ",")
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(problem) from None
    if (len(values) > 3 or not values or any(not math.isfinite(v) or v < 0 for v in values)
            or sum(values) <= 0):
        raise ValueError(problem)
    return normalize(values + [0.0] * (3 - len(values)))


def check_blend_files(paths: Optional[Union[str, Sequence[str]]], flag: str) -> None:
    """Before any process group: every prefix of ``flag``'s blend names a sound, non-empty ``.bin/.idx`` pair
    (:func:`check_indexed_files`: headers and sizes, no token data read). IndexedDatasetError names the flag,
    the file and the fix."""
    blend = parse_blend(paths, flag)
    for prefix in blend[0] if blend else ():
        try:
            header = check_indexed_files(prefix)
        except IndexedDatasetError as error:
            raise IndexedDatasetError(f"{flag} {prefix}: {error}{_prefix_hint(prefix, flag)}") from None
        if header.sequence_count == 0:
            raise IndexedDatasetError(f"{flag} {prefix}: the dataset holds no sequences (was its input empty?); "
                                      "preprocess a corpus with text in it, or drop this prefix")


def _prefix_hint(prefix: str, flag: str) -> str:
    """What a new user most likely meant when ``prefix``'s files are missing ('' when both exist)."""
    if IndexedDataset.exists(prefix):
        return ""
    stem, ext = os.path.splitext(prefix)
    if ext in (".bin", ".idx") and IndexedDataset.exists(stem):
        return f"; give the prefix without {ext}: {flag} {stem}"
    if os.path.isdir(prefix):  # a folder of datasets
        candidates = _prefixes_in(prefix, "")
    else:  # preprocess_data.py's --output-prefix without the _{key}_document it appends
        candidates = _prefixes_in(os.path.dirname(prefix), os.path.basename(prefix) + "_")
    if candidates:
        return f"; found {', '.join(candidates[:3])}: give one of those prefixes (without .bin/.idx)"
    try:
        float(prefix)
        return "; a weight goes before its prefix: WEIGHT1 PREFIX1 WEIGHT2 PREFIX2"
    except ValueError:
        return ""


def _prefixes_in(folder: str, start: str) -> List[str]:
    """The dataset prefixes (``.idx`` files) in ``folder`` whose names begin with ``start``."""
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    return [os.path.join(folder, name[:-len(".idx")]) for name in names
            if name.startswith(start) and name.endswith(".idx")]


def split_ranges(fractions: Sequence[float], num_elements: int) -> List[Tuple[int, int]]:
    """Contiguous ``[begin, end)`` ranges per split (Megatron's rounding: the last bound is exact).

    Where the rounding overshoots past a leading empty split (``0,50,50`` of 3 elements), Megatron's shift
    would give a negative bound (a range reading the last element twice); bounds are clamped at 0.
    """
    bounds = [0]
    for fraction in fractions:
        bounds.append(bounds[-1] + int(round(fraction * float(num_elements))))
    excess = bounds[-1] - num_elements
    bounds = [0] + [max(bound - excess, 0) for bound in bounds[1:]]
    return [(bounds[i], bounds[i + 1]) for i in range(len(fractions))]


def blended_sample_counts(weights: Sequence[float], num_samples: int) -> List[int]:
    return [int(math.ceil(math.ceil(num_samples * weight) * BLEND_MARGIN)) for weight in weights]


# ---- index construction ----------------------------------------------------------------------


def num_epochs_for(num_samples: int, tokens_per_epoch: int, seq_length: int, extra: int) -> int:
    """Fewest epochs whose tokens cover ``num_samples`` samples."""
    needed = num_samples * seq_length + extra
    return max(1, -(-needed // tokens_per_epoch))


def build_document_index(documents: np.ndarray, num_epochs: int, rng: np.random.RandomState) -> np.ndarray:
    """``[epochs x documents]`` int32: each epoch an independent permutation of ``documents``."""
    epochs = []
    for _ in range(num_epochs):
        order = documents.astype(np.int32, copy=True)
        rng.shuffle(order)
        epochs.append(order)
    return np.concatenate(epochs) if epochs else np.zeros(0, np.int32)


def build_shuffle_index(num_first: int, total: int, rng: np.random.RandomState) -> np.ndarray:
    """Permutation of ``[0, total)`` that shuffles ``[0, num_first)`` and ``[num_first, total)`` apart."""
    dtype = np.uint32 if total < np.iinfo(np.uint32).max - 1 else np.int64
    first = np.arange(num_first, dtype=dtype)
    rng.shuffle(first)
    last = np.arange(num_first, total, dtype=dtype)
    rng.shuffle(last)
    return np.concatenate([first, last])


def build_indices(sizes: np.ndarray, documents: np.ndarray, num_samples: int, config: GPTDatasetConfig
                  ) -> Dict[str, np.ndarray]:
    """The three index arrays of a GPTDataset (see the module docstring)."""
    seq_length, extra = config.seq_length, config.extra_tokens
    tokens_per_epoch = int(sizes[documents].sum(dtype=np.int64))
    if tokens_per_epoch <= extra:
        raise ValueError(f"the split holds {tokens_per_epoch} tokens; too few for any sample")
    num_epochs = num_epochs_for(num_samples, tokens_per_epoch, seq_length, extra)
    rng = np.random.RandomState(config.seed)
    document_index = build_document_index(documents, num_epochs, rng)  # [E * D]
    sample_index = helpers.build_sample_idx(sizes, document_index, seq_length, num_epochs, tokens_per_epoch,
                                            config.drop_last_partial_sequence, extra)  # [N + 1, 2]
    total = sample_index.shape[0] - 1
    first = total
    if config.separate_last_epoch and num_epochs > 1:
        before_last = ((num_epochs - 1) * tokens_per_epoch - extra) // seq_length
        per_epoch = (tokens_per_epoch - extra) // seq_length
        if num_samples - before_last < int(SEPARATE_LAST_EPOCH_THRESHOLD * per_epoch):
            first = before_last
    shuffle_index = build_shuffle_index(first, total, rng)  # [N]
    return {"document_index": document_index, "sample_index": sample_index, "shuffle_index": shuffle_index}


# ---- the dataset -----------------------------------------------------------------------------


class GPTDataset(torch.utils.data.Dataset):
    """``num_samples`` (or more) samples of ``seq_length + 1`` tokens from sequences ``[begin, end)``."""

    builds = 0  # index builds in this process (tests check that the cache is reused)

    def __init__(self, indexed: IndexedDataset, split_name: str, split_range: Tuple[int, int],
                 num_samples: int, config: GPTDatasetConfig, build: bool = True) -> None:
        self.indexed, self.split_name, self.config = indexed, split_name, config
        self.split_range, self.num_samples = split_range, num_samples
        self.description = self._describe()
        self.hash = hashlib.md5(self.description.encode("utf-8")).hexdigest()
        self.cache_hit = False
        arrays = self._load_or_build(build)
        self.document_index = arrays["document_index"]  # [E * D] int32
        self.sample_index = arrays["sample_index"]  # [N + 1, 2]
        self.shuffle_index = arrays["shuffle_index"]  # [N]

    def _describe(self) -> str:
        config, lengths = self.config, self.indexed.sequence_lengths
        return json.dumps({
            "class": "GPTDataset", "format": 1,
            "dataset_path": os.path.abspath(self.indexed.path_prefix),
            "sequences": int(len(lengths)), "split": self.split_name, "split_range": list(self.split_range),
            # what the indices are computed from: new data under the same prefix gets its own cache files
            "lengths_md5": self.indexed.fingerprint,
            "num_samples": self.num_samples, "seq_length": config.seq_length, "seed": config.seed,
            "add_extra_token_to_sequence": config.add_extra_token_to_sequence,
            "drop_last_partial_sequence": config.drop_last_partial_sequence,
            "separate_last_epoch": config.separate_last_epoch,
        }, indent=2, sort_keys=True)

    def cache_dir(self) -> str:
        return _cache_dir(self.indexed.path_prefix, self.config)

    def cache_files(self) -> Dict[str, str]:
        stem = os.path.join(self.cache_dir(), f"{self.hash}-GPTDataset-{self.split_name}")
        files = {kind: f"{stem}-{kind}.npy" for kind in INDEX_KINDS}
        files["description"] = f"{stem}-description.txt"
        return files

    def _load_or_build(self, build: bool) -> Dict[str, np.ndarray]:
        files = self.cache_files()
        if all(os.path.isfile(path) for path in files.values()):
            self.cache_hit = True
            return {kind: np.load(files[kind], mmap_mode="r", allow_pickle=False) for kind in INDEX_KINDS}
        if not build:
            raise DatasetCacheError(f"{files['sample_index']}: missing; rank 0 builds the dataset index "
                                    "before the barrier (is the cache directory shared by all ranks?)")
        begin, end = self.split_range
        start = time.time()
        arrays = build_indices(self.indexed.sequence_lengths, np.arange(begin, end, dtype=np.int32),
                               self.num_samples, self.config)
        GPTDataset.builds += 1
        self.build_seconds = time.time() - start
        _save_cache(files, arrays, self.description)
        return arrays

    def __len__(self) -> int:
        return int(self.shuffle_index.shape[0])

    def _tokens(self, sample: int) -> np.ndarray:
        extra = self.config.extra_tokens
        (doc_begin, offset_begin), (doc_end, offset_end) = self.sample_index[sample], self.sample_index[sample + 1]
        doc_begin, doc_end, offset_begin, offset_end = int(doc_begin), int(doc_end), int(offset_begin), int(offset_end)
        documents = self.document_index
        if doc_begin == doc_end:
            return self.indexed.get(int(documents[doc_begin]), offset_begin, offset_end - offset_begin + extra)
        pieces = [self.indexed.get(int(documents[doc_begin]), offset_begin)]
        pieces += [self.indexed.get(int(documents[d])) for d in range(doc_begin + 1, doc_end)]
        pieces.append(self.indexed.get(int(documents[doc_end]), 0, offset_end + extra))
        return np.concatenate(pieces)

    def __getitem__(self, idx: int) -> Sample:
        if not 0 <= idx < len(self):
            raise IndexError(f"sample {idx} out of range [0, {len(self)}) of the {self.split_name} split")
        tokens = self._tokens(int(self.shuffle_index[idx]))
        length = self.config.seq_length + self.config.extra_tokens
        text = torch.zeros(length, dtype=torch.int64)  # [s + 1]; a partial last sample is padded with 0
        text[:len(tokens)] = torch.from_numpy(tokens.astype(np.int64))
        sample = {"text": text}
        if self.config.fields:
            sample.update(gpt_fields(text, self.config.eod, self.config.reset_position_ids,
                                     self.config.eod_mask_loss, valid=len(tokens)))
        return sample


def _cache_dir(prefix: str, config: GPTDatasetConfig) -> str:
    """``--data-cache-path``, else ``<corpus dir>/cache/GPTDataset_indices``."""
    if config.cache_path:
        return config.cache_path
    return os.path.join(os.path.dirname(os.path.abspath(prefix)), "cache", "GPTDataset_indices")


def _save_cache(files: Dict[str, str], arrays: Dict[str, np.ndarray], description: str) -> None:
    """Write each array to a temporary name and rename it; the description goes last."""
    os.makedirs(os.path.dirname(files["description"]), exist_ok=True)
    for kind in INDEX_KINDS:
        tmp = f"{files[kind]}.tmp{os.getpid()}.npy"
        np.save(tmp, arrays[kind], allow_pickle=False)
        os.replace(tmp, files[kind])
    _replace_text(files["description"], description)


def _replace_text(path: str, text: str) -> None:
    """``text`` into ``path`` atomically: a temporary name, then a rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.replace(tmp, path)


def gpt_fields(text: torch.Tensor, eod: Optional[int] = None, reset_position_ids: bool = False,
               eod_mask_loss: bool = False, valid: Optional[int] = None) -> Sample:
    """tokens/labels/loss_mask/position_ids (each ``[s]``) from a sample's ``text`` ``[s + 1]``."""
    tokens, labels = text[:-1].clone(), text[1:].clone()  # [s], [s]
    loss_mask = torch.ones(tokens.shape, dtype=torch.float32)
    if valid is not None:
        loss_mask[max(valid - 1, 0):] = 0.0  # padding of a partial last sample
    if eod is not None and eod_mask_loss:
        loss_mask[tokens == eod] = 0.0
    position_ids = torch.arange(tokens.numel(), dtype=torch.int64)
    if eod is not None and reset_position_ids:
        previous = 0
        for end in (tokens == eod).nonzero().flatten().tolist():  # positions restart after each EOD
            position_ids[end + 1:] -= end + 1 - previous
            previous = end + 1
    return {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "position_ids": position_ids}


# ---- blending --------------------------------------------------------------------------------


class BlendedDataset(torch.utils.data.Dataset):
    """``size`` samples drawn from ``datasets`` in proportion to ``weights`` (greedy, deterministic).

    With ``weights=None`` every sample of every dataset is used once, in proportion to their sizes.
    """

    def __init__(self, datasets: Sequence[torch.utils.data.Dataset], weights: Optional[Sequence[float]],
                 size: Optional[int] = None) -> None:
        self.datasets = list(datasets)
        if weights is None:
            self.dataset_index, self.dataset_sample_index = helpers.build_exhaustive_blending_indices(
                [len(d) for d in self.datasets])
        else:
            if size is None:
                raise ValueError("a weighted blend needs its size")
            self.weights = normalize(weights)
            self.dataset_index, self.dataset_sample_index = helpers.build_blending_indices(self.weights, size)
        self._check_sizes()

    def _check_sizes(self) -> None:
        for d, dataset in enumerate(self.datasets):
            used = self.dataset_sample_index[self.dataset_index == d]
            if used.size and int(used.max()) >= len(dataset):
                raise ValueError(f"blended dataset {d} has {len(dataset)} samples, the blend needs "
                                 f"{int(used.max()) + 1}")

    def __len__(self) -> int:
        return int(self.dataset_index.shape[0])

    def __getitem__(self, idx: int) -> Sample:
        if not 0 <= idx < len(self):
            raise IndexError(f"sample {idx} out of range [0, {len(self)})")
        return self.datasets[int(self.dataset_index[idx])][int(self.dataset_sample_index[idx])]


# ---- building the three splits ---------------------------------------------------------------


def _open(prefix: str, config: GPTDatasetConfig, cache: Dict[str, IndexedDataset], build: bool) -> IndexedDataset:
    """``prefix``'s corpus, opened once per build; with ``config.scan_max_token_id`` its largest id is known."""
    if prefix not in cache:
        indexed = IndexedDataset(prefix, mmap=config.mmap)
        if config.scan_max_token_id:
            indexed.max_token_id = cached_max_token_id(indexed, _cache_dir(prefix, config), build)
        cache[prefix] = indexed
    return cache[prefix]


def max_token_id_cache_file(indexed: IndexedDataset, cache_dir: str) -> str:
    """``{cache_dir}/{key}-max_token_id.json``; the key changes when the .idx, the dtype or the .bin's size or
    ends change (the same on every rank, wherever its copy of the data lies)."""
    bin_path = get_bin_path(indexed.path_prefix)
    size = os.path.getsize(bin_path)
    with open(bin_path, "rb") as stream:
        head = stream.read(BIN_EDGE_BYTES)
        stream.seek(max(size - BIN_EDGE_BYTES, 0))
        tail = stream.read(BIN_EDGE_BYTES)
    key = json.dumps({"format": MAX_TOKEN_ID_FORMAT, "dtype": str(np.dtype(indexed.dtype)), "bin_bytes": size,
                      "idx_md5": indexed.fingerprint,
                      "bin_ends_md5": hashlib.md5(head + tail).hexdigest()}, sort_keys=True)
    return os.path.join(cache_dir, f"{hashlib.md5(key.encode('utf-8')).hexdigest()}-max_token_id.json")


def cached_max_token_id(indexed: IndexedDataset, cache_dir: str, build: bool) -> int:
    """The largest token id of ``indexed`` (-1 when empty): from its cache file, else (``build``, rank 0) scanned
    once and cached; a rank that may not build and finds no file raises DatasetCacheError."""
    path = max_token_id_cache_file(indexed, cache_dir)
    cached = _read_max_token_id(path)
    if cached is not None:
        return cached
    if not build:
        raise DatasetCacheError(f"{path}: missing; rank 0 scans the corpus for its largest token id before the "
                                "barrier (is the cache directory shared by all ranks?)")
    largest = scan_max_token_id(indexed, show_progress=True)
    tokens = int(indexed.sequence_lengths.sum(dtype=np.int64))
    _write_json(path, {"max_token_id": largest, "dataset_path": os.path.abspath(indexed.path_prefix),
                       "dtype": str(np.dtype(indexed.dtype)), "tokens": tokens})
    return largest


def _read_max_token_id(path: str) -> Optional[int]:
    """The id cached in ``path``; None when the file is absent or unreadable (then it is computed again)."""
    try:
        with open(path, encoding="utf-8") as stream:
            return int(json.load(stream)["max_token_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_json(path: str, content: dict) -> None:
    """Atomically (:func:`_replace_text`), creating the directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _replace_text(path, json.dumps(content, indent=2, sort_keys=True))


def corpus_max_token_ids(datasets: Sequence[Optional[torch.utils.data.Dataset]]) -> Dict[str, int]:
    """``{prefix: largest token id}`` of every scanned corpus behind ``datasets`` (GPT or blended; None skipped), in
    blend order."""
    found: Dict[str, int] = {}
    for dataset in datasets:
        if isinstance(dataset, BlendedDataset):
            for prefix, largest in corpus_max_token_ids(dataset.datasets).items():
                found.setdefault(prefix, largest)
        elif isinstance(dataset, GPTDataset) and dataset.indexed.max_token_id is not None:
            found.setdefault(dataset.indexed.path_prefix, dataset.indexed.max_token_id)
    return found


def _build_blend(blend: Blend, ranges_of: Callable[[IndexedDataset], Tuple[int, int]], split_name: str,
                 num_samples: int, config: GPTDatasetConfig, build: bool,
                 opened: Dict[str, IndexedDataset]) -> Optional[torch.utils.data.Dataset]:
    """One split of a blend: a GPTDataset per prefix, blended when there are several."""
    prefixes, weights = blend
    if num_samples <= 0:
        return None
    indexed = [_open(prefix, config, opened, build) for prefix in prefixes]
    ranges = [ranges_of(dataset) for dataset in indexed]
    if all(end <= begin for begin, end in ranges):
        return None
    if len(prefixes) == 1:
        return GPTDataset(indexed[0], split_name, ranges[0], num_samples, config, build)
    if weights is None:  # unweighted: in proportion to the tokens of each split
        weights = [float(d.sequence_lengths[b:e].sum(dtype=np.int64)) for d, (b, e) in zip(indexed, ranges)]
    weights = normalize(weights)
    counts = blended_sample_counts(weights, num_samples)
    parts = [GPTDataset(d, split_name, r, n, config, build)
             for d, r, n, w in zip(indexed, ranges, counts, weights) if w > 0 and r[1] > r[0]]
    kept = [w for d, r, w in zip(indexed, ranges, weights) if w > 0 and r[1] > r[0]]
    return BlendedDataset(parts, kept, num_samples)


def build_train_valid_test_datasets(config: GPTDatasetConfig, tokenizer=None, build: bool = True
                                    ) -> Tuple[Optional[torch.utils.data.Dataset], ...]:
    """(train, valid, test) datasets for ``config``; a split with no data or no samples is None.

    ``tokenizer`` (optional) supplies ``eod`` for :func:`gpt_fields` when ``config.eod`` is unset.
    ``build=False`` only loads cached indices (ranks other than 0).
    """
    if config.eod is None and tokenizer is not None and getattr(tokenizer, "eod", None) is not None:
        config.eod = int(tokenizer.eod)
    opened: Dict[str, IndexedDataset] = {}
    per_split = [parse_blend(p) for p in (config.train_data_path, config.valid_data_path, config.test_data_path)]
    blend = parse_blend(config.data_path)
    if blend is None and not any(per_split):
        raise ValueError("no data: give --data-path, or --train-data-path/--valid-data-path/--test-data-path "
                         "(or --mock-data)")
    results = []
    for index, name in enumerate(SPLIT_NAMES):
        num_samples = int(config.train_valid_test_num_samples[index])
        if blend is not None:
            fractions = parse_split(config.split or "969, 30, 1")
            ranges_of = lambda d, i=index: split_ranges(fractions, len(d))[i]  # noqa: E731
            results.append(_build_blend(blend, ranges_of, name, num_samples, config, build, opened))
        elif per_split[index] is not None:
            results.append(_build_blend(per_split[index], lambda d: (0, len(d)), name, num_samples, config,
                                        build, opened))
        else:
            results.append(None)
    return tuple(results)


def build_pretraining_datasets(data_path: Optional[Union[str, Sequence[str]]], split: Optional[str],
                               train_data_path: Optional[Union[str, Sequence[str]]],
                               valid_data_path: Optional[Union[str, Sequence[str]]],
                               test_data_path: Optional[Union[str, Sequence[str]]],
                               seq_length: int, seed: int, num_samples: Tuple[int, int, int],
                               cache_path: Optional[str] = None,
                               is_rank0_first_barrier: Optional[Callable[[], None]] = None,
                               rank: Optional[int] = None, tokenizer=None, **options
                               ) -> Tuple[Optional[torch.utils.data.Dataset], ...]:
    """The training loop's entry: (train, valid, test) for Megatron's data flags.

    Rank 0 (``rank``, default: the ``torch.distributed`` rank, 0 when not initialised) builds
    and caches the indices; then ``is_rank0_first_barrier()`` is called on every rank (pass
    ``torch.distributed.barrier`` or a group barrier; None in a single process); then the other
    ranks load the cached indices. ``options`` sets further :class:`GPTDatasetConfig` fields.
    """
    config = GPTDatasetConfig(seq_length=seq_length, seed=seed, split=split, data_path=data_path,
                              train_data_path=train_data_path, valid_data_path=valid_data_path,
                              test_data_path=test_data_path, cache_path=cache_path,
                              train_valid_test_num_samples=tuple(num_samples), **options)
    if rank is None:
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        rank = torch.distributed.get_rank() if distributed else 0
    datasets = build_train_valid_test_datasets(config, tokenizer, build=True) if rank == 0 else None
    if is_rank0_first_barrier is not None:
        is_rank0_first_barrier()
    if rank != 0:
        datasets = build_train_valid_test_datasets(config, tokenizer, build=False)
    return datasets

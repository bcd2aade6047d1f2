"""Checkpoints in Megatron's legacy layout.

    <dir>/latest_checkpointed_iteration.txt         "100" (or "release")
    <dir>/iter_0000100/mp_rank_00/model_optim_rng.pt            PP = 1
    <dir>/iter_0000100/mp_rank_01_002/model_optim_rng.pt        TP rank 1, PP rank 2
    <dir>/iter_0000100/mp_rank_01_002_001/model_optim_rng.pt    ... EP rank 1 (EP > 1, as Megatron)

Each file holds ``model`` (``model0``, ``model1``, ... per virtual chunk),
``optimizer``, ``opt_param_scheduler``, ``rng_state`` (one entry per DP
rank), ``args``, ``iteration``, ``checkpoint_version`` and the consumed
samples. Files are written under a temporary name, fsynced and renamed; once
every rank's files are written (a barrier), rank 0 writes the completion
marker ``iter_XXXXXXX/checkpoint_complete`` and then the tracker, so a crash
never leaves a checkpoint that looks complete. Without a tracker, loading takes
the newest iteration that has the marker and skips half-written ones.
Loading uses ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import argparse
import collections
import errno
import io
import os
import pickle
import re
import shutil
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from core.device import current_device

TRACKER_FILENAME = "latest_checkpointed_iteration.txt"
COMPLETE_MARKER = "checkpoint_complete"  # in iter_XXXXXXX/, written once every rank's files are
CHECKPOINT_FILENAME = "model_optim_rng.pt"
DISTRIB_OPTIM_FILENAME = "distrib_optim.pt"
CHECKPOINT_VERSION = 3.0
RELEASE = "release"

torch.serialization.add_safe_globals([argparse.Namespace])


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, incomplete or does not fit the run."""


def iteration_dir(root: str, iteration: Optional[int], release: bool = False) -> str:
    return os.path.join(root, RELEASE if release else f"iter_{iteration:07d}")


def rank_dir_name(tp_rank: int, pp_rank: int, pp_size: int, ep_rank: int = 0, ep_size: int = 1) -> str:
    name = f"mp_rank_{tp_rank:02d}"
    if pp_size > 1:
        name += f"_{pp_rank:03d}"
    if ep_size > 1:
        name += f"_{ep_rank:03d}"
    return name


def checkpoint_file(root: str, iteration: Optional[int], tp_rank: int, pp_rank: int, pp_size: int,
                    release: bool = False, ep_rank: int = 0, ep_size: int = 1) -> str:
    return os.path.join(iteration_dir(root, iteration, release),
                        rank_dir_name(tp_rank, pp_rank, pp_size, ep_rank, ep_size), CHECKPOINT_FILENAME)


def read_tracker(root: str) -> Optional[Tuple[int, bool]]:
    """(iteration, is_release) from the tracker file, or None when there is none."""
    path = os.path.join(root, TRACKER_FILENAME)
    if not os.path.isfile(path):
        return None
    text = open(path).read().strip()
    if text == RELEASE:
        return 0, True
    try:
        return int(text), False
    except ValueError:
        raise CheckpointError(f"{path}: expected an iteration number or 'release', found {text!r}; "
                              "fix or delete the tracker file") from None


def write_tracker(root: str, iteration: Optional[int], release: bool = False) -> None:
    _write_text(os.path.join(root, TRACKER_FILENAME), RELEASE if release else str(iteration))


def _write_text(path: str, text: str) -> None:
    """``text`` into ``path`` through a temporary file, fsynced before the rename and the directory after.

    Any failure removes the temporary file; an OS error (a full disk, a read-only directory) is a
    :class:`CheckpointError` naming ``path`` (:func:`_write_failure`), and ``path`` keeps its old content."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        _remove_quietly(tmp)
        raise _write_failure(path, error) from None
    _fsync_directory(os.path.dirname(path))


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _os_error_in(error: BaseException) -> Optional[OSError]:
    """The OSError behind ``error``: itself, or one in its cause/context chain (torch.save reports a failed
    write as a RuntimeError of its zip writer, the OSError as its context)."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, OSError):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def _write_failure(path: str, error: BaseException) -> BaseException:
    """What a failed write of ``path`` raises: a one-line CheckpointError for an OS error (the errno's text and
    the fix), ``error`` itself otherwise (a bug, a KeyboardInterrupt)."""
    os_error = _os_error_in(error)
    if os_error is None:
        return error
    reason = os_error.strerror or str(os_error)
    hints = {errno.ENOSPC: "free space on that disk or point --save at another one",
                  errno.EDQUOT: "free space within your quota or point --save at another disk",
                  errno.EACCES: "make the directory writable or point --save elsewhere",
                  errno.EPERM: "make the directory writable or point --save elsewhere",
                  errno.EROFS: "point --save at a writable file system"}
    fix = hints.get(os_error.errno, "check the disk or point --save elsewhere")
    return CheckpointError(f"cannot write {path}: {reason}; {fix} (the earlier checkpoints and the tracker "
                           "are unchanged)")


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        handle = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def atomic_save(obj: Any, path: str) -> None:
    """``torch.save`` to ``path`` through a temporary file in the same directory, fsynced before the rename.

    Any failure removes the temporary file (``path`` is untouched); an OS error is a one-line
    :class:`CheckpointError` naming ``path``, the error and the fix."""
    tmp = path + ".tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:  # a full disk, a read-only directory, an interrupt: no .tmp left behind
        _remove_quietly(tmp)
        raise _write_failure(path, error) from None
    _fsync_directory(os.path.dirname(path))


def mark_complete(root: str, iteration: int) -> None:
    """Record that every rank's files of ``iteration`` are written (after a barrier, before the tracker)."""
    _write_text(os.path.join(iteration_dir(root, iteration), COMPLETE_MARKER), str(iteration))


def _saved_iterations(root: str) -> List[int]:
    """The iterations with an ``iter_XXXXXXX`` directory under ``root``, complete or not, oldest first."""
    names = os.listdir(root) if os.path.isdir(root) else []
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"iter_(\d{7})", n) for n in names) if m)


def complete_iterations(root: str) -> List[int]:
    """The iterations under ``root`` whose directory holds the completion marker, oldest first."""
    return [it for it in _saved_iterations(root)
            if os.path.isfile(os.path.join(iteration_dir(root, it), COMPLETE_MARKER))]


def newest_complete_iteration(root: str) -> Optional[int]:
    """The newest complete iteration under ``root`` (None: none), warning about newer half-written ones."""
    complete = complete_iterations(root)
    newest = complete[-1] if complete else None
    for iteration in _saved_iterations(root):
        if iteration not in complete and (newest is None or iteration > newest):
            print(f"WARNING: {iteration_dir(root, iteration)} has no {COMPLETE_MARKER} marker (a save that did "
                  "not finish); skipped", file=sys.stderr, flush=True)
    return newest


def latest_iteration(root: str) -> Optional[Tuple[int, bool]]:
    """(iteration, is_release) the tracker names; without a tracker (lost), the newest complete iteration, with a
    warning; None when there is neither."""
    tracker = read_tracker(root)
    if tracker is not None:
        return tracker
    newest = newest_complete_iteration(root)
    if newest is None:
        return None
    print(f"WARNING: {root} has no {TRACKER_FILENAME}; taking its newest complete iteration {newest} "
          f"({iteration_dir(root, newest)})", file=sys.stderr, flush=True)
    return newest, False


FINITE_CHECK_ELEMENTS = 2**22  # elements tested at a time: the check's mask stays at 4 MB


def non_finite_count(tensor: torch.Tensor) -> int:
    """How many NaN / Inf values a floating-point tensor holds (0 for integer tensors), in bounded memory."""
    if not tensor.is_floating_point():
        return 0
    flat = tensor.detach().reshape(-1)
    wide = torch.float32 if flat.dtype == torch.float16 else flat.dtype  # (bf16 has fp32's range)
    if bool(torch.isfinite(flat.sum(dtype=wide))):  # NaN and Inf reach the sum: a finite sum has none (fast path)
        return 0
    return sum(int((~torch.isfinite(part)).sum()) for part in flat.split(FINITE_CHECK_ELEMENTS))


def prune_checkpoints(root: str, keep_last: int) -> List[str]:
    """Delete complete iteration directories beyond the newest ``keep_last``; returns the deleted paths.

    Runs after the tracker names the newest, so neither it nor a save in progress (no marker) is touched.
    """
    doomed = [iteration_dir(root, it) for it in complete_iterations(root)[:-keep_last]] if keep_last > 0 else []
    for path in doomed:
        shutil.rmtree(path)
    return doomed


class StoredTensor:
    """A tensor already written into a :class:`StreamingCheckpoint`: its record key, dtype and shape."""

    def __init__(self, key: str, dtype: torch.dtype, shape: Tuple[int, ...]) -> None:
        self.key, self.dtype, self.shape = key, dtype, shape


class _StoredStorage:
    def __init__(self, stored: StoredTensor) -> None:
        self.stored = stored


class _StreamingPickler(pickle.Pickler):
    """Pickles :class:`StoredTensor` s as ``torch.save`` pickles tensors (``_rebuild_tensor_v2`` of a
    persistent ``("storage", <Dtype>Storage, key, "cpu", numel)``), so ``torch.load`` rebuilds them."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StoredStorage):
            stored = obj.stored
            storage_type = getattr(torch, torch.storage._dtype_to_storage_type_map()[stored.dtype])
            return ("storage", storage_type, stored.key, "cpu", _numel(stored.shape))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, StoredTensor):
            shape = torch.Size(obj.shape)
            stride = torch.empty(0).new_empty_strided(shape, _contiguous_strides(obj.shape), device="meta").stride()
            return torch._utils._rebuild_tensor_v2, (_StoredStorage(obj), 0, shape, stride, False,
                                                     collections.OrderedDict())
        return NotImplemented


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class StreamingCheckpoint:
    """A ``torch.save``-compatible file written one tensor at a time (memory: one tensor, not the file).

    ``add(tensor)`` writes the tensor's bytes as the zip record ``data/<key>`` at once and returns a
    :class:`StoredTensor` to put in the object; ``close(obj)`` pickles ``obj`` (``data.pkl``, written
    last: ``torch.load`` finds records by name) and renames the temporary file to ``path``, as
    :func:`atomic_save`. ``torch.load`` (also ``weights_only`` and ``mmap``) reads it like any
    ``torch.save`` file.
    """

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.path, self.tmp = path, path + ".tmp"
        self._opener = torch.serialization._open_zipfile_writer(self.tmp)
        self._zip = self._opener.__enter__()
        self._count = 0

    def add(self, tensor: torch.Tensor) -> StoredTensor:
        tensor = tensor.detach().contiguous()
        storage = tensor.untyped_storage()
        if tensor.storage_offset() or storage.nbytes() != tensor.nbytes:  # a view: its own bytes only, not copied
            start = tensor.storage_offset() * tensor.element_size()
            storage = storage[start:start + tensor.nbytes]
        key = str(self._count)
        self._count += 1
        self._zip.write_record(f"data/{key}", storage, tensor.nbytes)
        return StoredTensor(key, tensor.dtype, tuple(tensor.shape))

    def close(self, obj: Any) -> None:
        buffer = io.BytesIO()
        _StreamingPickler(buffer, protocol=torch.serialization.DEFAULT_PROTOCOL).dump(obj)
        data = buffer.getvalue()
        self._zip.write_record("data.pkl", data, len(data))
        self._zip.write_record(".format_version", "1", len("1"))
        alignment = str(torch.serialization._get_storage_alignment())
        self._zip.write_record(".storage_alignment", alignment, len(alignment))
        self._zip.write_record("byteorder", sys.byteorder, len(sys.byteorder))
        self._opener.__exit__(None, None, None)
        os.replace(self.tmp, self.path)


def load_file(path: str) -> Dict[str, Any]:
    """Load one checkpoint file safely, with an error that names the file."""
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file {path} is missing; the checkpoint is incomplete or was written "
                              "with another parallel layout (convert it with tools/convert_ckpt.py)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, bad pickle, wrong magic ...
        raise CheckpointError(f"checkpoint file {path} is truncated or corrupt ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200]}); load an earlier iteration or re-save it") from None


def map_file(path: str) -> Dict[str, Any]:
    """Like :func:`load_file`, but memory-mapped: tensors are read only when touched.

    A file not in torch's zip format (legacy, or damaged) is read whole by ``load_file``,
    which also names the problem.
    """
    if os.path.isfile(path):
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception:  # not mappable: load_file reads it or raises a CheckpointError naming it
            pass
    return load_file(path)


class OpaqueObject:
    """An object of a class this program does not know, loaded from another program's checkpoint
    (numpy RNG states, enums in Megatron's ``args``): it keeps its constructor arguments and state
    and runs no code of that class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self.args!r}>"


def _opaque_class(qualified_name: str) -> type:
    module, _, name = qualified_name.rpartition(".")
    return type(name, (OpaqueObject,), {"__module__": f"opaque.{module}"})


def map_foreign_file(path: str) -> Dict[str, Any]:
    """:func:`map_file` for a file written by Megatron-LM or MindSpeed-LLM: the classes it pickles
    besides tensors and plain values load as :class:`OpaqueObject` s (still ``weights_only``: no code
    from the file runs). CheckpointError naming the file when it cannot be read."""
    if not os.path.isfile(path):
        return load_file(path)  # names the missing file
    try:
        unknown = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a zip checkpoint: load_file reads it or names the problem
        return load_file(path)
    allowed = {f"{obj.__module__}.{obj.__qualname__}" for obj in torch.serialization.get_safe_globals()
               if not isinstance(obj, tuple)}
    stand_ins = [(_opaque_class(name), name) for name in unknown if name not in allowed]
    try:
        with torch.serialization.safe_globals(stand_ins):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        raise CheckpointError(f"checkpoint file {path} cannot be read ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200]})") from None




def read_checkpoint_settings(root: str) -> Tuple[str, argparse.Namespace, Dict[str, Any]]:
    """(file, ``args``, ``transformer_config``) of the latest checkpoint under ``root``, read on the CPU
    from its first rank file (memory-mapped: the weights are not read). CheckpointError when there is
    no checkpoint or it stores no ``transformer_config``."""
    if not os.path.isdir(root):
        raise CheckpointError(f"--load {root}: no such directory; pass the directory of a checkpoint")
    tracker = latest_iteration(root)
    if tracker is None:
        raise CheckpointError(misplaced_checkpoint(root) or
                              f"--load {root} has no {TRACKER_FILENAME}: no checkpoint to take the model "
                              "arguments from; pass a checkpoint directory or the architecture flags")
    iteration, release = tracker
    directory = iteration_dir(root, iteration, release)
    ranks = sorted(n for n in (os.listdir(directory) if os.path.isdir(directory) else [])
                   if n.startswith("mp_rank_"))
    path = os.path.join(directory, ranks[0] if ranks else rank_dir_name(0, 0, 1), CHECKPOINT_FILENAME)
    from core import dist_checkpointing  # (here: torch.distributed.checkpoint takes seconds to import)

    if not ranks and dist_checkpointing.is_dist_checkpoint(directory):  # its settings are in common.pt
        path = os.path.join(directory, dist_checkpointing.COMMON_FILENAME)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file {path} is missing; the checkpoint named by {TRACKER_FILENAME} "
                              "is incomplete")
    checkpoint = map_file(path)
    config = checkpoint.get("transformer_config")
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} stores no transformer_config (written by an older converter?); pass the "
                              "architecture flags instead, or re-convert it with tools/convert_ckpt.py")
    return path, checkpoint.get("args") or argparse.Namespace(), dict(config)


def namespace_for_checkpoint(args: argparse.Namespace) -> argparse.Namespace:
    """A copy of the run's arguments with only plain values (loadable with weights_only)."""
    plain = (bool, int, float, str, type(None), list, tuple)
    kept = {}
    for key, value in vars(args).items():
        if isinstance(value, torch.dtype):
            kept[key] = str(value).replace("torch.", "")
        elif isinstance(value, plain):
            kept[key] = value
    return argparse.Namespace(**kept)


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def gather_rng_states(rng_state: Dict[str, Any], dp_group: Any) -> list:
    """Every DP rank's RNG states, in DP rank order (each rank resumes its own).

    States travel as ``torch.save`` bytes in uint8 tensors (``all_gather_object``
    cannot carry tensors in this torch version).
    """
    if dp_group.size == 1:
        return [rng_state]
    buffer = io.BytesIO()
    torch.save(rng_state, buffer)
    device = current_device()  # nccl/hccl collectives need device tensors
    payload = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8).to(device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dp_group.size)]
    dist.all_gather(sizes, torch.tensor([payload.numel()], device=device), group=dp_group.handle)
    longest = int(max(size.item() for size in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[:payload.numel()] = payload
    gathered = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(dp_group.size)]
    dist.all_gather(gathered, padded, group=dp_group.handle)
    return [torch.load(io.BytesIO(t[:int(n.item())].cpu().numpy().tobytes()), weights_only=True)
            for t, n in zip(gathered, sizes)]


def save_checkpoint(root: str, iteration: int, payload: Dict[str, Any], *, tp_rank: int, pp_rank: int,
                    pp_size: int, dp_rank: int, is_global_rank0: bool,
                    extra_files: Optional[Dict[str, Any]] = None, ep_rank: int = 0, ep_size: int = 1,
                    keep_last: int = 0) -> str:
    """Write this model-parallel rank's file and any ``extra_files`` beside it (``dp_rank`` 0 only: the
    expert-data-parallel rank, one writer per TP x PP x EP rank), then, once every rank is done, the
    completion marker and the tracker (global rank 0), and with ``keep_last`` prune older iterations."""
    path = checkpoint_file(root, iteration, tp_rank, pp_rank, pp_size, ep_rank=ep_rank, ep_size=ep_size)
    if dp_rank == 0:
        for filename, content in (extra_files or {}).items():
            atomic_save(content, os.path.join(os.path.dirname(path), filename))
        atomic_save({**payload, "iteration": iteration, "checkpoint_version": CHECKPOINT_VERSION}, path)
    barrier()
    if is_global_rank0:  # every rank's files are complete and fsynced: the marker, then the tracker
        publish_iteration(root, iteration, keep_last)
    barrier()
    return path


def publish_iteration(root: str, iteration: int, keep_last: int = 0) -> None:
    """Once every rank's files of ``iteration`` are complete: the marker, then the tracker, then (with
    ``keep_last``) the pruning of older iterations. Global rank 0 only."""
    mark_complete(root, iteration)
    write_tracker(root, iteration)
    if keep_last:
        prune_checkpoints(root, keep_last)


def find_checkpoint(root: str, tp_rank: int, pp_rank: int, pp_size: int, ep_rank: int = 0,
                    ep_size: int = 1) -> Optional[Tuple[str, int, bool]]:
    """(file, iteration, is_release) of the latest checkpoint under ``root``, or None when it has none.

    ``root`` itself must exist: a missing ``--load`` directory is an error, an empty one is not.
    """
    if not os.path.isdir(root):
        raise CheckpointError(f"--load {root}: no such directory; check the path (or drop --load to start "
                              "from scratch)")
    tracker = latest_iteration(root)
    if tracker is None:
        return None
    iteration, release = tracker
    path = checkpoint_file(root, iteration, tp_rank, pp_rank, pp_size, release=release, ep_rank=ep_rank,
                           ep_size=ep_size)
    if not os.path.isfile(path):
        _reject_other_layout(path, iteration_dir(root, iteration, release), pp_size, ep_size)
    return path, iteration, release


def misplaced_checkpoint(root: str) -> Optional[str]:
    """Why ``root``, a directory without a checkpoint of ours, is the wrong ``--load`` (None: it is merely empty):
    one iteration of a checkpoint (its parent is the checkpoint) or a Hugging Face model (to convert first)."""
    name, parent = os.path.basename(os.path.normpath(root)), os.path.dirname(os.path.normpath(root))
    if re.fullmatch(r"iter_\d{7}|" + RELEASE, name) and os.path.isfile(os.path.join(parent, TRACKER_FILENAME)):
        return f"--load {root} is one iteration of the checkpoint {parent}; give --load {parent}"
    names = os.listdir(root) if os.path.isdir(root) else []
    if "config.json" in names or any(n.endswith(".safetensors") for n in names):
        return (f"--load {root} is a Hugging Face model, not a checkpoint of this suite; convert it first: "
                f"python tools/convert_ckpt.py --load-model-type hf --save-model-type mg --load-dir {root} "
                "--save-dir DIR --model-type-hf FAMILY, then --load DIR")
    return None


RESHARD_HINT = ("re-shard it with tools/convert_ckpt.py --load-model-type mg --save-model-type mg "
                "--target-tensor-parallel-size ... --target-pipeline-parallel-size ... --target-expert-parallel-size ...")


def _reject_other_layout(path: str, directory: str, pp: int, ep: int) -> None:
    """A missing rank file next to rank files of another TP/PP/EP layout: say which, and how to convert."""
    if not os.path.isdir(directory):  # the tracker names an iteration that is not there
        _reject_missing_iteration(os.path.dirname(directory), directory)
    names = sorted(n for n in (os.listdir(directory) if os.path.isdir(directory) else [])
                   if re.fullmatch(r"mp_rank_\d+(?:_\d+)*", n))
    if not names:
        return  # nothing to compare with; load_file reports the missing file
    first = os.path.join(directory, names[0], CHECKPOINT_FILENAME)
    saved = map_file(first).get("args") if os.path.isfile(first) else None
    sizes = " ".join(f"{flag} {getattr(saved, dest, None) or 1}" for flag, dest in LAYOUT_FLAGS[:3])
    raise CheckpointError(
        f"{path} is missing: {directory} was saved with {sizes} (rank directories {', '.join(names[:4])}"
        f"{', ...' if len(names) > 4 else ''}), this run uses --pipeline-model-parallel-size {pp} "
        f"--expert-model-parallel-size {ep}; {RESHARD_HINT}")


def _reject_missing_iteration(root: str, directory: str) -> None:
    """The tracker of ``root`` names ``directory``, which does not exist: an error naming the tracker and the
    complete iterations there are (resuming from another one silently would retrain or skip steps)."""
    tracker, complete = os.path.join(root, TRACKER_FILENAME), complete_iterations(root)
    fix = (f"the complete iterations are {', '.join(map(str, complete))}: write one of them into the tracker, or "
           "delete it to resume from the newest" if complete else
           "it holds no complete iteration: delete the tracker to start from scratch")
    raise CheckpointError(f"{tracker} names {os.path.basename(directory)}, which does not exist; {fix}")


LAYOUT_FLAGS = (("--tensor-model-parallel-size", "tensor_model_parallel_size"),
                ("--pipeline-model-parallel-size", "pipeline_model_parallel_size"),
                ("--expert-model-parallel-size", "expert_model_parallel_size"),
                ("--expert-tensor-parallel-size", "expert_tensor_parallel_size"))


def check_layout(checkpoint: Dict[str, Any], path: str, tp: int, pp: int, vpp: int = 1, ep: int = 1,
                 etp: Optional[int] = None) -> None:
    """The checkpoint's TP/PP/EP/expert-TP/VPP must be this run's (else the user converts it first)."""
    saved = checkpoint.get("args")
    ours = (tp, pp, ep, etp or tp)
    theirs = tuple(int(getattr(saved, dest, None) or mine) for (_, dest), mine in zip(LAYOUT_FLAGS[:3], ours))
    theirs += (int(getattr(saved, "expert_tensor_parallel_size", None) or theirs[0]),)
    if theirs != ours:
        raise CheckpointError(
            f"{path} was saved with " + " ".join(f"{flag} {n}" for (flag, _), n in zip(LAYOUT_FLAGS, theirs)) +
            ", this run uses " + " ".join(f"{flag} {n}" for (flag, _), n in zip(LAYOUT_FLAGS, ours)) +
            f"; {RESHARD_HINT}")
    saved_vpp = len(model_keys(checkpoint)) or 1
    if saved_vpp != vpp:
        raise CheckpointError(
            f"{path} holds {saved_vpp} virtual pipeline chunk(s), this run has {vpp}; match "
            "--num-layers-per-virtual-pipeline-stage or convert it with tools/convert_ckpt.py "
            "--num-layers-per-virtual-pipeline-stage ...")


def model_keys(checkpoint: Dict[str, Any]) -> List[str]:
    """The model state-dict keys of a checkpoint: ``model``, or ``model0``, ``model1``, ... (virtual pipeline)."""
    if "model" in checkpoint:
        return ["model"]
    chunks = sorted((k for k in checkpoint if k.startswith("model") and k[5:].isdigit()), key=lambda k: int(k[5:]))
    return chunks


def model_state_dicts(models: Sequence[Any]) -> Dict[str, Dict[str, Any]]:
    """``{"model": ...}`` for one chunk, ``{"model0": ..., "model1": ...}`` per virtual chunk (Megatron)."""
    if len(models) == 1:
        return {"model": models[0].state_dict()}
    return {f"model{i}": model.state_dict() for i, model in enumerate(models)}


def load_model_state_dicts(models: Sequence[Any], checkpoint: Dict[str, Any]) -> None:
    """Load each chunk's weights (strict); KeyError/RuntimeError when they do not fit."""
    keys = ["model"] if len(models) == 1 else [f"model{i}" for i in range(len(models))]
    for model, key in zip(models, keys):
        model.load_state_dict(checkpoint[key], strict=True)

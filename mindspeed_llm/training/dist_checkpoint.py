"""The trainer's ``--ckpt-format torch_dist`` saves and loads (the format: core/dist_checkpointing.py).

:func:`save` writes the model, the optimizer's per-parameter state (layout-free
keys) and each rank's RNG states with DCP, and the rest (arguments, scheduler,
counters, the optimizer's scalars, the layout it was saved at) in ``common.pt``;
with ``--async-save`` the write runs in the background and the tracker moves
when it is done (:class:`core.dist_checkpointing.AsyncSaves`).

:func:`load` reads them back at whatever layout this run has. RNG states
resume only at the layout they were saved at (another layout has other
streams: they start from ``--seed``, which the log says).
"""
from __future__ import annotations

import io
import os
import argparse
from typing import Any, Dict, List, Optional, Protocol, Sequence

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException

from core import checkpointing
from core import dist_checkpointing as dcp_format
from core.data_parallel import DataParallelModels
from core.parallel_state import ParallelState
from core.tensor_parallel.random import get_all_rng_states
from core.transformer.config import TransformerConfig
from mindspeed_llm.runtime import check_saved_settings
from mindspeed_llm.training.train_state import TrainState



class CheckpointedRun(Protocol):
    """What a save or a load reads of the run (the trainer has it): its flags, process groups, model config and
    chunks, counters, optimizer and data-parallel wrapper, train state and background saves."""

    args: argparse.Namespace
    state: ParallelState
    config: TransformerConfig
    models: List[torch.nn.Module]
    iteration: int
    optimizer: Any  # the optimizer of ``dp``
    dp: DataParallelModels
    train_state: TrainState
    async_saves: dcp_format.AsyncSaves
    transforms: Sequence[Any]  # the run's model transforms (mindspeed_llm/transforms): their dist_state hooks


def _where(trainer: CheckpointedRun) -> dcp_format.RankCoordinates:
    state = trainer.state
    return dcp_format.RankCoordinates(state.tp_rank, state.tp, state.ep_group.rank)


def _tied(trainer: CheckpointedRun) -> bool:
    return not trainer.config.untie_embeddings_and_output_weights


def layout_tag(trainer: CheckpointedRun) -> str:
    """The layout a rank's RNG streams belong to."""
    s = trainer.state
    return f"tp{s.tp}_pp{s.pp}_vpp{len(trainer.models)}_cp{s.cp}_ep{s.ep}_dp{s.dp}_world{s.world_size}"


def _rng_key(trainer: CheckpointedRun) -> str:
    return f"rng.{layout_tag(trainer)}.rank{trainer.state.rank}"


def _rng_bytes() -> bytes:
    buffer = io.BytesIO()
    torch.save(get_all_rng_states(), buffer)
    return buffer.getvalue()


TRANSFORM_PREFIX = "transform."  # a model transform's state (FP8's amax histories): transform.<its key>


def _on_any_rank(kinds: List[str]) -> List[str]:
    """The optimizer state kinds some rank saves (collective)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return kinds
    every_rank: List[List[str]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(every_rank, kinds)
    return sorted({kind for listed in every_rank for kind in listed})


def _common(trainer: CheckpointedRun, kinds: list, with_optimizer: bool) -> Dict[str, Any]:
    args = trainer.args
    return {"args": checkpointing.namespace_for_checkpoint(args),
            "iteration": trainer.iteration, "checkpoint_version": checkpointing.CHECKPOINT_VERSION,
            **trainer.train_state.save(),  # the RNG states are per-rank pieces (save below)
            "transformer_config": trainer.config.to_dict(),
            "optimizer": trainer.optimizer.scalars() if with_optimizer else None,
            "optimizer_kinds": kinds, "layout": layout_tag(trainer)}


def save(trainer: CheckpointedRun) -> str:
    """Write iteration ``trainer.iteration`` to ``--save`` (collective); returns its directory."""
    args, state = trainer.args, trainer.state
    trainer.dp.finish_param_sync()
    trainer.async_saves.wait()  # at most one save in flight
    with_optimizer = not args.no_save_optim
    host = trainer.async_saves.host if args.async_save else None  # a synchronous save writes the tensors as they are
    pieces, kinds = dcp_format.state_to_save(trainer.dp, _where(trainer), _tied(trainer), with_optimizer, host)
    kinds = _on_any_rank(kinds)  # rank 0 writes the list; another rank may hold kinds it has none of (Muon)
    if not args.no_save_rng:
        pieces[_rng_key(trainer)] = dcp_format.bytes_pieces(_rng_bytes())
    if with_optimizer:  # the transforms' run state (FP8's amax histories) resumes with the optimizer's
        for transform in trainer.transforms:
            for key, tensor in transform.dist_state(trainer.models).items():
                pieces[TRANSFORM_PREFIX + key] = dcp_format.whole_pieces(TRANSFORM_PREFIX + key, tensor, host)
    directory = checkpointing.iteration_dir(args.save, trainer.iteration)
    if state.rank == 0:
        os.makedirs(directory, exist_ok=True)
        dcp_format.write_common(directory, _common(trainer, kinds, with_optimizer), checkpointing.atomic_save)
    iteration, keep_last = trainer.iteration, args.ckpt_keep_last or 0

    def publish() -> None:
        if state.rank == 0:  # every rank's files are written (DCP's metadata comes last)
            checkpointing.publish_iteration(args.save, iteration, keep_last)

    if args.async_save:
        trainer.async_saves.start(dcp_format.save_in_background(directory, pieces), iteration, publish)
        return directory
    dcp_format.save(directory, pieces)
    checkpointing.barrier()
    publish()
    checkpointing.barrier()
    return directory


def load(trainer: CheckpointedRun, directory: str, iteration: int, release: bool) -> None:
    """Resume (or, with --finetune or a release checkpoint, take the weights) from a torch_dist directory."""
    args = trainer.args
    common = _read_common(directory)
    check_saved_settings(common.get("transformer_config"), trainer.config, directory)
    weights_only = args.finetune or release or args.no_load_optim or common.get("optimizer") is None
    _check_optimizer(trainer, common, directory, weights_only)
    kinds = None if weights_only else common.get("optimizer_kinds", [])
    try:
        metadata = dcp_format.read_metadata(directory)
        weights, states = dcp_format.load_into(directory, trainer.dp, _where(trainer), _tied(trainer), kinds,
                                               metadata)
    except KeyError as error:
        raise checkpointing.CheckpointError(
            f"{directory} has no tensor {error.args[0]!r} that this model needs; check the model flags against the "
            "checkpoint's (or --use-checkpoint-args)") from None
    except dcp_format.DamagedCheckpoint as error:
        raise checkpointing.CheckpointError(f"{error}: the checkpoint is damaged; load an earlier iteration "
                                            "(point the tracker at it) or re-save it") from None
    except ValueError as error:
        raise checkpointing.CheckpointError(f"{directory}: {error}; check the model flags against the "
                                            "checkpoint's (or --use-checkpoint-args)") from None
    except CheckpointException as error:
        raise checkpointing.CheckpointError(f"{directory} cannot be read ({dcp_format.error_line(error)}); the "
                                            "checkpoint files are damaged: load an earlier iteration") from None
    if trainer.dp.windowed_model:  # its shares were read in place
        trainer.dp.finish_model_windows(weights)
    else:
        trainer.dp.load_named_weights(weights)
    if weights_only:
        trainer.dp.reload_model_params()
    else:
        _load_transform_states(trainer, directory, metadata)
        if trainer.dp.windowed_optimizer:  # its shares were read in place
            trainer.dp.finish_optimizer_windows(common["optimizer"], dcp_format.FP32_PARAM in kinds)
        else:
            trainer.dp.load_named_optimizer_states(states, common["optimizer"])
    if not (args.finetune or release):
        trainer.train_state.load(common, iteration, directory, args, schedule=not weights_only,
                                 rng_states=_read_rng(trainer, directory, common, metadata))


def _load_transform_states(trainer: CheckpointedRun, directory: str, metadata: Any) -> None:
    """Each transform's :meth:`dist_state` tensors that the checkpoint holds, read and handed back (collective:
    every rank reads, in the transforms' order)."""
    stored = dcp_format.stored_keys(metadata)
    for transform in trainer.transforms:
        targets = {key: torch.empty(tensor.shape, dtype=tensor.dtype)
                   for key, tensor in transform.dist_state(trainer.models).items() if TRANSFORM_PREFIX + key in stored}
        dcp_format.load(directory, {TRANSFORM_PREFIX + key: dcp_format.LocalPieces(target.shape,
                                                                                   [((0,) * target.dim(), target)])
                                    for key, target in targets.items()}, metadata)
        transform.load_dist_state(trainer.models, targets, directory)


def _read_common(directory: str) -> Dict[str, Any]:
    path = os.path.join(directory, dcp_format.COMMON_FILENAME)
    if not os.path.isfile(path):
        raise checkpointing.CheckpointError(f"{path} is missing: {directory} is not a complete torch_dist "
                                            "checkpoint; load an earlier iteration")
    return checkpointing.load_file(path)


def _check_optimizer(trainer: CheckpointedRun, common: Dict[str, Any], directory: str, weights_only: bool) -> None:
    """The optimizer's kind must match to resume its state (the layout and the sharding may differ)."""
    saved = getattr(common.get("args"), "optimizer", None)
    if not weights_only and saved is not None and saved != trainer.args.optimizer:
        raise checkpointing.CheckpointError(
            f"{directory} holds the state of --optimizer {saved}, this run uses {trainer.args.optimizer}; match "
            "the flag or add --no-load-optim to load the weights only")


def _read_rng(trainer: CheckpointedRun, directory: str, common: Dict[str, Any], metadata: Any) -> Optional[Any]:
    """This rank's RNG states saved at this layout (None: --no-load-rng, or none there, which rank 0 notes)."""
    if trainer.args.no_load_rng:
        return None
    payload = dcp_format.read_bytes(directory, _rng_key(trainer), metadata)  # collective
    if payload is not None:
        return torch.load(io.BytesIO(payload), weights_only=True)
    if trainer.state.rank == 0:
        why = (f"was saved at layout {common.get('layout')}, this run is {layout_tag(trainer)}"
               if common.get("layout") != layout_tag(trainer) else "holds no RNG states (--no-save-rng)")
        print(f"note: {directory} {why}: the RNG streams (dropout) start from --seed {trainer.args.seed}", flush=True)

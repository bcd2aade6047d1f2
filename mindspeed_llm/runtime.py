"""What every entry shares before its own work starts: flags -> devices -> process groups -> model chunks -> weights.

Training (``training/training.py``), generation and evaluation (``inference/loading.py``), DPO's and GRPO's
reference models and GRPO's reward model (``posttrain/pairwise.py``) all come through here:

* :func:`tokenizer_and_vocab` builds the tokenizer (and the vocabulary size from it);
* :func:`start_processes`: :func:`init_distributed` picks the device and starts the default process group
  under torchrun, :func:`process_groups` builds the layout's groups (``core/parallel_state.py``) from the flags;
* :func:`build_chunks` builds this pipeline rank's model chunks (one per virtual stage) on the meta device,
  applies the given hooks there (the model transforms' build hooks) and initialises them;
* :func:`load_model_weights` is the one checkpoint spine: find this rank's file of a checkpoint directory,
  check its TP/PP/EP layout and its architecture settings against the model (:func:`check_saved_settings`),
  load the weights, and turn a misfit into one "weights do not fit" line. It returns the loaded file so that
  training can resume the rest of the run from it (``training/train_state.py``).

``print_rank_0`` / ``print_rank_last`` print on the first / last rank (or in a single process).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from core import checkpointing
from core.device import Accelerator, device_problem, init_accelerator
from core.models.gpt_model import GPTModel, MetaHook, build_model_chunks
from core.parallel_state import ParallelState, expert_dimension, initialize
from core.pipeline_parallel.layout import Placement, stage_layers
from core.transformer.config import TransformerConfig, architecture_settings
from core.transformer.context_parallel import ulysses_degree
from mindspeed_llm.arguments import ArgumentError, config_field_flag, same_setting, set_vocab_size
from mindspeed_llm.tokenizer import build_tokenizer


def is_last_rank() -> bool:
    """The last rank holds the loss (or this is the only process)."""
    return not dist.is_initialized() or dist.get_rank() == dist.get_world_size() - 1


def print_rank_last(message: str) -> None:
    if is_last_rank():
        print(message, flush=True)


def print_rank_0(message: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


# ---- devices and process groups ------------------------------------------------------------------
def check_device(args: argparse.Namespace) -> None:
    """--device names an accelerator this machine has, one per local process (before any process group)."""
    problem = device_problem(args.device)
    if problem is not None:
        raise ArgumentError(problem)


def distributed_timeout(args: argparse.Namespace) -> timedelta:
    """--distributed-timeout-minutes: how long a collective may wait before the job ends with an error."""
    return timedelta(minutes=args.distributed_timeout_minutes)


def init_distributed(args: argparse.Namespace) -> Accelerator:
    """Choose the device and start the default process group when launched by torchrun."""
    acc = init_accelerator(args.device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend=args.distributed_backend or acc.backend, timeout=distributed_timeout(args))
    return acc


def process_groups(args: argparse.Namespace, backend: str) -> ParallelState:
    """Every group of the flags' layout (TP, PP, CP with its Ulysses split, EP, expert TP, VPP). Collective."""
    return initialize(tp=args.tensor_model_parallel_size, pp=args.pipeline_model_parallel_size,
                      cp=args.context_parallel_size, expert_tp=args.expert_tensor_parallel_size,
                      ulysses=ulysses_degree(args.context_parallel_algo, args.context_parallel_size,
                                             args.ulysses_degree_in_cp),
                      ep=expert_dimension(args.tensor_model_parallel_size, args.expert_model_parallel_size,
                                          args.expert_tensor_parallel_size),
                      vpp=args.virtual_pipeline_model_parallel_size, backend=backend,
                      timeout=distributed_timeout(args))


def start_processes(args: argparse.Namespace) -> Tuple[Accelerator, ParallelState]:
    """The device, the default process group and the layout's groups (``--distributed-backend`` defaults to the
    device's)."""
    acc = init_distributed(args)
    args.distributed_backend = args.distributed_backend or acc.backend
    return acc, process_groups(args, args.distributed_backend)


# ---- model chunks ---------------------------------------------------------------------------------
def placement(args: argparse.Namespace, state: ParallelState, virtual: bool = True) -> Placement:
    """The layers of every pipeline stage (``virtual``: split into the --num-layers-per-virtual-pipeline-stage
    chunks; otherwise one chunk per rank)."""
    vpp = args.virtual_pipeline_model_parallel_size if virtual else None
    return stage_layers(args.num_layers, state.pp, vpp, args.num_layer_list)


def build_chunks(args: argparse.Namespace, config: TransformerConfig, state: ParallelState, device: torch.device,
                 meta_hooks: Sequence[MetaHook] = (), virtual: bool = True) -> List[GPTModel]:
    """This pipeline rank's model chunks, built on meta, changed by ``meta_hooks`` there, then initialised from
    ``--seed`` on ``device`` (independently of TP/PP)."""
    return build_model_chunks(config, state, device, args.seed, placement(args, state, virtual),
                              meta_hooks=meta_hooks)


# ---- the checkpoint spine ----------------------------------------------------------------------------
def check_saved_settings(saved: Optional[Dict[str, Any]], config: TransformerConfig, path: str) -> None:
    """Refuse a checkpoint whose architecture settings differ from the flags in ways shapes do not show."""
    if not saved:  # same shapes, other layout (Megatron's interleaved linear_qkv): refuse, do not scramble
        raise checkpointing.CheckpointError(
            f"{path} stores no transformer_config: it was not written by this suite (Megatron-LM and MindSpeed-LLM "
            "lay out linear_qkv differently); convert it with tools/convert_ckpt.py --load-model-type megatron "
            "--save-model-type mg")
    stored = architecture_settings(saved)
    for name, value in architecture_settings(config.to_dict()).items():
        if name in stored and not same_setting(stored[name], value):
            raise checkpointing.CheckpointError(
                f"{path} was trained with {config_field_flag(name)} {stored[name]!r}, this run has {value!r}; "
                "pass the checkpoint's value or --use-checkpoint-args")


@dataclass
class LoadedCheckpoint:
    """This rank's file of a checkpoint: where it is, which iteration, and what it holds."""
    path: str
    iteration: int
    release: bool
    content: Dict[str, Any]


@dataclass(frozen=True)
class WeightSource:
    """A checkpoint directory to load, and how its failures read.

    ``flag``: None for the run's own ``--load`` (messages start with the file), else the flag that named the
    directory (``--ref-model``: messages start with it); ``missing``: the line when the directory has no tracker
    file (None: return None, the caller decides); ``misfit``: what the weights were meant for and the hint (None:
    the loader's own errors stand); ``check_settings``: compare the architecture settings it stores."""
    directory: str
    flag: Optional[str] = None
    missing: Optional[str] = None
    misfit: Optional[str] = "this model"
    hint: str = "; check the model flags against the checkpoint's"
    check_settings: bool = True

    def label(self, path: str) -> str:
        return path if self.flag is None else f"{self.flag} {path}"


def find_rank_file(directory: str, state: ParallelState) -> Optional[tuple]:
    """(file, iteration, is_release) of this rank's part of the latest checkpoint under ``directory``, or None."""
    return checkpointing.find_checkpoint(directory, state.tp_rank, state.pp_rank, state.pp, state.ep_group.rank,
                                         state.ep)


def read_checked(source: WeightSource, found: tuple, chunks: Sequence[torch.nn.Module], args: argparse.Namespace,
                 state: ParallelState, check: Callable[[Dict[str, Any], str], None] = lambda content, path: None
                 ) -> LoadedCheckpoint:
    """This rank's file read and checked: ``check`` (the caller's own rule), then the layout, then the settings."""
    path, iteration, release = found
    content = checkpointing.load_file(path)
    check(content, path)
    checkpointing.check_layout(content, path, state.tp, state.pp, len(chunks), args.expert_model_parallel_size,
                               args.expert_tensor_parallel_size or state.tp)
    if source.check_settings:
        check_saved_settings(content.get("transformer_config") or None, chunks[0].config, source.label(path))
    return LoadedCheckpoint(path, iteration, release, content)


def load_model_weights(chunks: Sequence[torch.nn.Module], source: WeightSource, args: argparse.Namespace,
                       state: ParallelState, load: Optional[Callable[[Dict[str, Any], str], None]] = None,
                       check: Callable[[Dict[str, Any], str], None] = lambda content, path: None,
                       found: Optional[tuple] = None) -> Optional[LoadedCheckpoint]:
    """Load this rank's part of ``source`` into ``chunks`` (``load``: how; default strict, chunk by chunk) after
    the checks of :func:`read_checked`; the loaded file, or None when there is no checkpoint and
    ``source.missing`` is None. ``found``: the file already located (:func:`find_rank_file`)."""
    found = found or find_rank_file(source.directory, state)
    if found is None:
        if source.missing is None:
            return None
        raise checkpointing.CheckpointError(source.missing)
    loaded = read_checked(source, found, chunks, args, state, check)
    load = load or (lambda content, path: checkpointing.load_model_state_dicts(chunks, content))
    if source.misfit is None:
        load(loaded.content, loaded.path)
        return loaded
    try:
        load(loaded.content, loaded.path)
    except (RuntimeError, KeyError) as error:
        raise checkpointing.CheckpointError(f"{source.label(loaded.path)}: weights do not fit {source.misfit} "
                                            f"({str(error).splitlines()[0][:300]}){source.hint}") from None
    return loaded


def tokenizer_and_vocab(args: argparse.Namespace) -> Any:
    """The run's tokenizer; the model's vocabulary is the tokenizer's unless --vocab-size is given."""
    tokenizer = build_tokenizer(args)
    if args.vocab_size is None:
        set_vocab_size(args, tokenizer.vocab_size)
    return tokenizer

"""LoRA in the trainer: flags -> :class:`~core.tensor_parallel.lora.LoraConfig`, adapter checkpoints.

``--lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2`` (with ``--lora-r``, default 16,
``--lora-alpha``, default 32, ``--lora-dropout``, default 0) trains tensor-parallel adapters on those linears
of every decoder layer with the base model frozen (``core/tensor_parallel/lora.py`` describes the layers,
the TP split and the parameter names); ``--lora-modules-to-save word_embeddings output_layer`` trains
those modules fully beside them (with tied embeddings, ``word_embeddings`` includes the last pipeline
stage's copy; ``output_layer`` needs ``--untie-embeddings-and-output-weights``). It works with any task
(``posttrain.py --stage sft``, pretraining) and the DDP layouts: TP (with SP), PP (with
zero-bubble), DP with the distributed optimizer, recompute (tested; CP and VPP are not tested with LoRA yet).
FSDP is refused for now (one line). ``--qlora`` stores the targeted base linears as NF4 (``qlora.py``).

Checkpoints:

* ``--load BASE`` reads the base weights only (a converted Hugging Face model, usually with
  ``--finetune``); the adapters are not in it and start from their initialisation.
* ``--save DIR`` writes Megatron's layout (``iter_N/mp_rank_XX[_YYY]/model_optim_rng.pt``, one file per
  TP x PP rank, as the model's) holding only the trainable parameters (adapters and modules to save,
  each rank's own pieces), their optimizer state, the schedule, the RNG states and a ``lora`` record
  (rank, alpha, targets, modules to save).
* ``--lora-load DIR`` reads such a checkpoint over the base: the adapters, and unless
  ``--no-load-optim`` / ``--no-load-rng`` the optimizer, the schedule, the iteration and the RNG
  states, so ``--load BASE --lora-load DIR`` resumes a LoRA run exactly. An adapter checkpoint of
  another rank, other targets or other modules to save is refused in one line.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

from core import checkpointing
from core.tensor_parallel.lora import LoraConfig, LoraTargetError, adapter_state_dict, check_targets, is_adapter
from mindspeed_llm.arguments import ArgumentError

DEFAULT_R, DEFAULT_ALPHA = 16, 32.0
LORA_RECORD = "lora"  # the checkpoint entry describing the adapters


def lora_config_from_args(args: argparse.Namespace) -> Optional[LoraConfig]:
    """The adapters this run trains (None without ``--lora-target-modules``)."""
    if not args.lora_target_modules:
        return None
    return LoraConfig(r=args.lora_r or DEFAULT_R,
                      alpha=float(args.lora_alpha if args.lora_alpha is not None else DEFAULT_ALPHA),
                      dropout=float(args.lora_dropout or 0.0), target_modules=tuple(args.lora_target_modules),
                      modules_to_save=tuple(args.lora_modules_to_save or ()))


def check_lora_targets(args: argparse.Namespace, config: Any) -> None:
    """Every ``--lora-target-modules`` name is a column/row-parallel linear of the whole model (built on the
    meta device, one process): ArgumentError otherwise. No process group is needed."""
    if not args.lora_target_modules:
        return
    from core.models.gpt_model import GPTModel, layout_state

    from mindspeed_llm.posttrain.qlora import check_qlora_targets

    with torch.device("meta"):
        model = GPTModel(config, layout_state())
    check_qlora_targets(args, model)  # --qlora: linear layers only (its own message)
    try:
        check_targets(model.decoder, args.lora_target_modules)
    except LoraTargetError as error:
        raise ArgumentError(str(error)) from None


def adapter_model_state(models: Sequence[nn.Module], model_state: Dict[str, Dict[str, torch.Tensor]]
                        ) -> Dict[str, Dict[str, torch.Tensor]]:
    """The checkpoint's model entries (``model`` or ``model0``, ...) cut to the trainable parameters."""
    keys = checkpointing.model_keys(model_state)
    return {key: adapter_state_dict(model, model_state[key]) for model, key in zip(models, keys)}


def load_base_weights(models: Sequence[nn.Module], checkpoint: Dict[str, Any], path: str) -> None:
    """The base checkpoint's weights into every chunk; only the adapters may be missing from it."""
    for model, key in zip(models, checkpointing.model_keys(checkpoint) or ["model"]):
        if LORA_RECORD in checkpoint:
            raise checkpointing.CheckpointError(f"--load {path} holds LoRA adapters, not a base model; pass the "
                                                "base model with --load and the adapters with --lora-load")
        result = model.load_state_dict(checkpoint[key], strict=False)
        missing = [name for name in result.missing_keys if not is_adapter(name)]
        if missing or result.unexpected_keys:
            extra = result.unexpected_keys
            raise checkpointing.CheckpointError(
                f"{path}: weights do not fit this model (missing {missing[:3]}, unexpected {extra[:3]}); check "
                "the model flags against the checkpoint's")


def _check_record(saved: Optional[Dict[str, Any]], config: LoraConfig, path: str) -> None:
    if not isinstance(saved, dict):
        raise checkpointing.CheckpointError(f"--lora-load {path} holds no LoRA adapters (no '{LORA_RECORD}' entry); "
                                            "pass a checkpoint saved by a run with --lora-target-modules")
    ours = config.record()
    for key, flag in (("r", "--lora-r"), ("target_modules", "--lora-target-modules"),
                      ("modules_to_save", "--lora-modules-to-save")):
        if saved.get(key) != ours[key]:
            theirs, mine = (" ".join(v) if isinstance(v, list) else v for v in (saved.get(key), ours[key]))
            raise checkpointing.CheckpointError(
                f"--lora-load {path} was trained with {flag} {theirs}, this run has {mine}; pass the adapters' "
                "value")


def load_adapter_weights(models: Sequence[nn.Module], checkpoint: Dict[str, Any], path: str) -> None:
    """The adapter checkpoint's tensors into the trainable parameters (exactly those, shapes checked)."""
    for model, key in zip(models, checkpointing.model_keys(checkpoint) or ["model"]):
        params = {name: param for name, param in model.named_parameters() if param.requires_grad}
        saved = checkpoint[key]
        if set(saved) != set(params):
            raise checkpointing.CheckpointError(
                f"--lora-load {path}: its adapters {sorted(set(saved) - set(params))[:2]} / this model's "
                f"{sorted(set(params) - set(saved))[:2]} differ; check the model and LoRA flags")
        with torch.no_grad():
            for name, param in params.items():
                if tuple(saved[name].shape) != tuple(param.shape):
                    raise checkpointing.CheckpointError(
                        f"--lora-load {path}: {name} is {tuple(saved[name].shape)}, this model's is "
                        f"{tuple(param.shape)}; check the model and LoRA flags")
                param.copy_(saved[name].to(param.device, param.dtype))


def load_adapters(trainer: Any) -> None:
    """``--lora-load``: the adapters, and (unless --no-load-optim / --no-load-rng) the optimizer, the schedule,
    the iteration and the RNG states of an adapter checkpoint."""
    from core.tensor_parallel.random import set_all_rng_states

    args, state = trainer.args, trainer.state
    root = args.lora_load
    if not os.path.isdir(root) or checkpointing.read_tracker(root) is None:
        raise checkpointing.CheckpointError(f"--lora-load {root}: no adapter checkpoint there (no "
                                            f"{checkpointing.TRACKER_FILENAME}); pass a directory --save wrote")
    path, iteration, _ = checkpointing.find_checkpoint(root, state.tp_rank, state.pp_rank, state.pp,
                                                             state.ep_group.rank, state.ep)
    checkpoint = checkpointing.load_file(path)
    _check_record(checkpoint.get(LORA_RECORD), trainer.lora, path)
    checkpointing.check_layout(checkpoint, path, state.tp, state.pp, len(trainer.models),
                               args.expert_model_parallel_size, args.expert_tensor_parallel_size or state.tp)
    load_adapter_weights(trainer.models, checkpoint, path)
    if args.no_load_optim or checkpoint.get("optimizer") is None:
        trainer.dp.reload_model_params()
    else:
        trainer._load_optimizer(checkpoint, path)
        trainer._load_scheduler(checkpoint, path)
    trainer.iteration = iteration
    trainer.consumed_samples = int(checkpoint.get("consumed_train_samples", 0))
    trainer.skipped_iterations = int(checkpoint.get("skipped_iterations", 0))
    if not args.no_load_rng and checkpoint.get("rng_state") is not None:
        rng = checkpoint["rng_state"]
        set_all_rng_states(rng[state.dp_rank] if state.dp_rank < len(rng) else rng[0])


def trainable_share(models: List[nn.Module]) -> float:
    """The trainable parameters' share of this rank's parameters."""
    total = sum(p.numel() for model in models for p in model.parameters())
    trained = sum(p.numel() for model in models for p in model.parameters() if p.requires_grad)
    return trained / max(total, 1)

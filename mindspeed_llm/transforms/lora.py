"""LoRA as a model transform: flags -> :class:`~core.tensor_parallel.lora.LoraConfig`, adapter checkpoints.

``--lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2`` (with ``--lora-r``, default 16,
``--lora-alpha``, default 32, ``--lora-dropout``, default 0) trains tensor-parallel adapters on those linears
of every decoder layer with the base model frozen (``core/tensor_parallel/lora.py`` describes the layers,
the TP split and the parameter names); ``--lora-modules-to-save word_embeddings output_layer`` trains
those modules fully beside them (with tied embeddings, ``word_embeddings`` includes the last pipeline
stage's copy; ``output_layer`` needs ``--untie-embeddings-and-output-weights``). It works with any task
(``posttrain.py --stage sft``, pretraining) and the DDP layouts: TP (with SP), PP (with
zero-bubble), DP with the distributed optimizer, recompute (tested; CP and VPP are not tested with LoRA yet).
It also works under FSDP (``--use-torch-fsdp2``, ``--use-torch-fsdp``, HSDP): the frozen base is sharded but
gets no gradient or optimizer state; each layer's adapters form their own fp32 FSDP unit, so ``--bf16``'s
compute dtype reaches the base weights only; the checkpoints below are the same files and keys as without
FSDP (loaded into and gathered from the shards by ``core/distributed/fsdp.py``'s full-state-dict helpers), so
adapters move between FSDP and DDP runs. ``--qlora`` stores the targeted base linears as NF4 (``qlora.py``);
with FSDP it is refused (its NF4 buffers cannot be sharded).

Checkpoints:

* ``--load BASE`` reads the base weights only (a converted Hugging Face model, usually with
  ``--finetune``); the adapters are not in it and start from their initialisation.
* ``--save DIR`` writes Megatron's layout (``iter_N/mp_rank_XX[_YYY]/model_optim_rng.pt``, one file per
  TP x PP rank, as the model's) holding only the trainable parameters (adapters and modules to save,
  each rank's own pieces), their optimizer state, the schedule, the RNG states and a ``lora`` record
  (rank, alpha, targets, modules to save).
* ``--lora-load DIR`` reads such a checkpoint over the base: the adapters, and unless
  ``--no-load-optim`` / ``--no-load-rng`` the optimizer, the schedule, the iteration and the RNG
  states, so ``--load BASE --lora-load DIR`` resumes a LoRA run exactly. ``--finetune`` keeps Megatron's
  meaning (and MindSpeed's, which merges the adapter state dict into the base's before it applies): the
  adapters' weights only, from iteration 0 with a fresh optimizer, to train them further in a new stage.
  (The base itself is always read as weights only under LoRA.) An adapter checkpoint of
  another rank, other targets or other modules to save is refused in one line.
* ``--lora-load DIR`` also takes a PEFT adapter directory (``adapter_config.json`` +
  ``adapter_model.safetensors``, e.g. one ``tools/convert_ckpt.py --save-lora-to-hf`` wrote or one trained by
  PEFT on the Hugging Face model): its per-projection adapters are fused into ours exactly
  (``mindspeed_llm/transforms/peft_format.py``), with the model's family from the base checkpoint
  (``--use-checkpoint-args``), and training starts at iteration 0 with fresh optimizer state. Its ``r``,
  ``lora_alpha`` and ``target_modules`` must be those of ``--lora-r``, ``--lora-alpha`` and
  ``--lora-target-modules`` (in HF names); otherwise one line. When q/k/v (gate/up) share ``lora_A`` they fuse
  into our rank-r adapter; when each has its own (PEFT's usual adapter) that target takes the exact block form
  of rank 3r (2r) (``LoraConfig.module_ranks``, recorded in the checkpoints this run saves). A sequence
  classifier's adapter (``task_type`` SEQ_CLS, e.g. a reward model exported by ``--save-lora-to-hf``) loads into
  ``--stage orm`` with its ``score`` head as the value head (into another stage it is refused); a causal LM's
  adapter loaded into ``--stage orm`` leaves the value head freshly initialised.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from core import checkpointing
from core.distributed.fsdp import load_full_model_state_dict, named_fsdp_params
from core.models.gpt_model import GPTModel, layout_state
from core.tensor_parallel.param_meta import param_meta
from core.tensor_parallel.lora import LoraConfig, LoraTargetError, add_lora, check_targets, is_adapter
from mindspeed_llm.arguments import ArgumentError, transformer_config_from_args
from mindspeed_llm.models.registry import RegistryError, TensorContext, find_rule, get_family, to_ours
from mindspeed_llm.runtime import LoadedCheckpoint, WeightSource, load_model_weights
from mindspeed_llm.transforms import peft_format
from mindspeed_llm.transforms.base import ModelTransform, TransformContext, register_transform

DEFAULT_R, DEFAULT_ALPHA = 16, 32.0
LORA_RECORD = "lora"  # the checkpoint entry describing the adapters
VALUE_HEAD = "value_head.weight"  # a reward model's score head (--stage orm), trained beside the adapters


def lora_config_from_args(args: argparse.Namespace) -> Optional[LoraConfig]:
    """The adapters this run trains (None without ``--lora-target-modules``)."""
    if not args.lora_target_modules:
        return None
    config = LoraConfig(r=args.lora_r or DEFAULT_R,
                        alpha=float(args.lora_alpha if args.lora_alpha is not None else DEFAULT_ALPHA),
                        dropout=float(args.lora_dropout or 0.0), target_modules=tuple(args.lora_target_modules),
                        modules_to_save=tuple(args.lora_modules_to_save or ()))
    if args.lora_load and peft_format.is_peft_dir(args.lora_load):
        config = dataclasses.replace(config, module_ranks=peft_module_ranks(args, config))
    elif args.lora_load and os.path.isdir(args.lora_load) and checkpointing.read_tracker(args.lora_load):
        config = dataclasses.replace(config, module_ranks=_saved_module_ranks(args))
    return config


def _saved_module_ranks(args: argparse.Namespace) -> Tuple[Tuple[str, int], ...]:
    """The block-form ranks an adapter checkpoint records (a run that started from a PEFT adapter)."""
    found = checkpointing.find_checkpoint(args.lora_load, 0, 0, args.pipeline_model_parallel_size)
    if found is None or not os.path.isfile(found[0]):
        return ()
    record = checkpointing.load_file(found[0]).get(LORA_RECORD)
    return tuple(sorted((record.get("module_ranks") or {}).items())) if isinstance(record, dict) else ()


def check_lora_targets(args: argparse.Namespace, model: nn.Module) -> None:
    """Every ``--lora-target-modules`` name is a column/row-parallel linear of ``model`` (the whole model, built
    on the meta device in one process): ArgumentError otherwise. No process group is needed."""
    try:
        check_targets(model.decoder, args.lora_target_modules)
    except LoraTargetError as error:
        raise ArgumentError(str(error)) from None


def trainable_shapes(model: nn.Module) -> Dict[str, Tuple[int, ...]]:
    """Checkpoint name -> TP-local shape of every trainable parameter (under FSDP the unsharded shape)."""
    info = getattr(model, "fsdp_info", None)
    return {name: tuple(info.specs[name].shape if info is not None else param.shape)
            for name, param in named_fsdp_params(model) if param.requires_grad}


@torch.no_grad()
def load_non_strict(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> Any:
    """``load_state_dict(strict=False)`` (a base without adapters, adapters without the base); a model under
    FSDP takes the full TP-local tensors into its shards. Returns the missing and unexpected names."""
    if getattr(model, "fsdp_info", None) is not None:
        return load_full_model_state_dict(model, state_dict, strict=False)  # collective under FSDP1
    return model.load_state_dict(state_dict, strict=False)


def adapter_model_state(models: Sequence[nn.Module], model_state: Dict[str, Dict[str, torch.Tensor]]
                        ) -> Dict[str, Dict[str, torch.Tensor]]:
    """The checkpoint's model entries (``model`` or ``model0``, ...) cut to the trainable parameters."""
    result = {}
    for model, key in zip(models, checkpointing.model_keys(model_state)):
        trained = trainable_shapes(model)
        result[key] = {name: value for name, value in model_state[key].items() if name in trained}
    return result


def load_base_weights(models: Sequence[nn.Module], checkpoint: Dict[str, Any], path: str) -> None:
    """The base checkpoint's weights into every chunk; only the adapters may be missing from it."""
    for model, key in zip(models, checkpointing.model_keys(checkpoint) or ["model"]):
        if LORA_RECORD in checkpoint:
            raise checkpointing.CheckpointError(f"--load {path} holds LoRA adapters, not a base model; pass the "
                                                "base model with --load and the adapters with --lora-load")
        result = load_non_strict(model, checkpoint[key])
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
        shapes = trainable_shapes(model)
        saved = checkpoint[key]
        if set(saved) != set(shapes):
            raise checkpointing.CheckpointError(
                f"--lora-load {path}: its adapters {sorted(set(saved) - set(shapes))[:2]} / this model's "
                f"{sorted(set(shapes) - set(saved))[:2]} differ; check the model and LoRA flags")
        for name, shape in shapes.items():
            if tuple(saved[name].shape) != shape:
                raise checkpointing.CheckpointError(
                    f"--lora-load {path}: {name} is {tuple(saved[name].shape)}, this model's is {shape}; check the "
                    "model and LoRA flags")
        load_non_strict(model, saved)  # the frozen base is "missing"


def load_adapters(context: TransformContext, lora: LoraConfig) -> Optional[LoadedCheckpoint]:
    """``--lora-load``: the adapters of an adapter checkpoint, which the trainer then resumes the run's state
    from (the optimizer, the schedule, the iteration and the RNG states; with ``--finetune`` nothing more); or
    a PEFT directory's adapters (nothing to resume)."""
    args, state = context.args, context.state
    root = args.lora_load
    if peft_format.is_peft_dir(root):
        load_peft_adapters(context, lora, root)
        return None
    missing = (f"--lora-load {root}: no adapter checkpoint there (no {checkpointing.TRACKER_FILENAME}); pass a "
               "directory --save wrote")
    if not os.path.isdir(root) or checkpointing.read_tracker(root) is None:
        raise checkpointing.CheckpointError(missing)
    source = WeightSource(root, flag="--lora-load", missing=missing, misfit=None, check_settings=False)
    loaded = load_model_weights(context.models, source, args, state,
                                load=lambda content, path: load_adapter_weights(context.models, content, path),
                                check=lambda content, path: _check_record(content.get(LORA_RECORD), lora, path))
    return loaded


def _peft_rule_of(args: argparse.Namespace, config: Any, root: str) -> peft_format.RuleOf:
    """Our weight name -> (rule, HF names with HF layer numbers), from the family the base checkpoint records."""
    family_name = getattr(args, "model_type_hf", None)
    if not family_name:
        raise checkpointing.CheckpointError(f"--lora-load {root} is a PEFT adapter, but the model's Hugging Face "
                                            "family is unknown; load the converted base with --use-checkpoint-args")
    try:
        rules = get_family(family_name).rules(config)
    except RegistryError as error:
        raise checkpointing.CheckpointError(f"--lora-load {root}: {error}") from None
    real = [i for i in range(config.num_layers) if i not in set(config.noop_layers)]
    hf_layer = {str(ours): str(hf) for hf, ours in enumerate(real)}  # noop layers have no HF counterpart

    def rule_of(name: str) -> Tuple[Any, Tuple[str, ...]]:
        match = re.match(r"^decoder\.layers\.(\d+)\.", name)
        renamed = f"decoder.layers.{hf_layer[match.group(1)]}.{name[match.end():]}" if match else name
        return find_rule(rules, renamed)

    return rule_of


def _peft_context_of(config: Any, model: nn.Module) -> peft_format.ContextOf:
    """Our weight name -> what its row transform needs (the fused weight's segment sizes)."""
    params = dict(named_fsdp_params(model))

    def context_of(name: str) -> TensorContext:
        shard = param_meta(params[name]).tp_shard
        splits = tuple(seg.size for seg in shard.segments) if shard is not None else ()
        return TensorContext(splits, config.vocab_size, config.padded_vocab_size, config)

    return context_of


def _whole_model(config: Any, lora: LoraConfig, tp: int) -> nn.Module:
    """The whole model with adapters, on the meta device (names and shapes of every layer's adapters)."""
    with torch.device("meta"):
        model = GPTModel(config, layout_state(tp))
    add_lora(model, lora)
    return model


def peft_module_ranks(args: argparse.Namespace, lora: LoraConfig) -> Tuple[Tuple[str, int], ...]:
    """The targets whose adapters take the block form (rank k r) to hold a PEFT adapter whose fused
    projections have their own ``lora_A`` (``--lora-load`` of a PEFT directory); () otherwise."""
    root = args.lora_load
    config = transformer_config_from_args(args)
    try:
        peft_format.read_config(root)
        tensors = peft_format.read_weights(root)
    except peft_format.PeftFormatError as error:
        raise checkpointing.CheckpointError(str(error)) from None
    model = _whole_model(config, lora, args.tensor_model_parallel_size)
    modules = peft_format.adapted_modules(name for name, _ in model.named_parameters())
    return peft_format.fused_ranks(tensors, modules, _peft_rule_of(args, config, root), lora.r)


def _check_peft_config(peft: Dict[str, Any], lora: LoraConfig, targets: List[str], root: str) -> None:
    """r, alpha and targets of a PEFT adapter against this run's flags (one line each)."""
    if lora.modules_to_save:
        raise checkpointing.CheckpointError(f"--lora-load {root} is a PEFT adapter of the adapters alone; drop "
                                            "--lora-modules-to-save")
    for key, flag, theirs, mine in (("r", "--lora-r", peft.get("r"), lora.r),
                                    ("lora_alpha", "--lora-alpha", peft.get("lora_alpha"), lora.alpha),
                                    ("target_modules", "--lora-target-modules", sorted(peft["target_modules"]),
                                     targets)):
        if theirs != mine and not (key == "lora_alpha" and float(theirs) == float(mine)):
            shown = [" ".join(v) if isinstance(v, list) else v for v in (theirs, mine)]
            raise checkpointing.CheckpointError(
                f"--lora-load {root} is a PEFT adapter with {key} {shown[0]}, this run has {flag} "
                f"{' '.join(lora.target_modules) if key == 'target_modules' else mine}"
                f"{f' (HF {shown[1]})' if key == 'target_modules' else ''}; pass the adapter's value")


def load_peft_adapters(context: TransformContext, lora: LoraConfig, root: str) -> None:
    """``--lora-load`` of a PEFT adapter directory: the per-projection adapters fused exactly into this rank's
    pieces of ours (training starts at iteration 0, the optimizer fresh)."""
    state = context.state
    try:
        peft = peft_format.read_config(root)
        tensors = peft_format.read_weights(root)
        rule_of = _peft_rule_of(context.args, context.config, root)
        whole = _whole_model(context.config, lora, state.tp)
        targets = peft_format.hf_targets(peft_format.adapted_modules(n for n, _ in whole.named_parameters()), rule_of)
        _check_peft_config(peft, lora, targets, root)
        ranks = {name[:-len(".lora_A.weight")]: p.shape[0] for name, p in whole.named_parameters()
                 if name.endswith(".lora_A.weight")}
        for model in context.models:
            modules = peft_format.adapted_modules(name for name, _ in named_fsdp_params(model))
            context_of = _peft_context_of(context.config, model)
            full = peft_format.from_peft(tensors, modules, rule_of, context_of, ranks.__getitem__, root)
            params, shapes, local = dict(named_fsdp_params(model)), trainable_shapes(model), {}
            full.update(_peft_score_head(peft, tensors, rule_of, context_of, context.config, shapes, root))
            for name, shape in shapes.items():
                if name not in full and name == VALUE_HEAD:  # a causal LM's adapter: the reward head stays new
                    continue
                shard = param_meta(params[name]).tp_shard
                local[name] = shard.shard(full[name], state.tp_rank, state.tp) if shard is not None else full[name]
                if tuple(local[name].shape) != shape:
                    raise checkpointing.CheckpointError(
                        f"--lora-load {root}: {name} is {tuple(local[name].shape)} from the adapter, this model's "
                        f"is {shape}; the adapter was trained on another model")
            load_non_strict(model, local)
    except peft_format.PeftFormatError as error:
        raise checkpointing.CheckpointError(str(error)) from None
    context.reload_weights()


def _peft_score_head(peft: Dict[str, Any], tensors: Dict[str, torch.Tensor], rule_of: peft_format.RuleOf,
                     context_of: peft_format.ContextOf, config: Any, shapes: Dict[str, Tuple[int, ...]],
                     root: str) -> Dict[str, torch.Tensor]:
    """A sequence classifier's PEFT adapter (``task_type`` SEQ_CLS): its saved score head as the reward model's
    value head (``--stage orm``; {} on a pipeline stage without the head); refused for a language model."""
    if not peft_format.is_sequence_classifier(peft):
        return {}
    if not config.value_head:
        raise checkpointing.CheckpointError(f"--lora-load {root} is a sequence classifier's PEFT adapter (task_type "
                                            "SEQ_CLS, with its score head); load it into a reward model with "
                                            "--stage orm")
    if VALUE_HEAD not in shapes:
        return {}
    rule, hf_names = rule_of(VALUE_HEAD)
    keys = [peft_format.module_key(hf) for hf in hf_names]
    missing = [key for key in keys if key not in tensors]
    if missing:
        raise checkpointing.CheckpointError(f"--lora-load {root} is a SEQ_CLS PEFT adapter without {missing[0]} "
                                            "(its score head); save it with the score in modules_to_save")
    return {VALUE_HEAD: to_ours(rule, [tensors[key] for key in keys], context_of(VALUE_HEAD))}


def trainable_share(models: List[nn.Module]) -> float:
    """The trainable parameters' share of this rank's parameters."""
    total = sum(p.numel() for model in models for p in model.parameters())
    trained = sum(p.numel() for model in models for p in model.parameters() if p.requires_grad)
    return trained / max(total, 1)


class LoraTransform(ModelTransform):
    """LoRA: adapters attached on meta to the targeted linears (the base frozen); the run's checkpoints hold the
    trainable parameters and the ``lora`` record; ``--load`` is the base, ``--lora-load`` the adapters."""

    name = "lora"
    freezes_base = True
    trainable_state_only = True

    def __init__(self, config: LoraConfig) -> None:
        self.config = config

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Optional["LoraTransform"]:
        config = lora_config_from_args(args)
        return None if config is None else cls(config)

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        check_lora_targets(args, meta_model())

    def on_meta_model(self, model: nn.Module) -> None:
        add_lora(model, self.config)

    def save_state(self, payload: Dict[str, Any], models: Sequence[nn.Module]) -> Dict[str, Any]:
        """The model entries cut to the trainable parameters (in place: the payload keeps its order), the record."""
        keys = checkpointing.model_keys(payload)
        payload.update(adapter_model_state(models, {key: payload[key] for key in keys}))
        payload[LORA_RECORD] = self.config.record()
        return payload

    def load_base(self, models: Sequence[nn.Module], content: Dict[str, Any], path: str) -> bool:
        load_base_weights(models, content, path)  # the adapters come from --lora-load
        return True

    def after_load(self, context: TransformContext) -> Optional[LoadedCheckpoint]:
        return load_adapters(context, self.config) if context.args.lora_load else None


register_transform(LoraTransform.name, LoraTransform.from_args)

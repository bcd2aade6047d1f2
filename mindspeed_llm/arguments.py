"""Command-line flags of the training entries, with Megatron/MindSpeed names.

A user's Megatron-LM or MindSpeed-LLM script ports unchanged: the flags keep
their names (``--tensor-model-parallel-size``, ``--lr-decay-style``,
``--tokenizer-type PretrainedFromHF``, ...) and the parsed attributes keep
argparse's names (dashes become underscores), as in Megatron.

    args = parse_args(sys.argv[1:])          # flags, YAML defaults, derived fields
    validate_args(args, world_size)          # one pass, ArgumentError on misuse
    config = transformer_config_from_args(args)

or, in a ``main``, ``args = parse_and_validate(sys.argv[1:], world_size, entry)``,
which prints ``error: <message>`` and exits with status 2 on a bad
combination.

Each entry point parses its own flags (:func:`build_parser`): the shared groups
added once by :func:`add_shared_args` and the entry's row of
``mindspeed_llm.entry_flags.ENTRY_GROUPS`` (``pretrain_gpt.py``, ``posttrain.py
--stage dpo``, ``inference.py``, ...; a training task names its row). A flag of
another entry is argparse's "unrecognized arguments", with a hint naming the
entries that have it. Without ``entry``, :func:`parse_args` takes every entry's
flags (:func:`all_flags_parser`, for library callers and tests of the shared
validation).

``--yaml-cfg FILE`` reads a YAML mapping whose keys are flag names, written
with dashes or underscores (``num-layers: 2`` or ``num_layers: 2``). Its
values become defaults, so a flag given on the command line wins. A key that
names no flag of the entry is an error naming the file and the key (and the
entries whose flag it is).

Derived fields, set by ``parse_args``: ``params_dtype``, ``num_query_groups``
(``None`` unless ``--group-query-attention``), ``ffn_hidden_size`` (Megatron's
default), ``max_position_embeddings`` (defaults to ``--seq-length``),
``lr_decay_iters`` (defaults to ``--train-iters``), ``lr_warmup_iters`` (from
``--lr-warmup-fraction`` when given), ``padded_vocab_size`` and
``explicit_args`` (the values given on the command line or in the YAML file,
before derivation). ``validate_args`` adds ``world_size``,
``data_parallel_size``, ``global_batch_size`` (default: micro batch x DP) and
``num_micro_batches``.

``distributed_backend`` stays ``None`` when neither it nor ``--device`` is
given: the caller then asks ``core.device.default_backend()``.

Every flag either acts or is refused (DESIGN.md, principle 13). ``validate_args``
is the one pass, before any process group exists: it refuses the flags of
features not built yet (``REFUSED_FLAGS``, one table, naming the issue that adds
them), flags given without the flag that makes them act (``DEPENDENT_FLAGS``),
bad recompute, logging and scheduler combinations, and runs the model config's
own checks (``TransformerConfig``, with a placeholder vocabulary when the
tokenizer gives the real one later). YAML values pass through the same checks.
``tests/unit/test_flag_coverage.py`` fails on a flag that nothing reads and
that no table refuses. The tokenizer and pipeline-layout groups come from
:mod:`mindspeed_llm.flags`, shared with ``tools/preprocess_data.py`` and
``tools/convert_ckpt.py``.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
import warnings
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import yaml

from core.device import BACKEND_FOR_DEVICE, DEVICE_TYPES, device_for_backend
from core.optimizer.muon import MUON_MATMUL_PRECISIONS, MUON_SCALE_MODES, MUON_TP_MODES
from core.parallel_state import expert_dimension, validate_degrees
from core.pipeline_parallel.layout import LayoutError, resolve_virtual_pipeline, stage_layers
from core.transformer.config import (ACTIVATION_SWITCHES, FIELD_DEFAULT, QK_NORM_SWITCHES, TransformerConfig,
                                     activation_from_switches, architecture_fields, field_flag, field_spec,
                                     pad_vocab_size, qk_norm_from_switches, switches_off, upgrade_legacy_settings)
from core.transformer.context_parallel import (ATTENTION_MASK_TYPES, CP_ALGORITHMS, HYBRID, RING, ULYSSES,
                                               sequence_divisor, ulysses_degree)
from core.transformer.swap_attention import DEFAULT_SWAP_MODULES, parse_swap_modules
from mindspeed_llm.entry_flags import ENTRY_GROUPS, PRETRAIN, every_group, flag_owners
from mindspeed_llm.flags import (TOKENIZER_TYPES, ArgumentError, FlagParser, IntList, add_pipeline_layout_args,
                                 add_tokenizer_args, tokenizer_error)

__all__ = ["ArgumentError", "REFUSED_FLAGS", "TOKENIZER_TYPES", "add_shared_args", "all_flags_parser", "build_parser",
           "check_pretraining_data", "check_pretraining_files",
           "parse_and_validate", "parse_args", "set_vocab_size", "transformer_config_from_args", "validate_args"]

LR_DECAY_STYLES = ("constant", "linear", "cosine", "inverse-square-root", "WSD")
WSD_DECAY_STYLES = ("linear", "cosine", "exponential", "minus_sqrt")
REQUIRED_FLAGS = ("num_layers", "hidden_size", "num_attention_heads", "seq_length",
                  "micro_batch_size", "train_iters", "lr")
POSITIVE_FLAGS = ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "micro_batch_size",
                  "log_interval", "tensorboard_log_interval", "tensorboard_queue_size", "pad_to_multiple_of",
                  "max_skipped_iterations")
NON_NEGATIVE_FLAGS = ("num_workers", "eval_iters")
INSTALL_HINT = "pip install -e .[{extra}]"


def _flag(dest: str) -> str:
    """The flag that sets ``dest``: its spelling, or the one flag of another spelling (``--muon-no-split-qkv``)."""
    return _FLAGS_SPELLED_OTHERWISE.get(dest, "--" + dest.replace("_", "-"))


_FLAGS_SPELLED_OTHERWISE = {"muon_split_qkv": "--muon-no-split-qkv"}


# --------------------------------------------------------------------------- the config table's flags

def config_flag_dest(config_field: Field) -> str:
    """The attribute a config field's flag sets (``--disable-bias-linear`` -> ``disable_bias_linear``)."""
    return str(field_spec(config_field).flag).lstrip("-").replace("-", "_")


def table_flag_fields(title: Optional[str] = None) -> List[Field]:
    """The TransformerConfig fields that have a flag (in argument group ``title``, when given)."""
    return [f for f in fields(TransformerConfig)
            if field_spec(f).flag is not None and title in (None, field_spec(f).group)]


def _flag_options(config_field: Field) -> Dict[str, Any]:
    """argparse's keywords for a config field's flag: its action, type, default, choices and help."""
    spec, default = field_spec(config_field), config_field.default
    options: Dict[str, Any] = {"dest": config_flag_dest(config_field), "help": spec.help}
    if isinstance(default, bool):  # a switch; --x/--no-x when it defaults to on under its own name
        on_by_default = default and not switches_off(config_field)
        options.update(action=argparse.BooleanOptionalAction if on_by_default else "store_true", default=on_by_default)
        return options
    if isinstance(default, tuple):  # numbers (--no-rope-layers 0 3, --ssm-multipliers 1 1 1 1 1), or one text
        options.update(type=spec.type or int, default=None)
        if spec.type in (None, int, float):
            options["nargs"] = "*"
    else:
        natural = type(default) if isinstance(default, (int, float, str)) else None
        options.update(type=spec.type or natural, default=None if default is MISSING else default)
    if spec.flag_default != FIELD_DEFAULT:
        options["default"] = spec.flag_default
    if spec.choices is not None:
        options["choices"] = spec.choices
    if spec.metavar is not None:
        options["metavar"] = spec.metavar
    return options


def add_config_flags(group: argparse._ArgumentGroup) -> None:
    """The flags of the config fields whose argument group is ``group``'s title, generated from the table."""
    for config_field in table_flag_fields(group.title):
        spec = field_spec(config_field)
        group.add_argument(spec.flag, *spec.aliases, **_flag_options(config_field))


# --------------------------------------------------------------------------- groups of flags

# The legacy activation switches (Megatron/MindSpeed flags): together they spell --activation (_activation)
ACTIVATION_SWITCH_HELP: Dict[str, Optional[str]] = {
    "swiglu": None,  # consumes: --swiglu
    "geglu": "gated GELU MLP (Gemma)",  # consumes: --geglu
    "gelu_tanh": "GELU with the tanh approximation",  # consumes: --gelu-tanh
    "relu": "non-gated ReLU MLP (OPT)",  # consumes: --relu
    "squared_relu": "non-gated ReLU-squared MLP (Nemotron)",  # consumes: --squared-relu
    "quick_geglu": "gated MLP with quick GELU x * sigmoid(1.702 x) on the gate (GPT-OSS)",  # consumes: --quick-geglu
    "xielu": "xIELU MLP activation with learnable alpha_p and alpha_n per layer (Apertus)",  # consumes: --xielu
    "gated_mlp": "act(gate) * up with a fused [gate; up] for --relu/--squared-relu/--xielu/GELU (BitNet)",
}  # consumes: --gated-mlp
assert tuple(ACTIVATION_SWITCH_HELP) == ACTIVATION_SWITCHES
# The legacy q/k norm switches (Megatron/MindSpeed flags): together they spell --qk-norm (_switch_spelled)
QK_NORM_SWITCH_HELP: Dict[str, Optional[str]] = {
    "qk_layernorm": "per-head q/k norm before RoPE (Qwen3)",  # consumes: --qk-layernorm
    # consumes: --qk-layernorm-full-width
    "qk_layernorm_full_width": "with --qk-layernorm: q/k norms over all heads' channels, not per head (Olmo2)",
    # consumes: --qk-layernorm-per-head-weights
    "qk_layernorm_per_head_weights": "with --qk-layernorm: a norm weight per head, [heads, head_dim] (Cohere's "
                                     "use_qk_norm)",
    # consumes: --non-parametric-qk-norm
    "non_parametric_qk_norm": "with --qk-layernorm: q/k norms without weight (NanoChat)",
    "qk_l2_norm": "weightless q/k RMS norms per head after RoPE, on RoPE layers only (Llama 4's use_qk_norm)",
}  # consumes: --qk-l2-norm
assert tuple(QK_NORM_SWITCH_HELP) == QK_NORM_SWITCHES
# The config fields that legacy switches spell: field -> (its switches, their spelling, what it sets)
SWITCH_SPELLED_FIELDS: Dict[str, Tuple[Tuple[str, ...], Callable[[Dict[str, Any]], str], str]] = {
    "activation": (ACTIVATION_SWITCHES, activation_from_switches, "the MLP activation"),
    "qk_norm": (QK_NORM_SWITCHES, qk_norm_from_switches, "the q/k norm"),
}



def _add_network_size_args(parser: argparse.ArgumentParser) -> None:
    """The architecture's flags: the table's "network size" fields, plus the two flags that are no field."""
    group = parser.add_argument_group("network size")
    group.add_argument("--seq-length", type=int, default=None)
    group.add_argument("--group-query-attention", action="store_true")
    for name, text in {**ACTIVATION_SWITCH_HELP, **QK_NORM_SWITCH_HELP}.items():
        group.add_argument(_flag(name), action="store_true", help=text)
    add_config_flags(group)
    _add_moe_args(parser)
    _add_fused_kernel_args(parser)


def _add_fused_kernel_args(parser: argparse.ArgumentParser) -> None:
    """Fused-kernel flags (MindSpeed/Megatron names; core/fused.py, TransformerConfig documents each)."""
    add_config_flags(parser.add_argument_group("fused kernels"))


def _add_moe_args(parser: argparse.ArgumentParser) -> None:
    """Mixture-of-experts flags (Megatron/MindSpeed names; TransformerConfig documents each)."""
    group = parser.add_argument_group("mixture of experts")
    group.add_argument("--n-shared-experts", type=int, default=None,
                       help="MindSpeed: a shared expert of N x --moe-ffn-hidden-size")
    add_config_flags(group)


def _add_initialization_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("initialization")
    group.add_argument("--seed", type=int, default=1234)
    add_config_flags(group)


def _add_regularization_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("regularization")
    group.add_argument("--weight-decay", type=float, default=0.01)
    group.add_argument("--start-weight-decay", type=float, default=None, help="default --weight-decay")
    group.add_argument("--end-weight-decay", type=float, default=None, help="default --weight-decay")
    group.add_argument("--weight-decay-incr-style", choices=("constant", "linear", "cosine"),
                       default="constant")
    group.add_argument("--clip-grad", type=float, default=1.0)
    group.add_argument("--adam-beta1", type=float, default=0.9)
    group.add_argument("--adam-beta2", type=float, default=0.999)
    group.add_argument("--adam-eps", type=float, default=1e-8)
    group.add_argument("--sgd-momentum", type=float, default=0.9)
    group.add_argument("--label-smoothing-factor", type=float, default=0.0,
                       help="cross-entropy label smoothing, as Megatron's")
    add_config_flags(group)


def _add_training_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("training")
    group.add_argument("--micro-batch-size", type=int, default=None)
    group.add_argument("--global-batch-size", type=int, default=None, help="default micro batch x DP")
    group.add_argument("--train-iters", type=int, default=None)
    group.add_argument("--exit-interval", type=int, default=None, help="stop after this iteration")
    group.add_argument("--exit-signal-handler", action="store_true",
                       help="on SIGTERM, stop at the next iteration every rank agrees on, save and exit 0")
    group.add_argument("--exit-duration-in-mins", type=float, default=None, metavar="MINUTES",
                       help="stop, save and exit 0 once the run has trained this long")
    group.add_argument("--check-for-nan-in-loss-and-grad", dest="check_for_nan_in_loss_and_grad", action="store_true",
                       default=True, help="skip the update of a step whose loss or gradient norm is NaN/Inf (default)")
    group.add_argument("--no-check-for-nan-in-loss-and-grad", dest="check_for_nan_in_loss_and_grad",
                       action="store_false", help="apply such updates (Megatron's switch)")
    group.add_argument("--max-skipped-iterations", type=int, default=10, metavar="N",
                       help="stop with an error after N steps in a row skipped for a non-finite loss or grad norm")
    group.add_argument("--optimizer", choices=("adam", "sgd", "muon"), default="adam",
                       help="muon: orthogonalised momentum for the hidden matrices, AdamW (--adam-*) for embeddings, "
                            "the output layer, norms and biases (core/optimizer/muon.py)")
    add_config_flags(group)


def _add_muon_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("muon (Megatron-core's flags)")
    group.add_argument("--muon-momentum", type=float, default=0.9, help="momentum of Muon's internal SGD")
    group.add_argument("--muon-use-nesterov", action="store_true", help="Nesterov momentum in Muon's internal SGD")
    group.add_argument("--muon-no-split-qkv", dest="muon_split_qkv", action="store_false", default=True,
                       help="orthogonalise a fused QKV weight as one matrix instead of as Q, K and V")
    group.add_argument("--muon-scale-mode", choices=MUON_SCALE_MODES, default="spectral",
                       help="the update's factor from the matrix shape: spectral sqrt(max(out, in)), unit_rms_norm "
                            "sqrt(out / in), shape_scaling sqrt(max(1, out / in))")
    group.add_argument("--muon-extra-scale-factor", type=float, default=1.0,
                       help="times the scale mode's factor (0.2 with spectral matches AdamW's update RMS, so AdamW's "
                            "learning rate carries over: Moonlight's rule)")
    group.add_argument("--muon-fp32-matmul-prec", choices=tuple(MUON_MATMUL_PRECISIONS), default="medium",
                       help="fp32 matmul precision of the Newton-Schulz products: high = IEEE fp32, medium = torch's "
                            "'high' (TF32 on GPUs), low = torch's 'medium' (bf16); IEEE fp32 on a CPU without AMX, "
                            "where the reduced ones are emulated and slower")
    group.add_argument("--muon-num-ns-steps", type=int, default=5, help="Newton-Schulz iterations per update")
    group.add_argument("--muon-tp-mode", choices=MUON_TP_MODES, default="duplicated",
                       help="a TP-split matrix: duplicated gathers it (equal to one process), distributed sums the "
                            "Newton-Schulz products over TP, blockwise orthogonalises each rank's slice (Megatron's "
                            "default; depends on the TP size)")


def _add_learning_rate_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("learning rate")
    group.add_argument("--lr", type=float, default=None)
    group.add_argument("--min-lr", type=float, default=0.0)
    group.add_argument("--lr-decay-style", choices=LR_DECAY_STYLES, default="linear")
    group.add_argument("--lr-decay-iters", type=int, default=None, help="default --train-iters")
    group.add_argument("--lr-warmup-iters", type=int, default=None, help="default 0")
    group.add_argument("--lr-warmup-fraction", type=float, default=None,
                       help="warmup as a fraction of --lr-decay-iters")
    group.add_argument("--lr-warmup-init", type=float, default=0.0)
    group.add_argument("--lr-wsd-decay-style", choices=WSD_DECAY_STYLES, default="exponential")
    group.add_argument("--lr-wsd-decay-iters", type=int, default=None)
    group.add_argument("--override-opt-param-scheduler", "--override-opt_param-scheduler",
                       dest="override_opt_param_scheduler", action="store_true",
                       help="on resume keep these flags' schedule instead of the checkpoint's")
    group.add_argument("--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler",
                       dest="use_checkpoint_opt_param_scheduler", action="store_true",
                       help="on resume take the schedule's settings from the checkpoint, not from these flags")


def _add_checkpointing_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("checkpointing")
    group.add_argument("--save", type=str, default=None)
    group.add_argument("--save-interval", type=int, default=None)
    group.add_argument("--no-save-optim", action="store_true")
    group.add_argument("--no-save-rng", action="store_true")
    group.add_argument("--load", type=str, default=None)
    group.add_argument("--no-load-optim", action="store_true")
    group.add_argument("--no-load-rng", action="store_true")
    group.add_argument("--finetune", action="store_true",
                       help="load weights only and start at iteration 0")
    group.add_argument("--use-checkpoint-args", action="store_true",
                       help="take every architecture flag (layers, hidden, heads, vocab, norm, rope, ...) from the "
                            "--load checkpoint; training flags still come from the command line")
    group.add_argument("--auto-resume", action="store_true",
                       help="resume from the newest complete checkpoint in --save, or start fresh when it has none, "
                            "so one job script can be resubmitted as it is (MindSpeed's habit of --load = --save)")
    group.add_argument("--ckpt-keep-last", type=int, default=None, metavar="N",
                       help="after each save keep only the newest N complete iterations in --save")
    group.add_argument("--ckpt-format", choices=("torch", "torch_dist"), default="torch",
                       help="torch: one file per model-parallel rank (Megatron's legacy layout); torch_dist: "
                            "torch.distributed.checkpoint, each tensor stored once with its global shape, loadable "
                            "at any TP/PP/DP/EP layout, with or without the distributed optimizer or FSDP. --load "
                            "reads either, whatever this flag says")
    group.add_argument("--async-save", action="store_true",
                       help="(--ckpt-format torch_dist) copy the state to host memory in the step and write it in "
                            "a background thread, one save at a time; the tracker moves only once it is written")


def _add_mixed_precision_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("mixed precision")
    group.add_argument("--bf16", action="store_true")
    group.add_argument("--fp16", action="store_true")
    group.add_argument("--loss-scale", type=float, default=None, help="static loss scale (fp16)")
    group.add_argument("--initial-loss-scale", type=float, default=float(2**32))
    group.add_argument("--min-loss-scale", type=float, default=1.0)
    group.add_argument("--loss-scale-window", type=int, default=1000)
    group.add_argument("--hysteresis", type=int, default=2)
    add_config_flags(group)


def _add_distributed_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed")
    group.add_argument("--distributed-timeout-minutes", type=float, default=10.0, metavar="MINUTES",
                       help="a collective waiting longer than this ends the job with an error (Megatron's default 10)")
    group.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    group.add_argument("--schedules-method", choices=("zero-bubble",), default=None,
                       help="pipeline schedule: 1F1B (interleaved with virtual stages) unless zero-bubble (ZB-H1)")
    group.add_argument("--variable-seq-lengths", action="store_true",
                       help="pipeline stages exchange activation shapes before each transfer; SFT: also pad each "
                            "micro-batch only to its longest sample (MindSpeed 2.2; --no-pad-to-seq-lengths since)")
    group.add_argument("--context-parallel-size", type=int, default=1,
                       help="ranks that split every sample's sequence (core/transformer/context_parallel.py)")
    group.add_argument("--use-distributed-optimizer", action="store_true")
    group.add_argument("--distributed-backend", choices=("gloo", "nccl", "hccl"), default=None,
                       help="default: the backend of the device")
    group.add_argument("--device", choices=DEVICE_TYPES, default=None,
                       help="default: an NPU, else a CUDA GPU, else the CPU, whichever is present")
    add_config_flags(group)


def _add_data_parallel_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data parallel and optimizer memory")
    group.add_argument("--ddp-bucket-size", type=int, default=None,
                       help="elements per gradient bucket (default 40M)")
    group.add_argument("--overlap-grad-reduce", action="store_true",
                       help="start each bucket's reduction as soon as its gradients are complete")
    group.add_argument("--overlap-param-gather", action="store_true",
                       help="all-gather updated weights asynchronously (needs --use-distributed-optimizer)")
    group.add_argument("--accumulate-allreduce-grads-in-fp32", action="store_true",
                       help="fp32 gradient buffers for fp16 models (always on for bf16 and fp32)")
    group.add_argument("--use-torch-fsdp2", action="store_true", help="PyTorch fully_shard over the DP x CP ranks")
    group.add_argument("--use-torch-fsdp", action="store_true", help="PyTorch's FullyShardedDataParallel")
    group.add_argument("--hsdp-replicate-size", type=int, default=1,
                       help="with FSDP: replicate groups x shard groups over the DP x CP ranks (HSDP)")
    group.add_argument("--swap-optimizer", action="store_true",
                       help="keep optimizer states in host memory, streamed in chunks for the step")
    group.add_argument("--swap-optimizer-chunk-size", type=int, default=1 << 24,
                       help="elements per streamed chunk with --swap-optimizer")
    group.add_argument("--use-precision-aware-optimizer", action="store_true",
                       help="(with --use-distributed-optimizer) store gradients, master weights and Adam moments in "
                            "the dtypes below; every update is computed in fp32")
    group.add_argument("--main-grads-dtype", choices=("fp32", "bf16"), default="fp32",
                       help="gradient buffers (accumulation, DP reduce-scatter) with --use-precision-aware-optimizer")
    group.add_argument("--main-params-dtype", choices=("fp32", "fp16"), default="fp32",
                       help="master copies of bf16/fp16 weights with --use-precision-aware-optimizer")
    for moment in ("exp-avg", "exp-avg-sq"):
        group.add_argument(f"--{moment}-dtype", choices=("fp32", "fp16", "bf16", "fp8"), default="fp32",
                           help=f"Adam's {moment.replace('-', '_')} with --use-precision-aware-optimizer (fp8: e4m3 "
                                "with a per-parameter scale)")


def _add_data_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data")
    group.add_argument("--data-path", nargs="*", default=None,
                       help="prefixes of .bin/.idx pairs, optionally weighted: 0.3 a 0.7 b")
    group.add_argument("--split", type=str, default="969, 30, 1")
    group.add_argument("--train-data-path", nargs="*", default=None, help="training blend (overrides --split)")
    group.add_argument("--valid-data-path", nargs="*", default=None, help="validation blend")
    group.add_argument("--test-data-path", nargs="*", default=None, help="test blend")
    group.add_argument("--data-cache-path", type=str, default=None,
                       help="where dataset index caches go (default: beside the data)")
    group.add_argument("--mock-data", action="store_true", help="random tokens; needs --vocab-size")
    group.add_argument("--num-workers", type=int, default=2, help="DataLoader worker processes")
    group.add_argument("--reset-position-ids", action="store_true",
                       help="positions restart at 0 after every end-of-document token of a packed sample")
    group.add_argument("--reset-attention-mask", action="store_true",
                       help="attention stays within each document of a packed sample (documents end at EOD)")
    group.add_argument("--eod-mask-loss", action="store_true",
                       help="no loss on the end-of-document tokens of the input")


def _add_logging_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("logging")
    group.add_argument("--log-interval", type=int, default=100)
    group.add_argument("--eval-interval", type=int, default=1000)
    group.add_argument("--eval-iters", type=int, default=100)
    group.add_argument("--peak-tflops", type=float, default=None,
                       help="peak TFLOP/s of one device for MFU; default from the device name")
    group.add_argument("--tensorboard-dir", type=str, default=None,
                       help="write TensorBoard event files here (needs the tensorboard extra)")
    group.add_argument("--tensorboard-log-interval", type=int, default=1)
    group.add_argument("--tensorboard-queue-size", type=int, default=1000,
                       help="events queued before the writer flushes")
    group.add_argument("--log-timers-to-tensorboard", action="store_true")
    group.add_argument("--timing-log-level", type=int, choices=(0, 1, 2), default=0,
                       help="after each log line, the step's regions across ranks: 1 forward-backward, forward and "
                            "backward compute, data, gradient reduce, optimizer; 2 also pipeline exchanges and "
                            "rollouts (regions synchronize the device: slower)")
    group.add_argument("--timing-log-option", choices=("max", "minmax", "all"), default="minmax",
                       help="--timing-log-level: each region's max, (min, max) or every rank's time")
    group.add_argument("--profile", action="store_true",
                       help="record a torch.profiler trace of steps [--profile-step-start, --profile-step-end) "
                            "(TensorBoard's profiler plugin and Perfetto open it)")
    group.add_argument("--use-pytorch-profiler", action="store_true",
                       help="Megatron's switch from nsys to torch.profiler; --profile always uses torch.profiler")
    group.add_argument("--profile-step-start", type=int, default=10, help="--profile: the first profiled step")
    group.add_argument("--profile-step-end", type=int, default=12, help="--profile: the step profiling stops before")
    group.add_argument("--profile-ranks", nargs="+", type=int, default=[0], metavar="RANK",
                       help="--profile: the global ranks that record a trace")
    group.add_argument("--profile-save-path", type=str, default=None, metavar="DIR",
                       help="--profile: where traces go (default --tensorboard-dir, else ./profile)")
    group.add_argument("--wandb-project", type=str, default=None,
                       help="log to Weights & Biases (offline without an API key; needs the wandb extra)")
    group.add_argument("--wandb-exp-name", type=str, default=None)
    group.add_argument("--wandb-save-dir", type=str, default=None, help="W&B's local run directory")


SHARED_GROUPS = (_add_network_size_args, _add_initialization_args, _add_regularization_args, _add_training_args,
                 _add_muon_args, _add_learning_rate_args, _add_checkpointing_args, _add_mixed_precision_args, _add_distributed_args,
                 _add_data_parallel_args, _add_data_args, _add_logging_args)


def add_shared_args(parser: argparse.ArgumentParser) -> None:
    """The groups every training and generation entry parses (``--yaml-cfg`` first), added once here."""
    parser.add_argument("--yaml-cfg", type=str, default=None, metavar="FILE",
                        help="YAML mapping of flag names to values, used as defaults")
    for add in SHARED_GROUPS:
        add(parser)
    add_pipeline_layout_args(parser)
    add_tokenizer_args(parser)
    _add_torch_compile_args(parser)


def build_parser(entry: str = PRETRAIN) -> FlagParser:
    """The parser of ``entry`` (a row of ``mindspeed_llm.entry_flags.ENTRY_GROUPS``: ``pretrain_gpt.py``,
    ``posttrain.py --stage dpo``, ``inference.py``, ...): the shared groups and the entry's own; a flag of
    another entry is an unrecognised argument whose message names the entries that have it."""
    parser = FlagParser(description=f"{entry}: Megatron-style LLM training", flag_owners=flag_owners)
    add_shared_args(parser)
    for add in ENTRY_GROUPS[entry]:
        add(parser)
    return parser


def all_flags_parser() -> FlagParser:
    """The union of every entry's flags, for callers that read or test every flag (no entry runs it)."""
    parser = FlagParser(description="every flag of the training and generation entries")
    add_shared_args(parser)
    for add in every_group():
        add(parser)
    return parser


def _add_torch_compile_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("torch.compile")
    group.add_argument("--use-torch-compile", action="store_true",
                       help="compile each transformer layer with torch.compile (regional compilation, as "
                            "TorchTitan); the first step compiles and the log reports its seconds and graph breaks")
    group.add_argument("--torch-compile-backend", type=str, default="inductor", metavar="NAME",
                       help="--use-torch-compile: the torch.compile backend (inductor; aot_eager, eager to debug)")


# --------------------------------------------------------------------------- YAML defaults

def _yaml_path(argv: Sequence[str]) -> Optional[str]:
    pre = FlagParser(add_help=False)
    pre.add_argument("--yaml-cfg", type=str, default=None)
    known, _ = pre.parse_known_args(list(argv))
    return known.yaml_cfg  # consumes: --yaml-cfg


def _actions_by_dest(parser: argparse.ArgumentParser) -> Dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.dest not in ("help", "yaml_cfg")}


def _coerce_scalar(action: argparse.Action, value: Any, where: str) -> Any:
    """Convert one YAML scalar as argparse would convert the flag's text."""
    convert = action.type or str
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ArgumentError(f"{where}: expected a {getattr(convert, '__name__', 'value')}, got {value!r}")
    if isinstance(value, str) or convert is str:
        try:
            value = convert(str(value))
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise ArgumentError(f"{where}: {exc}") from None
    elif convert is float:
        value = float(value)
    elif convert is int and not isinstance(value, int):
        raise ArgumentError(f"{where}: expected an integer, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise ArgumentError(f"{where}: {value!r} is not one of {list(action.choices)}")
    return value


def _coerce_yaml_value(action: argparse.Action, value: Any, where: str) -> Any:
    if value is None:
        return None
    if action.nargs == 0:  # store_true / store_false
        if not isinstance(value, bool):
            raise ArgumentError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action.type, IntList) and isinstance(value, (list, int)):
        items = value if isinstance(value, list) else [value]
        value = ",".join(str(v) for v in items)
    if action.nargs in ("*", "+"):
        items = value if isinstance(value, list) else [value]
        return [_coerce_scalar(action, v, where) for v in items]
    return _coerce_scalar(action, value, where)


def load_yaml_defaults(path: str, parser: argparse.ArgumentParser,
                       only: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Read ``path`` into {dest: value}; unknown keys and bad values raise ArgumentError (a key of another
    entry's flag names that entry). With ``only``, just those dests are read (the others are left to the
    entry's parser)."""
    if not os.path.isfile(path):
        raise ArgumentError(f"--yaml-cfg {path}: no such file")
    with open(path, encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise ArgumentError(f"--yaml-cfg {path}: not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ArgumentError(f"--yaml-cfg {path}: expected a mapping of flag names to values")
    actions = _actions_by_dest(parser)
    defaults: Dict[str, Any] = {}
    for key, value in data.items():
        dest = str(key).lstrip("-").replace("-", "_")
        if only is not None and dest not in only:
            continue
        if dest not in actions:
            owners = parser.flag_owners(_flag(dest)) if getattr(parser, "flag_owners", None) else None
            where = f"{_flag(dest)} is a flag of {owners}" if owners else f"no flag {_flag(dest)}"
            raise ArgumentError(f"--yaml-cfg {path}: unknown key {key!r} ({where})")
        defaults[dest] = _coerce_yaml_value(actions[dest], value, f"--yaml-cfg {path}: key {key!r}")
    return defaults


# --------------------------------------------------------------------------- parsing

def _explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str]) -> List[str]:
    """The dests that appear on the command line (argparse leaves pre-set attributes alone)."""
    unset = object()
    dests = [a.dest for a in parser._actions if a.dest != "help"]
    probe = argparse.Namespace(**{dest: unset for dest in dests})
    parser.parse_args(list(argv), namespace=probe)
    return [dest for dest, value in vars(probe).items() if value is not unset]


def _default_ffn_hidden_size(hidden_size: int, swiglu: bool) -> int:
    """Megatron's default: 4h, or 8h/3 rounded down to a multiple of 64 with SwiGLU."""
    if not swiglu:
        return 4 * hidden_size
    rounded = int((4 * hidden_size * 2 / 3) / 64) * 64
    return rounded if rounded > 0 else int(8 * hidden_size / 3)


def _params_dtype(args: argparse.Namespace) -> torch.dtype:
    if args.bf16:
        return torch.bfloat16
    if args.fp16:
        return torch.float16
    return torch.float32


def _derive_fields(args: argparse.Namespace) -> None:
    """Fill the fields that follow from others (see the module docstring)."""
    args.params_dtype = _params_dtype(args)
    if args.group_query_attention:
        args.num_query_groups = args.num_query_groups if args.num_query_groups is not None else 1
    else:
        args.num_query_groups = None
    if args.ffn_hidden_size is None and args.hidden_size is not None:
        args.ffn_hidden_size = _default_ffn_hidden_size(args.hidden_size, args.swiglu or args.activation == "swiglu")
    if args.max_position_embeddings is None:
        args.max_position_embeddings = args.seq_length
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.train_iters
    if args.lr_warmup_iters is None:
        fraction, decay = args.lr_warmup_fraction, args.lr_decay_iters
        args.lr_warmup_iters = round(fraction * decay) if fraction is not None and decay is not None else 0
    for bound in ("start_weight_decay", "end_weight_decay"):
        if getattr(args, bound) is None:
            setattr(args, bound, args.weight_decay)
    args.noop_layers = tuple(args.noop_layers or ())
    if getattr(args, "no_pad_to_seq_lengths", False):  # posttrain.py's; MindSpeed: micro-batches of their own lengths cross pipeline stages
        args.variable_seq_lengths = True
    if args.distributed_backend is None and args.device is not None:
        args.distributed_backend = BACKEND_FOR_DEVICE[args.device]
    set_vocab_size(args, args.vocab_size)


def set_vocab_size(args: argparse.Namespace, vocab_size: Optional[int]) -> None:
    """Record the vocabulary size (e.g. the tokenizer's) and its TP-padded size."""
    args.vocab_size = vocab_size
    sizes_known = vocab_size is not None and args.make_vocab_size_divisible_by >= 1  # else validation refuses
    args.padded_vocab_size = (pad_vocab_size(vocab_size, args.make_vocab_size_divisible_by,
                                             args.tensor_model_parallel_size)
                              if sizes_known else None)


def parse_args(argv: Optional[Sequence[str]] = None, entry: Optional[str] = None) -> argparse.Namespace:
    """Parse ``entry``'s flags (``sys.argv[1:]`` when ``argv`` is None), apply YAML defaults, derive fields.
    Without ``entry`` every entry's flags parse (:func:`all_flags_parser`: library callers and tests of the
    shared validation); each entry point passes its own."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = all_flags_parser() if entry is None else build_parser(entry)
    yaml_path = _yaml_path(argv)
    yaml_defaults = load_yaml_defaults(yaml_path, parser) if yaml_path else {}
    parser.set_defaults(**yaml_defaults)
    args = parser.parse_args(argv)
    given = set(yaml_defaults) | set(_explicit_dests(parser, argv))
    args.explicit_args = {dest: getattr(args, dest) for dest in sorted(given)}
    args.checkpoint_architecture = apply_checkpoint_args(args) if args.use_checkpoint_args else {}
    _derive_fields(args)
    return args


config_field_flag = field_flag  # the flag that sets a config field, for messages (core.transformer.config)


def same_setting(a: Any, b: Any) -> bool:
    """Equal settings: lists and tuples alike, floats to 1e-12 relative."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return list(a or ()) == list(b or ())
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-12 * max(abs(a), abs(b), 1.0)
    return a == b


def apply_checkpoint_args(args: argparse.Namespace) -> Dict[str, Any]:
    """``--use-checkpoint-args``: set every architecture flag from the ``--load`` checkpoint (read on the
    CPU, before any process group); a flag given that contradicts it is an ArgumentError. Returns the
    checkpoint's architecture fields (ModelConfig's)."""
    from core.checkpointing import CheckpointError, read_checkpoint_settings

    if not args.load:
        raise ArgumentError("--use-checkpoint-args needs --load (the checkpoint to take the model arguments "
                            "from); add --load DIR or drop --use-checkpoint-args")
    try:
        path, saved_args, saved_config = read_checkpoint_settings(args.load)
    except CheckpointError as error:
        raise ArgumentError(f"--use-checkpoint-args: {error}") from None
    saved_config = upgrade_legacy_settings(saved_config)
    settings = {name: saved_config[name] for name in architecture_fields() if name in saved_config}
    _refuse_contradicting_switches(args, settings, path)
    values = checkpoint_flag_values(settings)
    for dest, value in values.items():
        given = args.explicit_args.get(dest, value)
        if dest in args.explicit_args and dest != "group_query_attention" and not same_setting(given, value):
            raise ArgumentError(f"{_flag(dest)} {given} contradicts the checkpoint's {value} ({path}); drop the "
                                "flag (--use-checkpoint-args takes it from the checkpoint) or drop "
                                "--use-checkpoint-args")
        setattr(args, dest, value)
    if getattr(saved_args, "model_type_hf", None):
        args.model_type_hf = saved_args.model_type_hf  # the family travels on to the checkpoints this run saves
    return settings


def _refuse_contradicting_switches(args: argparse.Namespace, settings: Dict[str, Any], path: str) -> None:
    """--use-checkpoint-args with a legacy switch (--swiglu, --qk-layernorm, ...): it must spell the checkpoint's
    value of its field (``settings``: the checkpoint's architecture fields)."""
    for name, (switches, spell, _) in SWITCH_SPELLED_FIELDS.items():
        given, saved = _switches_given(args, name), settings.get(name)
        if not given or saved is None:
            continue
        try:
            spelled = spell({switch: getattr(args, switch) for switch in switches})
        except ValueError as error:
            raise ArgumentError(str(error)) from None
        if spelled != saved:
            raise ArgumentError(f"{' '.join(given)} contradicts the checkpoint's {_flag(name)} {saved} ({path}); "
                                "drop the flag (--use-checkpoint-args takes it from the checkpoint) or drop "
                                "--use-checkpoint-args")


def checkpoint_flag_values(settings: Dict[str, Any]) -> Dict[str, Any]:
    """{dest: value} of the flags that say the architecture ``settings`` (config field -> value): the inverse
    of the args -> config step, for the fields that have a flag."""
    dests = {action.dest for action in build_parser()._actions}
    table = TransformerConfig.__dataclass_fields__
    values: Dict[str, Any] = {}
    for name, value in settings.items():
        config_field = table[name]
        if field_spec(config_field).flag is None or config_flag_dest(config_field) not in dests:
            continue
        if switches_off(config_field):
            value = not value
        elif isinstance(config_field.default, tuple):
            value = tuple(value or ())
        values[config_flag_dest(config_field)] = value
    groups, heads = settings.get("num_query_groups"), settings.get("num_attention_heads")
    values["group_query_attention"] = groups is not None and groups != heads
    return values


# --------------------------------------------------------------------------- validation

def _given(args: argparse.Namespace, dest: str) -> bool:
    explicit = getattr(args, "explicit_args", None)
    if explicit is None:
        return getattr(args, dest, None) not in (None, 0)
    return dest in explicit


def _check_required(args: argparse.Namespace) -> None:
    missing = [_flag(dest) for dest in REQUIRED_FLAGS if getattr(args, dest, None) is None]
    if missing:
        raise ArgumentError(f"missing required {', '.join(missing)}: give them on the command line "
                            "or in the --yaml-cfg file")


def _check_precision(args: argparse.Namespace) -> None:
    if args.fp16 and args.bf16:
        raise ArgumentError("--fp16 and --bf16 are mutually exclusive; pass only one of them")


def _check_parallel_sizes(args: argparse.Namespace, world_size: int) -> None:
    tp, pp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size
    cp, ep = args.context_parallel_size, args.expert_model_parallel_size
    for dest, value in (("tensor_model_parallel_size", tp), ("pipeline_model_parallel_size", pp),
                        ("context_parallel_size", cp), ("expert_model_parallel_size", ep)):
        if value < 1:
            raise ArgumentError(f"{_flag(dest)} must be at least 1, got {value}")
    try:
        validate_degrees(world_size, tp, pp, cp, expert_dimension(tp, ep, args.expert_tensor_parallel_size))
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None
    args.world_size = world_size
    args.data_parallel_size = world_size // (tp * pp * cp)


def _resolve_virtual_pipeline(args: argparse.Namespace) -> None:
    """Either virtual-pipeline flag sets both (chunks per stage and layers per chunk); LayoutError on misfit."""
    layers, pp = args.num_layers, args.pipeline_model_parallel_size
    vpp = resolve_virtual_pipeline(layers, pp, args.num_layers_per_virtual_pipeline_stage,
                                   args.virtual_pipeline_model_parallel_size)
    args.virtual_pipeline_model_parallel_size = vpp
    if vpp is not None:
        args.num_layers_per_virtual_pipeline_stage = layers // (pp * vpp)


def _pattern_stages(args: argparse.Namespace) -> None:
    """Megatron-core's separators in --hybrid-override-pattern: '|' between pipeline segments (one per stage,
    or one per virtual chunk in chunk order), which become --num-layer-list (or the virtual pipeline's layers per
    chunk) and leave the letters alone; '/' (its MTP patterns) is refused."""
    pattern = getattr(args, "hybrid_override_pattern", None)
    if not pattern or not set(pattern) & {"|", "/"}:
        return
    if "/" in pattern:
        raise ArgumentError(f"--hybrid-override-pattern {pattern!r}: '/' starts Megatron's MTP layer patterns; MTP "
                            "layers with a hybrid pattern are not supported, drop the '/...' part")
    segments, pp = pattern.split("|"), args.pipeline_model_parallel_size
    counts = tuple(len(segment) for segment in segments)
    if 0 in counts or len(segments) % pp:
        raise ArgumentError(f"--hybrid-override-pattern {pattern!r}: its {len(segments)} '|'-separated segments "
                            f"must be non-empty and one per pipeline stage (--pipeline-model-parallel-size {pp}) or "
                            "per virtual chunk")
    args.hybrid_override_pattern = "".join(segments)
    chunks = len(segments) // pp
    if chunks == 1:
        if args.num_layer_list and tuple(args.num_layer_list) != counts:
            raise ArgumentError(f"--num-layer-list {','.join(map(str, args.num_layer_list))} differs from the stages "
                                f"of --hybrid-override-pattern {pattern!r} ({','.join(map(str, counts))}); drop one")
        if pp > 1:
            args.num_layer_list = counts
        return
    if len(set(counts)) > 1:
        raise ArgumentError(f"--hybrid-override-pattern {pattern!r}: virtual chunks of different sizes {counts} are "
                            "not supported; give every segment the same number of layers")
    given = args.num_layers_per_virtual_pipeline_stage
    if given not in (None, counts[0]) or args.virtual_pipeline_model_parallel_size not in (None, chunks):
        raise ArgumentError(f"--hybrid-override-pattern {pattern!r} has {chunks} chunks of {counts[0]} layers per "
                            "stage; the virtual-pipeline flags say otherwise, drop them")
    args.num_layers_per_virtual_pipeline_stage = counts[0]


def _check_pipeline(args: argparse.Namespace) -> None:
    """Layer placement over pipeline stages and virtual chunks (core/pipeline_parallel/layout.py)."""
    _pattern_stages(args)
    pp, layers = args.pipeline_model_parallel_size, args.num_layers
    bad_noop = [i for i in (args.noop_layers or ()) if not 0 <= i < layers]
    if bad_noop:
        raise ArgumentError(f"--noop-layers {bad_noop} out of range: layer numbers run from 0 to "
                            f"--num-layers - 1 ({layers - 1})")
    if args.num_layer_list:
        args.num_layer_list = tuple(args.num_layer_list)
    try:
        _resolve_virtual_pipeline(args)
        stage_layers(layers, pp, args.virtual_pipeline_model_parallel_size, args.num_layer_list)
    except LayoutError as exc:
        raise ArgumentError(str(exc)) from None
    if args.schedules_method == "zero-bubble" and (pp < 2 or args.virtual_pipeline_model_parallel_size):
        raise ArgumentError("--schedules-method zero-bubble needs --pipeline-model-parallel-size of 2 or more and "
                            "no virtual pipeline (--num-layers-per-virtual-pipeline-stage)")


def _check_interleaving(args: argparse.Namespace) -> None:
    """Megatron's condition for the interleaved schedule: micro-batches come in groups of PP."""
    pp, vpp = args.pipeline_model_parallel_size, args.virtual_pipeline_model_parallel_size
    if vpp and args.num_micro_batches % pp != 0:
        raise ArgumentError(
            f"the interleaved pipeline schedule (--num-layers-per-virtual-pipeline-stage) needs the number of "
            f"micro-batches ({args.num_micro_batches} = --global-batch-size / (--micro-batch-size x data-parallel "
            f"size)) to be a multiple of --pipeline-model-parallel-size ({pp}); change --global-batch-size")
    fsdp = args.use_torch_fsdp2 or args.use_torch_fsdp
    if pp > 1 and fsdp:
        raise ArgumentError("FSDP (--use-torch-fsdp2/--use-torch-fsdp) is not supported with "
                            "--pipeline-model-parallel-size > 1; drop one of them")


def _check_heads(args: argparse.Namespace) -> None:
    """What the model config cannot see: the head size when --kv-channels is not given (the
    config's own checks, heads and groups, run in _check_model_config)."""
    heads = args.num_attention_heads
    if args.kv_channels is None and args.hidden_size % heads != 0:
        raise ArgumentError(f"--hidden-size ({args.hidden_size}) is not divisible by --num-attention-heads "
                            f"({heads}); change either or set the head size with --kv-channels")


def _check_batch(args: argparse.Namespace) -> None:
    micro, dp = args.micro_batch_size, args.data_parallel_size
    if args.global_batch_size is None:
        args.global_batch_size = micro * dp
    if args.global_batch_size % (micro * dp) != 0:
        raise ArgumentError(
            f"--global-batch-size ({args.global_batch_size}) is not divisible by --micro-batch-size "
            f"({micro}) x data-parallel size ({dp}, = world size / (TP x PP x CP)); "
            f"use a multiple of {micro * dp}")
    args.num_micro_batches = args.global_batch_size // (micro * dp)


def _check_sequence_parallel(args: argparse.Namespace) -> None:
    if args.sequence_parallel and args.tensor_model_parallel_size == 1:
        warnings.warn("--sequence-parallel has no effect with --tensor-model-parallel-size 1; "
                      "turning it off", UserWarning, stacklevel=3)
        args.sequence_parallel = False


def _check_context_parallel(args: argparse.Namespace) -> None:
    """--context-parallel-size with its algorithm: sizes that split, and the model features CP cannot run yet."""
    cp, algo = args.context_parallel_size, args.context_parallel_algo
    if cp == 1:
        return
    tp = args.tensor_model_parallel_size
    ulysses = ulysses_degree(algo, cp, args.ulysses_degree_in_cp)
    if algo == HYBRID and (args.ulysses_degree_in_cp is None or cp % ulysses != 0):
        raise ArgumentError(f"--ulysses-degree-in-cp ({args.ulysses_degree_in_cp}) must be given and divide "
                            f"--context-parallel-size ({cp}) with hybrid_cp_algo")
    divisor = sequence_divisor(cp, algo, args.attention_mask_type, ulysses)
    if args.seq_length % divisor != 0:
        why = "2 x CP load-balanced chunks" if divisor == 2 * cp else "CP parts"
        raise ArgumentError(f"--seq-length {args.seq_length} must be divisible by {divisor} ({why} of "
                            f"--context-parallel-size {cp} with {algo}); change --seq-length")
    if args.sequence_parallel and (args.seq_length // cp) % tp != 0:
        raise ArgumentError(f"--sequence-parallel splits each CP rank's {args.seq_length // cp} tokens over "
                            f"--tensor-model-parallel-size {tp}; make --seq-length a multiple of CP x TP")
    heads = args.num_attention_heads // tp
    if ulysses > 1 and heads % ulysses != 0:
        raise ArgumentError(f"{algo}: the {heads} attention heads per TP rank (--num-attention-heads "
                            f"{args.num_attention_heads} / TP {tp}) do not split over {ulysses} Ulysses ranks; "
                            "choose a CP (or --ulysses-degree-in-cp) that divides them, or megatron_cp_algo")
    _refuse_context_parallel_features(args, algo)


def _refuse_context_parallel_features(args: argparse.Namespace, algo: str) -> None:
    """Model features context parallelism does not run (yet): one line naming the feature."""
    refused = []
    if algo in (RING, HYBRID):
        other = f" with ring attention ({algo}); use kvallgather_cp_algo or ulysses_cp_algo"
        refused += [("--position-embedding-type alibi", args.position_embedding_type == "alibi", other),
                    ("--attn-logit-softcapping", args.attn_logit_softcapping is not None, other),
                    (f"--softmax-type {args.softmax_type}", args.softmax_type != "vanilla", other),
                    (f"--attention-dropout {args.attention_dropout}", args.attention_dropout > 0,
                     other + ", or --attention-dropout 0"),
                    ("--qk-clip (its per-head logit records)", args.qk_clip, other)]
    for feature, wanted, hint in refused:
        if wanted:
            raise ArgumentError(f"{feature} is not supported with --context-parallel-size "
                                f"{args.context_parallel_size} yet{hint}")


def _check_sparse_attention(args: argparse.Namespace) -> None:
    """DSA whose top-k keeps every key of a training sequence would train dense attention under its name."""
    if getattr(args, "experimental_attention_variant", None) != "dsa" or args.dsa_indexer_topk is None:
        return
    if args.dsa_indexer_topk >= args.seq_length:
        raise ArgumentError(f"--dsa-indexer-topk {args.dsa_indexer_topk} keeps every key of --seq-length "
                            f"{args.seq_length}: attention would stay dense; choose a top-k below the sequence "
                            "length (DeepSeek-V3.2: 2048 of 128k)")


def _check_learning_rate(args: argparse.Namespace) -> None:
    if args.lr_warmup_fraction is not None and _given(args, "lr_warmup_iters"):
        raise ArgumentError("--lr-warmup-iters and --lr-warmup-fraction are mutually exclusive; "
                            "pass only one of them")
    if args.min_lr > args.lr:
        raise ArgumentError(f"--min-lr ({args.min_lr}) is larger than --lr ({args.lr}); "
                            "lower --min-lr or raise --lr")
    decay, warmup = args.lr_decay_iters, args.lr_warmup_iters
    if decay < 1:
        raise ArgumentError(f"--lr-decay-iters ({decay}) must be at least 1")
    if warmup >= decay:
        raise ArgumentError(f"warmup ({warmup} iterations from --lr-warmup-iters/--lr-warmup-fraction) "
                            f"must be shorter than --lr-decay-iters ({decay}, default --train-iters)")
    if args.lr_decay_style == "WSD":
        wsd = args.lr_wsd_decay_iters
        if wsd is None:
            raise ArgumentError("--lr-decay-style WSD needs --lr-wsd-decay-iters (the length of the "
                                "final decay)")
        if not 0 < wsd <= decay - warmup:
            raise ArgumentError(f"--lr-wsd-decay-iters ({wsd}) must be in 1..{decay - warmup} "
                                "(--lr-decay-iters minus the warmup)")


def check_pretraining_data(args: argparse.Namespace) -> None:
    """The pretraining entry's data flags: real data (with its tokenizer) or --mock-data."""
    real = args.data_path or args.train_data_path
    if args.mock_data and real:
        raise ArgumentError("--mock-data and --data-path/--train-data-path both given; choose one")
    if not args.mock_data and not real:
        raise ArgumentError("no training data: give --data-path PREFIX (from preprocess_data.py) or "
                            "--train-data-path, or --mock-data for synthetic tokens")
    if args.reset_position_ids and args.position_embedding_type not in ("rope", "learned_absolute"):
        raise ArgumentError(f"--reset-position-ids needs positions the model reads: --position-embedding-type "
                            f"{args.position_embedding_type} ignores position ids; use rope or learned_absolute")
    if real and args.tokenizer_type in (None, "NullTokenizer") and args.vocab_size is None:
        raise ArgumentError("--data-path needs the tokenizer that made it: --tokenizer-type PretrainedFromHF "
                            "--tokenizer-name-or-path DIR (or NullTokenizer with --vocab-size)")


DATA_PATH_FLAGS = ("data_path", "train_data_path", "valid_data_path", "test_data_path")


def _check_data_flags(args: argparse.Namespace) -> None:
    """--split and the data-path blends parse (weights before their prefixes, finite shares); no file is read."""
    from core.datasets.gpt_dataset import parse_blend, parse_split

    _check_not_a_file("data_cache_path", args.data_cache_path)
    try:
        if args.split is not None:
            parse_split(args.split)
        for dest in DATA_PATH_FLAGS:
            parse_blend(getattr(args, dest), _flag(dest))
    except ValueError as error:
        raise ArgumentError(str(error)) from None


def check_pretraining_files(args: argparse.Namespace) -> None:
    """Every prefix of --data-path / --train-data-path / --valid-data-path / --test-data-path is a sound, non-empty
    .bin/.idx pair (headers and sizes only: cheap), before any process group."""
    from core.datasets.gpt_dataset import check_blend_files
    from core.datasets.indexed_dataset import IndexedDatasetError

    if args.mock_data:
        return
    for dest in DATA_PATH_FLAGS:
        try:
            check_blend_files(getattr(args, dest), _flag(dest))
        except IndexedDatasetError as error:
            raise ArgumentError(str(error)) from None


def evaluation_requested(args: argparse.Namespace) -> bool:
    """``--eval-iters`` > 0 with ``--eval-interval`` set, one of them given explicitly (command line or YAML),
    not only Megatron's defaults: a run that asks for validation, which no validation split may skip silently."""
    explicit = getattr(args, "explicit_args", {})
    given = "eval_iters" in explicit or "eval_interval" in explicit
    return given and args.eval_iters > 0 and bool(args.eval_interval)


def _check_tokenizer(args: argparse.Namespace) -> None:
    if args.mock_data and args.vocab_size is None:
        raise ArgumentError("--mock-data needs --vocab-size (the range of the random tokens)")
    problem = tokenizer_error(args)
    if problem:
        raise ArgumentError(problem)


def _check_checkpointing(args: argparse.Namespace) -> None:
    if args.save is not None and os.path.exists(args.save) and not os.path.isdir(args.save):
        raise ArgumentError(f"--save {args.save} is a file, not a directory; give a directory for the checkpoints")
    if (args.auto_resume or args.ckpt_keep_last is not None) and args.save is None:
        raise ArgumentError(f"{'--auto-resume' if args.auto_resume else '--ckpt-keep-last'} needs --save "
                            "(the checkpoint directory)")
    if args.auto_resume:
        if args.load is not None and os.path.abspath(args.load) != os.path.abspath(args.save):
            raise ArgumentError(f"--auto-resume resumes from --save {args.save}; drop --load {args.load} "
                                "or --auto-resume")
        args.load = args.save if os.path.isdir(args.save) else None  # none yet: a fresh start
    if args.load is not None and not os.path.exists(args.load):
        raise ArgumentError(f"--load {args.load}: no such file or directory; fix the path or drop --load")
    if args.save_interval is not None and args.save is None:
        raise ArgumentError("--save-interval needs --save (the checkpoint directory)")
    if args.save_interval is not None and args.save_interval < 1:
        raise ArgumentError(f"--save-interval ({args.save_interval}) must be at least 1")
    if args.async_save and args.ckpt_format != "torch_dist":
        raise ArgumentError("--async-save needs --ckpt-format torch_dist (the per-rank torch format is written "
                            "synchronously); add --ckpt-format torch_dist or drop --async-save")
    if args.ckpt_format == "torch_dist" and (getattr(args, "lora_target_modules", None)
                                             or getattr(args, "qlora_save_dequantize", False)):
        raise ArgumentError("--ckpt-format torch_dist does not store LoRA adapter checkpoints yet; use the default "
                            "--ckpt-format torch with --lora-target-modules")


def _check_device(args: argparse.Namespace) -> None:
    backend, device = args.distributed_backend, args.device
    wanted = device_for_backend(backend)
    if wanted and device is not None and device != wanted:
        raise ArgumentError(f"--distributed-backend {backend} needs --device {wanted}, not {device}; "
                            f"use --distributed-backend {BACKEND_FOR_DEVICE[device]} or drop it")


# --------------------------------------------------------------------------- refused and dependent flags

@dataclass(frozen=True)
class Refusal:
    """A flag accepted for Megatron/MindSpeed compatibility whose feature is not built yet.

    ``refused(args)`` says whether this run asks for the missing feature; ``example``
    is a command-line fragment that does (the flag-coverage test runs it).
    """
    dest: str
    refused: Callable[[argparse.Namespace], bool]
    message: str
    example: Tuple[str, ...]


# The one table of refused flags: validate_args enforces it (command line and YAML alike) and
# tests/unit/test_flag_coverage.py accepts a flag that nothing reads only when it is listed here.
REFUSED_FLAGS: Tuple[Refusal, ...] = (
)

# (flag, what it needs, the needed flags as the user writes them): a flag given without what
# makes it act would be silently ignored, so it is refused instead.
DEPENDENT_FLAGS: Tuple[Tuple[str, Callable[[argparse.Namespace], bool], str], ...] = (
    ("num_query_groups", lambda args: args.group_query_attention, "--group-query-attention"),
    ("rope_scaling_factor", lambda args: args.rope_scaling_type is not None, "--rope-scaling-type"),
    ("low_freq_factor", lambda args: args.rope_scaling_type == "llama3", "--rope-scaling-type llama3"),
    ("high_freq_factor", lambda args: args.rope_scaling_type == "llama3", "--rope-scaling-type llama3"),
    ("original_max_position_embeddings", lambda args: args.rope_scaling_type in ("llama3", "yarn"),
     "--rope-scaling-type llama3 or yarn"),
    ("rope_scaling_beta_fast", lambda args: args.rope_scaling_type == "yarn", "--rope-scaling-type yarn"),
    ("rope_scaling_beta_slow", lambda args: args.rope_scaling_type == "yarn", "--rope-scaling-type yarn"),
    ("rope_scaling_mscale", lambda args: args.rope_scaling_type == "yarn", "--rope-scaling-type yarn"),
    ("rope_scaling_mscale_all_dim", lambda args: args.rope_scaling_type == "yarn", "--rope-scaling-type yarn"),
    ("lr_wsd_decay_style", lambda args: args.lr_decay_style == "WSD", "--lr-decay-style WSD"),
    ("swap_optimizer_chunk_size", lambda args: args.swap_optimizer, "--swap-optimizer"),
    *((dest, lambda args, dest=dest: args.use_precision_aware_optimizer or getattr(args, dest) == "fp32",
       "--use-precision-aware-optimizer")
      for dest in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")),
    ("swap_modules", lambda args: args.swap_attention, "--swap-attention"),
    ("tensorboard_log_interval", lambda args: args.tensorboard_dir is not None, "--tensorboard-dir"),
    ("tensorboard_queue_size", lambda args: args.tensorboard_dir is not None, "--tensorboard-dir"),
    ("log_timers_to_tensorboard", lambda args: args.tensorboard_dir is not None, "--tensorboard-dir"),
    *((dest, lambda args: args.profile, "--profile")
      for dest in ("profile_step_start", "profile_step_end", "profile_ranks", "profile_save_path",
                   "use_pytorch_profiler")),
    ("timing_log_option", lambda args: args.timing_log_level > 0, "--timing-log-level 1 or 2"),
    ("torch_compile_backend", lambda args: args.use_torch_compile, "--use-torch-compile"),
    ("wandb_exp_name", lambda args: bool(args.wandb_project), "--wandb-project"),
    ("wandb_save_dir", lambda args: bool(args.wandb_project), "--wandb-project"),
    ("mtp_loss_scaling_factor", lambda args: args.mtp_num_layers is not None, "--mtp-num-layers"),
    ("pad_to_multiple_of", lambda args: args.variable_seq_lengths,
     "--no-pad-to-seq-lengths (or --variable-seq-lengths)"),
    ("ulysses_degree_in_cp", lambda args: args.context_parallel_algo == HYBRID,
     "--context-parallel-algo hybrid_cp_algo"),
    ("attention_mask_type", lambda args: args.context_parallel_size > 1 and args.context_parallel_algo in (RING, HYBRID),
     "--context-parallel-size > 1 with megatron_cp_algo or hybrid_cp_algo"),
    ("use_cp_send_recv_overlap", lambda args: args.context_parallel_size > 1 and args.context_parallel_algo in (RING, HYBRID),
     "--context-parallel-size > 1 with megatron_cp_algo or hybrid_cp_algo"),
    ("ref_model", lambda args: args.stage == "dpo" or (args.stage == "grpo" and args.kl_coef != 0),
     "--stage dpo (or --stage grpo with --kl-coef)"),
    ("qlora", lambda args: bool(args.lora_target_modules), "--lora-target-modules"),
    ("qlora_save_dequantize", lambda args: args.qlora, "--qlora"),
    ("sgd_momentum", lambda args: args.optimizer == "sgd", "--optimizer sgd"),
    *((dest, lambda args: args.optimizer in ("adam", "muon"), "--optimizer adam or muon")
      for dest in ("adam_beta1", "adam_beta2", "adam_eps")),
    *((dest, lambda args: args.optimizer == "muon", "--optimizer muon")
      for dest in ("muon_momentum", "muon_use_nesterov", "muon_split_qkv", "muon_scale_mode",
                   "muon_extra_scale_factor", "muon_fp32_matmul_prec", "muon_num_ns_steps", "muon_tp_mode")),
    ("lr_warmup_init", lambda args: args.lr_warmup_iters > 0, "a warmup (--lr-warmup-iters or --lr-warmup-fraction)"),
    ("min_lr", lambda args: args.lr_decay_style != "constant",
     "a decaying --lr-decay-style (linear, cosine, inverse-square-root or WSD)"),
    *((dest, lambda args: args.weight_decay_incr_style != "constant", "--weight-decay-incr-style linear or cosine")
      for dest in ("start_weight_decay", "end_weight_decay")),
    ("loss_scale", lambda args: args.fp16, "--fp16"),
    *((dest, lambda args: args.fp16 and args.loss_scale is None, "--fp16 (without a static --loss-scale)")
      for dest in ("initial_loss_scale", "min_loss_scale", "loss_scale_window", "hysteresis")),
    ("kv_head_repeat_before_uly_alltoall",
     lambda args: args.context_parallel_size > 1 and args.context_parallel_algo in (ULYSSES, HYBRID),
     "--context-parallel-size > 1 with ulysses_cp_algo or hybrid_cp_algo"),
)


def _check_refused(args: argparse.Namespace) -> None:
    for refusal in REFUSED_FLAGS:
        if refusal.refused(args):
            raise ArgumentError(refusal.message)


def _check_dependent_flags(args: argparse.Namespace) -> None:
    for dest, active, needs in DEPENDENT_FLAGS:
        if _given(args, dest) and not active(args):
            raise ArgumentError(f"{_flag(dest)} has no effect without {needs}; add {needs} or drop {_flag(dest)}")
    if getattr(args, "stage", None) == "orm":  # a reward model's loss reads its value head's scores, not the vocabulary
        for dest in ("cross_entropy_loss_fusion", "cross_entropy_chunk_size"):
            if _given(args, dest):
                raise ArgumentError(f"{_flag(dest)} has no effect with --stage orm (its loss reads a value head, "
                                    f"not the vocabulary's logits); drop {_flag(dest)}")
    if _given(args, "max_skipped_iterations") and not args.check_for_nan_in_loss_and_grad:
        raise ArgumentError("--max-skipped-iterations has no effect with --no-check-for-nan-in-loss-and-grad "
                            "(nothing is skipped); drop one of them")


def _check_ranges(args: argparse.Namespace) -> None:
    for dest in POSITIVE_FLAGS:
        if getattr(args, dest, 1) < 1:  # (pad_to_multiple_of: posttrain.py's only)
            raise ArgumentError(f"{_flag(dest)} must be at least 1, got {getattr(args, dest)}")
    for dest in NON_NEGATIVE_FLAGS:
        if getattr(args, dest) < 0:
            raise ArgumentError(f"{_flag(dest)} must be 0 or more, got {getattr(args, dest)}")
    if args.ckpt_keep_last is not None and args.ckpt_keep_last < 1:
        raise ArgumentError(f"--ckpt-keep-last must be at least 1, got {args.ckpt_keep_last}")
    if args.exit_duration_in_mins is not None and args.exit_duration_in_mins <= 0:
        raise ArgumentError(f"--exit-duration-in-mins must be positive, got {args.exit_duration_in_mins}")
    if args.distributed_timeout_minutes <= 0:
        raise ArgumentError(f"--distributed-timeout-minutes must be positive, got {args.distributed_timeout_minutes}")
    if args.train_iters is not None and args.train_iters < 1:  # else the message names the derived --lr-decay-iters
        raise ArgumentError(f"--train-iters must be at least 1, got {args.train_iters}")
    if args.lr is not None and args.lr < 0:
        raise ArgumentError(f"--lr must be 0 or more, got {args.lr}")
    if not 0 <= args.seed < 2**32:  # NumPy's RandomState range (the dataset shuffles)
        raise ArgumentError(f"--seed must be in 0..{2**32 - 1}, got {args.seed}")
    for dest in ("exit_interval", "vocab_size", "global_batch_size"):  # optional counts
        if getattr(args, dest) is not None and getattr(args, dest) < 1:
            raise ArgumentError(f"{_flag(dest)} must be at least 1, got {getattr(args, dest)}")
    if args.make_vocab_size_divisible_by < 1:
        raise ArgumentError(f"--make-vocab-size-divisible-by must be at least 1, got "
                            f"{args.make_vocab_size_divisible_by}")


# --------------------------------------------------------------------------- recompute, logging, model

def _largest_model_chunk(args: argparse.Namespace) -> int:
    """Layers in the largest model chunk (a pipeline stage, or a virtual chunk of one)."""
    placement = stage_layers(args.num_layers, args.pipeline_model_parallel_size,
                             args.virtual_pipeline_model_parallel_size, args.num_layer_list)
    return max(len(chunk) for stage in placement for chunk in stage)


def _check_recompute(args: argparse.Namespace) -> None:
    """Megatron's rules: full recompute needs a method and a layer count; selective takes neither."""
    granularity, method, count = args.recompute_granularity, args.recompute_method, args.recompute_num_layers
    if granularity == "selective" and (method is not None or count is not None):
        raise ArgumentError("--recompute-granularity selective takes no --recompute-method or "
                            "--recompute-num-layers (they choose layers for full recompute); drop them")
    if method is not None and granularity != "full":
        raise ArgumentError(f"--recompute-method {method} needs --recompute-granularity full; add it or drop "
                            "--recompute-method")
    if count is not None and method is None and not (args.swap_attention and granularity is None):
        raise ArgumentError("--recompute-num-layers needs --recompute-granularity full and --recompute-method "
                            "uniform|block (or --swap-attention alone: MindSpeed's MLP recompute); add them or drop "
                            "--recompute-num-layers")
    if granularity == "full" and (method is None or count is None):
        raise ArgumentError("--recompute-granularity full needs --recompute-method uniform|block and "
                            "--recompute-num-layers N (uniform: layers per recomputed group; block: recomputed "
                            "layers per pipeline stage)")
    if count is not None:
        most = _largest_model_chunk(args)
        if not 1 <= count <= most:
            where = "virtual pipeline chunk" if args.virtual_pipeline_model_parallel_size else "pipeline stage"
            raise ArgumentError(f"--recompute-num-layers ({count}) must be between 1 and the layers per {where} "
                                f"({most}); lower it")


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    return importlib.util.find_spec(module) is not None


def _check_not_a_file(dest: str, path: Optional[str]) -> None:
    if path and os.path.exists(path) and not os.path.isdir(path):
        raise ArgumentError(f"{_flag(dest)} {path} is a file, not a directory; choose a directory")


def _check_logging(args: argparse.Namespace) -> None:
    """TensorBoard and W&B: their directories, and their optional packages (never imported here)."""
    _check_not_a_file("tensorboard_dir", args.tensorboard_dir)
    _check_not_a_file("wandb_save_dir", args.wandb_save_dir)
    if args.tensorboard_dir is not None and not _installed("tensorboard"):
        raise ArgumentError("--tensorboard-dir needs the tensorboard package: "
                            f"{INSTALL_HINT.format(extra='tensorboard')} (or pip install tensorboard)")
    if args.wandb_project and not _installed("wandb"):
        raise ArgumentError("--wandb-project needs the wandb package: "
                            f"{INSTALL_HINT.format(extra='wandb')} (or pip install wandb)")
    _check_profile(args)


def _check_profile(args: argparse.Namespace) -> None:
    """--profile's step range and ranks: a range that profiles nothing is refused."""
    if not args.profile:
        return
    start, end = args.profile_step_start, args.profile_step_end
    if not 0 <= start < end:
        raise ArgumentError(f"--profile-step-start {start} --profile-step-end {end}: need 0 <= start < end "
                            "(the steps [start, end) are profiled)")
    if start >= args.train_iters:
        raise ArgumentError(f"--profile-step-start {start} is not below --train-iters {args.train_iters}: no step "
                            "would be profiled; lower it")
    world = getattr(args, "world_size", None)
    bad = [rank for rank in args.profile_ranks if rank < 0 or (world is not None and rank >= world)]
    if bad:
        raise ArgumentError(f"--profile-ranks {bad[0]} is not a rank of this run (0..{(world or 1) - 1})")
    _check_not_a_file("profile_save_path", args.profile_save_path)


def _check_opt_param_scheduler(args: argparse.Namespace) -> None:
    if args.override_opt_param_scheduler and args.use_checkpoint_opt_param_scheduler:
        raise ArgumentError("--override-opt-param-scheduler and --use-checkpoint-opt_param-scheduler are mutually "
                            "exclusive (take the schedule from the flags, or from the checkpoint); pass one")


def _check_model_config(args: argparse.Namespace) -> None:
    """The model config's own checks, before any process group (a placeholder vocabulary when the
    tokenizer will give the real one later)."""
    _build_transformer_config(args, args.vocab_size or args.make_vocab_size_divisible_by)
    if args.position_embedding_type == "learned_absolute" and args.seq_length > args.max_position_embeddings:
        raise ArgumentError(f"--seq-length {args.seq_length} exceeds the learned position table's "
                            f"--max-position-embeddings {args.max_position_embeddings}; shorten the sequence")


def validate_args(args: argparse.Namespace, world_size: int) -> None:
    """The one validation pass, before any process group: ArgumentError (one line) on misuse;
    fills the batch and parallel fields."""
    _check_required(args)
    _check_refused(args)
    _check_ranges(args)
    _check_dependent_flags(args)
    _check_precision(args)
    _check_parallel_sizes(args, world_size)
    _check_pipeline(args)
    _check_heads(args)
    _check_model_config(args)
    _check_recompute(args)
    _check_batch(args)
    _check_interleaving(args)
    _check_sequence_parallel(args)
    _check_context_parallel(args)
    _check_sparse_attention(args)
    _check_learning_rate(args)
    _check_opt_param_scheduler(args)
    _check_tokenizer(args)
    _check_data_flags(args)
    _check_checkpointing(args)
    _check_device(args)
    _check_data_parallel(args)
    _check_logging(args)
    _check_lora(args)
    _check_torch_compile(args)


def _check_torch_compile(args: argparse.Namespace) -> None:
    """--use-torch-compile: a backend torch.compile knows (checked without compiling anything)."""
    if not args.use_torch_compile:
        return
    from core.transformer.compile import FALLBACK, available_backends

    if args.torch_compile_backend not in available_backends():
        raise ArgumentError(f"--torch-compile-backend {args.torch_compile_backend} is not a torch.compile backend "
                            f"(inductor, aot_eager, eager or a registered one); choose one or {FALLBACK}")


def _check_lora(args: argparse.Namespace) -> None:
    """LoRA's flags need --lora-target-modules; rank, alpha and dropout in range; no QLoRA under FSDP."""
    if not hasattr(args, "lora_target_modules"):  # an entry without the LoRA group (inference.py)
        return
    given = [flag for flag, value in (("--lora-r", args.lora_r), ("--lora-alpha", args.lora_alpha),
                                      ("--lora-dropout", args.lora_dropout), ("--lora-load", args.lora_load),
                                      ("--lora-modules-to-save", args.lora_modules_to_save or None))
             if value is not None]
    if not args.lora_target_modules:
        if given:
            raise ArgumentError(f"{given[0]} needs --lora-target-modules (e.g. linear_qkv linear_proj linear_fc1 "
                                "linear_fc2)")
        return
    if args.lora_r is not None and args.lora_r < 1:
        raise ArgumentError(f"--lora-r {args.lora_r} must be at least 1")
    if args.lora_dropout is not None and not 0.0 <= args.lora_dropout < 1.0:
        raise ArgumentError(f"--lora-dropout {args.lora_dropout} must be in [0, 1)")
    if args.qlora and (args.use_torch_fsdp2 or args.use_torch_fsdp):
        flag = "--use-torch-fsdp2" if args.use_torch_fsdp2 else "--use-torch-fsdp"
        raise ArgumentError(f"--qlora with {flag} is not supported: the NF4 base is stored in buffers FSDP cannot "
                            "shard; drop --qlora (LoRA works with FSDP) or use DDP")
    if "output_layer" in args.lora_modules_to_save and not args.untie_embeddings_and_output_weights:
        raise ArgumentError("--lora-modules-to-save output_layer: the output layer is tied to the word embeddings "
                            "(no --untie-embeddings-and-output-weights); name word_embeddings instead")


def _check_data_parallel(args: argparse.Namespace) -> None:
    """Distributed-optimizer, overlap, FSDP and swap combinations."""
    from core.distributed.fsdp import FSDPArgumentError, validate_fsdp_args

    if args.overlap_param_gather and not args.use_distributed_optimizer:
        raise ArgumentError("--overlap-param-gather needs --use-distributed-optimizer; add it or drop "
                            "--overlap-param-gather")
    if args.hsdp_replicate_size > 1 and not (args.use_torch_fsdp2 or args.use_torch_fsdp):
        raise ArgumentError("--hsdp-replicate-size needs --use-torch-fsdp2 or --use-torch-fsdp")
    if args.optimizer == "muon":
        _check_muon(args)
    if args.ddp_bucket_size is not None and args.ddp_bucket_size <= 0:
        raise ArgumentError(f"--ddp-bucket-size {args.ddp_bucket_size} must be positive")
    _check_precision_aware(args)
    try:
        validate_fsdp_args(args)
    except FSDPArgumentError as error:
        raise ArgumentError(str(error)) from None


def _check_muon(args: argparse.Namespace) -> None:
    """What --optimizer muon cannot be combined with."""
    if args.use_torch_fsdp:
        raise ArgumentError("--optimizer muon needs whole matrices, which FSDP1's flat shards do not give; use "
                            "--use-torch-fsdp2 instead of --use-torch-fsdp")
    if args.swap_optimizer:
        raise ArgumentError("--swap-optimizer streams AdamW's moments; --optimizer muon keeps its own: drop one")
    if args.muon_num_ns_steps < 1:
        raise ArgumentError(f"--muon-num-ns-steps {args.muon_num_ns_steps} must be at least 1")


def _check_precision_aware(args: argparse.Namespace) -> None:
    """--use-precision-aware-optimizer: the distributed optimizer's Adam, and dtypes the model can use."""
    if not args.use_precision_aware_optimizer:
        return
    fsdp = "--use-torch-fsdp2" if args.use_torch_fsdp2 else "--use-torch-fsdp" if args.use_torch_fsdp else None
    if fsdp:
        raise ArgumentError(f"--use-precision-aware-optimizer is not supported with {fsdp} (it stores the distributed "
                            f"optimizer's state); drop {fsdp} or --use-precision-aware-optimizer")
    if not args.use_distributed_optimizer:
        raise ArgumentError("--use-precision-aware-optimizer needs --use-distributed-optimizer; add it")
    if args.swap_optimizer:
        raise ArgumentError("--use-precision-aware-optimizer is not supported with --swap-optimizer (both keep the "
                            "moments their own way); drop one of them")
    if args.optimizer != "adam":
        raise ArgumentError(f"--use-precision-aware-optimizer stores Adam's state, not --optimizer {args.optimizer}'s; "
                            "use --optimizer adam or drop it")
    if args.main_grads_dtype == "bf16" and args.fp16:
        raise ArgumentError("--main-grads-dtype bf16 is for --bf16 models (an fp16 model's loss-scaled gradients "
                            "would lose 3 mantissa bits); use --bf16 or drop --main-grads-dtype bf16")
    if args.main_params_dtype == "fp16" and not (args.bf16 or args.fp16):
        raise ArgumentError("--main-params-dtype fp16 needs a --bf16 or --fp16 model (an fp32 model's master "
                            "weights are its weights); add --bf16 or drop --main-params-dtype fp16")


def parse_and_validate(argv: Optional[Sequence[str]] = None, world_size: Optional[int] = None,
                       entry: Optional[str] = None,
                       checks: Sequence[Callable[[argparse.Namespace], None]] = ()) -> argparse.Namespace:
    """parse_args + validate_args for a ``main``: on a bad flag print ``error: ...`` and exit 2.

    ``world_size`` defaults to the ``WORLD_SIZE`` environment variable (torchrun), else 1.
    """
    if world_size is None:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        args = parse_args(argv, entry)
        validate_args(args, world_size)
        for check in checks:  # the entry's own groups' checks (e.g. inference/flags.py)
            check(args)
    except ArgumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    return args


# --------------------------------------------------------------------------- model config

def transformer_config_from_args(args: argparse.Namespace) -> TransformerConfig:
    """The decoder's TransformerConfig; the vocabulary size must be known by now."""
    if args.vocab_size is None:
        raise ArgumentError("the vocabulary size is unknown: pass --vocab-size, or call "
                            "set_vocab_size(args, tokenizer.vocab_size) before building the model")
    return _build_transformer_config(args, args.vocab_size)


def _shared_expert_size(args: argparse.Namespace) -> Optional[int]:
    """--moe-shared-expert-intermediate-size, or MindSpeed's --n-shared-experts x the expert FFN size."""
    if args.n_shared_experts is None:
        return args.moe_shared_expert_intermediate_size
    if args.moe_shared_expert_intermediate_size is not None:
        raise ArgumentError("--n-shared-experts and --moe-shared-expert-intermediate-size both size the shared "
                            "expert; choose one")
    return args.n_shared_experts * (args.moe_ffn_hidden_size or args.ffn_hidden_size)


def _swap_modules(args: argparse.Namespace) -> Tuple[str, ...]:
    """--swap-modules as the names it lists (default DEFAULT_SWAP_MODULES)."""
    return parse_swap_modules(args.swap_modules or DEFAULT_SWAP_MODULES)


def _switches_given(args: argparse.Namespace, name: str) -> List[str]:
    """The legacy switches of field ``name`` (SWITCH_SPELLED_FIELDS) this run sets."""
    return [_flag(switch) for switch in SWITCH_SPELLED_FIELDS[name][0] if getattr(args, switch)]


def _switch_spelled(name: str, args: argparse.Namespace) -> str:
    """Field ``name``'s flag (--activation, --qk-norm), or what its legacy switches (--swiglu, --geglu --gelu-tanh,
    --qk-layernorm --qk-layernorm-full-width, ...) spell; not both."""
    switches, spell, what = SWITCH_SPELLED_FIELDS[name]
    on = {switch: getattr(args, switch) for switch in switches}
    if not any(on.values()):
        return getattr(args, name)
    spelled = spell(on)
    if _given(args, name) and getattr(args, name) != spelled:
        raise ArgumentError(f"{_flag(name)} {getattr(args, name)} and {' '.join(_switches_given(args, name))} both "
                            f"set {what}; choose one")
    return spelled


def _value_head(args: argparse.Namespace) -> bool:
    """A reward model (--stage orm) scores with a value head instead of the logits."""
    return getattr(args, "stage", None) == "orm"


def _derived_params_dtype(args: argparse.Namespace) -> torch.dtype:
    """The parameters' dtype parse_args derived from --bf16/--fp16."""
    return args.params_dtype


# Config fields whose value is more than their flag's: field -> its value from the parsed flags
CONFIG_DERIVATIONS: Dict[str, Callable[[argparse.Namespace], Any]] = {
    "params_dtype": _derived_params_dtype,
    "activation": functools.partial(_switch_spelled, "activation"),
    "qk_norm": functools.partial(_switch_spelled, "qk_norm"),
    "value_head": _value_head,
    "swap_modules": _swap_modules,
    "moe_shared_expert_intermediate_size": _shared_expert_size,
}


def config_value(args: argparse.Namespace, config_field: Field) -> Any:
    """A config field's value from the parsed flags: its derivation, else its flag's value (switched off for
    a ``--disable-...`` flag, a tuple for layer numbers)."""
    derive = CONFIG_DERIVATIONS.get(config_field.name)
    if derive is not None:
        return derive(args)
    value = getattr(args, config_flag_dest(config_field))
    if switches_off(config_field):
        return not value
    return tuple(value or ()) if isinstance(config_field.default, tuple) else value


def _build_transformer_config(args: argparse.Namespace, vocab_size: int) -> TransformerConfig:
    """The args -> config step, generated from the table (every field but the vocabulary, given here)."""
    try:
        values = {f.name: config_value(args, f) for f in fields(TransformerConfig) if f.name != "vocab_size"}
        return _checkpoint_config(args, TransformerConfig(vocab_size=vocab_size, **values))
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None


def _checkpoint_config(args: argparse.Namespace, config: TransformerConfig) -> TransformerConfig:
    """With ``--use-checkpoint-args``: the checkpoint's architecture fields, those without a flag included."""
    architecture = getattr(args, "checkpoint_architecture", None)
    if not architecture:
        return config
    values = {**config.to_dict(), **architecture}
    return TransformerConfig.from_dict({**values, "params_dtype": config.params_dtype})

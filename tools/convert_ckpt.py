"""Convert checkpoints between Hugging Face safetensors (hf), our Megatron-style sharded layout (mg) and
the checkpoints of Megatron-LM / MindSpeed-LLM (megatron).

Hugging Face -> Megatron (TP shards)::

    python tools/convert_ckpt.py --load-model-type hf --save-model-type mg \\
        --target-tensor-parallel-size 2 --target-pipeline-parallel-size 1 \\
        --model-type-hf llama2 --load-dir ./llama-2-7b-hf --save-dir ./llama-2-7b-mcore-tp2

Megatron -> Hugging Face::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type hf \\
        --load-dir ./llama-2-7b-mcore-tp2 --save-dir ./llama-2-7b-hf-out --max-shard-size 5GB

Megatron -> Megatron (re-shard to another TP/PP/VPP layout)::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type mg \\
        --target-tensor-parallel-size 1 --target-pipeline-parallel-size 2 \\
        --num-layers-per-virtual-pipeline-stage 2 --load-dir ./ckpt-tp2 --save-dir ./ckpt-tp1-pp2-vpp2

LoRA adapters (a ``--lora-target-modules`` run's ``--save``) over their mg base -> HF, merged
(``W + alpha/r B A`` per projection, in fp32, modules to save replaced) or, with ``--save-lora-to-hf``, as
PEFT's ``adapter_config.json`` + ``adapter_model.safetensors`` (fused qkv / gate-up adapters split per HF
projection by the registry's own row transform, sharing ``A``; ``mindspeed_llm/posttrain/peft_format.py``).
``--save-model-type mg`` (or ``megatron``) writes the merged model as a plain sharded checkpoint at any
target layout instead: the base of the next stage (DPO with fresh adapters after a LoRA SFT). Adapters of a
reward model (``--stage orm``: they hold its trained ``value_head.weight`` too, over a plain language-model base)
give that reward model: merged, HF's ``...ForSequenceClassification`` (``score.weight``, no ``lm_head``) or an mg
reward model; with ``--save-lora-to-hf``, PEFT's ``SEQ_CLS`` adapter with the score head saved whole::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type hf --load-dir ./llama-2-7b-mcore \
        --lora-load ./lora-ckpt --save-dir ./llama-2-7b-merged [--save-lora-to-hf]
    python tools/convert_ckpt.py --load-model-type mg --save-model-type mg --load-dir ./llama-2-7b-mcore \
        --lora-load ./lora-ckpt --save-dir ./llama-2-7b-sft-mcore

A checkpoint written by MindSpeed-LLM or Megatron-LM (``megatron``) -> ours / HF, and back::

    python tools/convert_ckpt.py --load-model-type megatron --save-model-type mg \\
        --target-tensor-parallel-size 8 --load-dir ./mindspeed-ckpt --save-dir ./llama-2-7b-mcore-tp8
    python tools/convert_ckpt.py --load-model-type megatron --save-model-type hf --model-type-hf llama2 \\
        --vocab-size 32000 --load-dir ./mindspeed-ckpt --save-dir ./llama-2-7b-hf-out
    python tools/convert_ckpt.py --load-model-type mg --save-model-type megatron \\
        --target-tensor-parallel-size 4 --target-pipeline-parallel-size 2 \\
        [--transformer-impl transformer_engine] --load-dir ./ckpt --save-dir ./ckpt-for-megatron

Its model and layout (heads, query groups, TP/PP/VPP, ``num_layer_list``, noop
layers, vocabulary padding, SwiGLU, biases, norm type, tied embeddings, RoPE) are
read from the ``args`` it stores (``mindspeed_llm/models/megatron_format.py``);
its ``linear_qkv`` rows, interleaved per query group with each TP rank holding a
contiguous run of groups, are permuted to ours (``mindspeed_llm/models/qkv_layout.py``);
its layers are numbered within their pipeline chunk. Both norm namings are read
(``input_layernorm`` and Transformer Engine's ``linear_qkv.layer_norm_weight``);
``--transformer-impl`` picks the one written (``local``, MindSpeed-LLM's, by
default). Megatron records only ``padded_vocab_size``: ``--vocab-size`` gives the
real vocabulary (else the padded rows are kept as vocabulary), and
``--model-type-hf`` the family (else ``llama2``). Settings the decoder does not
model (MoE ``num_experts``, MLA, learned absolute positions, ...) are refused with
one line naming the ``args`` key; so is a target TP that does not divide the
key/value groups (Megatron splits them, it never replicates them), or a model
whose behaviour flags Megatron's ``args`` cannot express. Objects in the files
other than tensors and plain values (numpy RNG states, enums in ``args``) load as
inert placeholders (``core.checkpointing.map_foreign_file``): no code from the
file runs.

Pipeline layout flags (Megatron/MindSpeed names, for ``--save-model-type mg``):
``--target-pipeline-parallel-size N``, ``--num-layer-list 3,5,...`` (layers per
stage), ``--num-layers-per-virtual-pipeline-stage K`` or
``--virtual-pipeline-model-parallel-size V`` (interleaved chunks), and
``--noop-layers i,j`` (parameterless layer slots, by global layer number). The
placement is the production one (``core/pipeline_parallel/layout.py``) and the
parameter names and shapes are those of the model chunks training builds
(``core/models/gpt_model.py``, on the meta device). Noop layers exist only in
Megatron checkpoints: Hugging Face layer ``j`` is the ``j``-th non-noop layer,
so ``--num-layers`` (optional, checked when given) is the HF layer count plus
the number of noop layers. A Megatron source's layout (TP, PP, VPP,
``--num-layer-list``, noop layers) is read from its checkpoint; from mg to mg
the noop layers are kept unless ``--noop-layers`` is given (``""`` for none).

What it writes:

* ``mg``: ``<save-dir>/release/mp_rank_TT[_PPP]/model_optim_rng.pt`` per TP rank
  ``TT`` and pipeline stage ``PPP`` (the suffix only when PP > 1) with
  ``model`` (state dict; ``model0``, ``model1``, ... per virtual chunk),
  ``args`` (Megatron flag-style namespace: TP, PP, virtual pipeline sizes,
  ``num_layer_list``, ``noop_layers``, ...), ``transformer_config``,
  ``hf_config`` (the source ``config.json``, so the way back gives an
  equivalent config), ``checkpoint_version`` and ``iteration`` = 0; then
  ``latest_checkpointed_iteration.txt`` = ``release``, last. With tied
  embeddings and PP > 1 the last stage also holds ``output_layer.weight``, the
  copy of the word embeddings that training keeps there.
* ``hf``: ``model.safetensors`` (or ``model-0000k-of-0000n.safetensors`` shards
  plus ``model.safetensors.index.json`` when larger than ``--max-shard-size``)
  and ``config.json``, last.

Every tensor goes through one canonical form, the Hugging Face tensors of the
registry's weight map (``mindspeed_llm/models/registry.py``), and is split or
joined over TP with the production shard specs (``param_meta(param).tp_shard`` of a
``GPTModel`` built on the meta device). Parameter names carry global layer
numbers, so joining pipeline stages is a union of their state dicts (the last
stage's tied-embedding copy is dropped). Memory stays far below the model's
size: an HF source is read one tensor at a time (each shard mapped only for
that read); a Megatron source is memory-mapped and each read maps the stage's
rank files one at a time, copies the rank's piece into place in the full tensor
(:meth:`TPShard.place`; a tensor replicated over TP is read from rank 0 only)
and unmaps the file; an mg target is written in one
pass over the source per TP rank, each tensor slice written into its (rank,
stage) file as it arrives (:class:`core.checkpointing.StreamingCheckpoint`: no
file is held in memory) and the file closed after its last parameter; an HF
target streams each tensor's bytes into its shard; freed tensors go back to the
OS at once (:func:`return_large_frees_to_the_os`). ``bench/convert.py``
measures it (TinyLlama's 1.1B shape, bf16, HF -> TP2xPP2 -> HF: peak RSS
0.42 GB each way, of which 0.22 GB is the imported torch, against 2.48 GB for
transformers' from_pretrained + save_pretrained). Any input
error (missing directory, config or tensor; unknown family; a TP size that does
not divide the heads; a layer list of the wrong length or sum; a PP size that
does not divide the layers; a noop layer out of range; an incompatible virtual
pipeline; an unsupported ``model_type``; an index naming a missing shard; a
tensor the weight map needs that the checkpoint lacks) is one line on stderr,
naming the family and the tensor or file, with exit code 2, detected before
anything is written. The output is written into a temporary sibling directory
(``.<name>.converting-<pid>``) and renamed to ``--save-dir`` at the end, its
tracker / ``config.json`` last (:func:`publish`); a run that fails midway
removes it, so nothing partial looks complete and an earlier conversion in
``--save-dir`` stays intact.

``--save-dir`` is never overwritten by accident: when it already holds a
checkpoint of the target's kind (mg / megatron: a tracker, ``release/`` or
``iter_*`` directories, e.g. a training run's ``--save``, whose tracker would
lose its resume point; hf: ``config.json`` or ``*.safetensors``; PEFT: the
adapter files) the conversion stops with one line naming the directory and
``--overwrite``, before anything is written, and the directory is left
byte-for-byte as it was. With ``--overwrite`` the earlier checkpoint of that
kind is replaced (``iter_*`` directories and other files stay). A tensor
holding NaN or Inf (a diverged run) is refused with one line naming the
tensor and its source file, and nothing is written; ``--allow-non-finite``
exports it with a warning; so is a value ``--params-dtype fp16`` cannot hold
(it would become Inf). A Megatron source without its tracker (a training
run's ``--save`` whose tracker was lost) gives its newest complete
iteration (``checkpoint_complete`` marker), as training's ``--load`` does; a
tracker naming a missing iteration, an unreadable tracker and a truncated
safetensors file are one line each. Files get the usual permissions (``umask``).

``--model-type-hf`` takes MindSpeed's names (``llama2``, ``mistral``,
``qwen``, ...) and HF ``model_type`` strings (``llama``, ``qwen2``, ...);
without it the family is config.json's ``model_type`` (hf) or the one the
checkpoint recorded (mg).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

if not __package__:  # run as a script (python tools/X.py) from a checkout not installed with pip install -e
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
from safetensors import SafetensorError, safe_open
from tqdm import tqdm

from core import dist_checkpointing as dist_format
from core.checkpointing import (
    CHECKPOINT_FILENAME,
    CHECKPOINT_VERSION,
    COMPLETE_MARKER,
    TRACKER_FILENAME,
    CheckpointError,
    StreamingCheckpoint,
    atomic_save,
    checkpoint_file,
    iteration_dir,
    latest_iteration,
    map_file,
    map_foreign_file,
    model_keys,
    namespace_for_checkpoint,
    non_finite_count,
    read_tracker,
    write_tracker,
)
from core.models.gpt_model import EMBEDDING_WEIGHT, GPTModel, layout_state
from core.parallel_state import expert_dimension
from core.pipeline_parallel.layout import (LayoutError, Placement, chunk_specs, resolve_virtual_pipeline,
                                          stage_layers)
from core.tensor_parallel.lora import LoraConfig, add_lora, is_adapter
from core.tensor_parallel.param_meta import TPShard, expert_slice, full_shape, param_meta
from core.transformer.config import TransformerConfig
from mindspeed_llm.flags import FlagParser, add_pipeline_layout_args
from mindspeed_llm.models import megatron_format
from mindspeed_llm.models.qkv_layout import interleaved_to_ours, ours_to_interleaved
from mindspeed_llm.posttrain import peft_format
from mindspeed_llm.models.registry import (
    IGNORED_HF_TENSORS,
    Family,
    RegistryError,
    TensorContext,
    VALUE_HEAD_RULE,
    WeightRule,
    family_for_hf_config,
    find_rule,
    get_family,
    to_hf,
    to_ours,
)

SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
HF_CONFIG = "config.json"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class ConversionError(RuntimeError):
    """A bad input; the message is one line naming the path or flag and the fix."""


# --------------------------------------------------------------------------- arguments


def build_parser() -> argparse.ArgumentParser:
    parser = FlagParser(description="Convert checkpoints between Hugging Face (hf), ours (mg) and Megatron-LM / "
                                     "MindSpeed-LLM's (megatron).", error_class=ConversionError)
    formats = ("hf", "mg", "megatron")
    formats_help = ("hf: Hugging Face safetensors + config.json; mg: this suite's sharded checkpoint; megatron: "
                    "a checkpoint written by Megatron-LM or MindSpeed-LLM (mcore), its layout read from its args")
    parser.add_argument("--load-model-type", choices=formats, required=True, help=formats_help)
    parser.add_argument("--save-model-type", choices=formats, required=True, help=formats_help)
    parser.add_argument("--load-dir", required=True)
    parser.add_argument("--save-dir", required=True)
    parser.add_argument("--model-type-hf", default=None,
                        help="family: a MindSpeed name (llama2, mistral, qwen, ...) or an HF model_type (llama, "
                             "qwen2, ...); default: config.json's model_type (hf), the checkpoint's family (mg)")
    parser.add_argument("--target-tensor-parallel-size", type=int, default=1)
    parser.add_argument("--target-pipeline-parallel-size", type=int, default=1)
    parser.add_argument("--target-expert-parallel-size", type=int, default=1,
                        help="EP of an mg target: each file mp_rank_TT[_PPP]_EEE holds 1/EP of every MoE layer's "
                             "experts")
    parser.add_argument("--target-expert-tensor-parallel-size", type=int, default=None,
                        help="expert TP of an mg target: the target TP (default; experts split like the MLP) or 1 "
                             "(whole experts spread over TP x EP / TP ranks, EP a multiple of TP)")
    add_pipeline_layout_args(parser, title="pipeline layout of an mg or megatron target (--noop-layers "
                                           "default: none from hf, the source's from mg or megatron)")
    parser.add_argument("--num-layers", type=int, default=None,
                        help="total layers of an mg or megatron target (checked: HF layers + noop layers)")
    parser.add_argument("--make-vocab-size-divisible-by", type=int, default=None,
                        help="vocab padding multiple (x TP); default 1 from HF, the source's value from mg or "
                             "megatron")
    parser.add_argument("--params-dtype", choices=tuple(DTYPES), default=None, help="default: keep")
    parser.add_argument("--transformer-impl", choices=megatron_format.TRANSFORMER_IMPLS, default=None,
                        help="layer naming of a megatron target: local (MindSpeed-LLM; input_layernorm, "
                             "pre_mlp_layernorm; the default) or transformer_engine (Megatron-LM's default; norms "
                             "fused into linear_qkv / linear_fc1 as layer_norm_weight, plus _extra_state)")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="the real (unpadded) vocabulary of a megatron source whose args do not record it "
                             "(Megatron keeps only padded_vocab_size); default: args.vocab_size, else the padded size")
    parser.add_argument("--ckpt-format", choices=("torch", "torch_dist"), default="torch",
                        help="format of an mg target: torch (one file per TP/PP/EP rank, laid out by the --target-* "
                             "flags) or torch_dist (torch.distributed.checkpoint, every tensor whole: it loads at "
                             "any layout, so no --target-* flags). An mg source is read in either format")
    parser.add_argument("--max-shard-size", default="5GB", help="HF output shard size, e.g. 5GB, 500MB, 2GiB")
    parser.add_argument("--lora-load", default=None, metavar="DIR",
                        help="an adapter checkpoint (a --lora-target-modules run's --save) over the mg base "
                             "--load-dir, written merged (W + alpha/r B A) as a plain hf or mg checkpoint")
    parser.add_argument("--save-lora-to-hf", action="store_true",
                        help="with --lora-load: write the adapters alone in PEFT's format (adapter_config.json, "
                             "adapter_model.safetensors) instead of the merged model")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what --save-dir already holds of the target format (a tracker, release/ or "
                             "iter_* directories; config.json or *.safetensors); without it such a --save-dir is "
                             "refused and left untouched")
    parser.add_argument("--allow-non-finite", action="store_true",
                        help="export tensors holding NaN/Inf with a warning (default: refuse, naming the tensor and "
                             "its file)")
    return parser


def parse_size(text: str) -> int:
    """Bytes in ``5GB`` / ``500MB`` / ``2GiB`` / ``1000`` (decimal and binary units, as HF)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)?\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ConversionError(f"--max-shard-size {text!r} is not a size; write e.g. 5GB, 500MB or 2GiB")
    number, unit = float(match.group(1)), (match.group(2) or "B").upper()
    if number <= 0:
        raise ConversionError(f"--max-shard-size {text!r} must be more than 0; write e.g. 5GB, 500MB or 2GiB")
    scale = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    return max(int(number * scale), 1)


def validate_args(args: argparse.Namespace) -> None:
    args.num_layer_list = args.num_layer_list or None  # "" means none, as no flag
    if args.target_pipeline_parallel_size < 1:
        raise ConversionError("--target-pipeline-parallel-size must be >= 1")
    if args.save_model_type == "hf":
        given = [flag for flag, value in (
            ("--target-pipeline-parallel-size", args.target_pipeline_parallel_size != 1),
            ("--num-layer-list", args.num_layer_list), ("--noop-layers", args.noop_layers),
            ("--num-layers-per-virtual-pipeline-stage", args.num_layers_per_virtual_pipeline_stage is not None),
            ("--virtual-pipeline-model-parallel-size", args.virtual_pipeline_model_parallel_size is not None),
            ("--num-layers", args.num_layers is not None)) if value]
        if given:
            raise ConversionError(f"{', '.join(given)} describe(s) a Megatron target; a Hugging Face checkpoint has "
                                  "no pipeline layout or noop layers (the source's are read from its checkpoint); "
                                  "drop the flag(s)")
    if args.target_tensor_parallel_size < 1:
        raise ConversionError("--target-tensor-parallel-size must be >= 1")
    if args.target_expert_parallel_size < 1:
        raise ConversionError("--target-expert-parallel-size must be >= 1")
    if args.target_expert_tensor_parallel_size not in (None, 1, args.target_tensor_parallel_size):
        raise ConversionError("--target-expert-tensor-parallel-size must be 1 or the target TP")
    if args.target_expert_tensor_parallel_size is not None and args.save_model_type != "mg":
        raise ConversionError("--target-expert-tensor-parallel-size lays out the experts of an mg target; drop it")
    if args.target_expert_parallel_size > 1 and args.save_model_type != "mg":
        raise ConversionError(f"--target-expert-parallel-size shards the experts of an mg target; a "
                              f"{args.save_model_type} target holds all experts, drop it")
    if args.transformer_impl is not None and args.save_model_type != "megatron":
        raise ConversionError("--transformer-impl names the layers of a megatron target; drop it or pass "
                              "--save-model-type megatron")
    if args.vocab_size is not None and args.load_model_type != "megatron":
        raise ConversionError("--vocab-size is the real vocabulary of a megatron source; drop it (hf and mg "
                              "checkpoints record theirs)")
    if args.vocab_size is not None and args.vocab_size < 1:
        raise ConversionError("--vocab-size must be >= 1")
    if args.make_vocab_size_divisible_by is not None and args.make_vocab_size_divisible_by < 1:
        raise ConversionError("--make-vocab-size-divisible-by must be >= 1")
    if not os.path.isdir(args.load_dir):
        raise ConversionError(f"--load-dir {args.load_dir} does not exist or is not a directory; "
                              "pass the directory that holds the checkpoint")
    if os.path.abspath(args.load_dir) == os.path.abspath(args.save_dir):
        raise ConversionError("--save-dir must differ from --load-dir; write the conversion to a new directory")
    protect_save_dir(args)
    parse_size(args.max_shard_size)
    _validate_dist_target(args)
    if args.model_type_hf is not None:
        get_family(args.model_type_hf)
    _validate_lora_args(args)


def _validate_dist_target(args: argparse.Namespace) -> None:
    """``--ckpt-format torch_dist`` writes an mg checkpoint without a layout: the layout flags have no meaning."""
    if args.ckpt_format != "torch_dist":
        return
    if args.save_model_type != "mg":
        raise ConversionError("--ckpt-format torch_dist is a format of an mg target; drop it or pass "
                              "--save-model-type mg")
    given = [flag for flag, value in (
        ("--target-tensor-parallel-size", args.target_tensor_parallel_size != 1),
        ("--target-pipeline-parallel-size", args.target_pipeline_parallel_size != 1),
        ("--target-expert-parallel-size", args.target_expert_parallel_size != 1),
        ("--target-expert-tensor-parallel-size", args.target_expert_tensor_parallel_size is not None),
        ("--num-layer-list", args.num_layer_list),
        ("--num-layers-per-virtual-pipeline-stage", args.num_layers_per_virtual_pipeline_stage is not None),
        ("--virtual-pipeline-model-parallel-size", args.virtual_pipeline_model_parallel_size is not None)) if value]
    if given:
        raise ConversionError(f"{', '.join(given)} lay(s) out a per-rank checkpoint; a torch_dist checkpoint loads "
                              "at any layout (training's flags choose it): drop the flag(s)")


def target_kind(args: argparse.Namespace) -> str:
    """What the conversion writes: ``checkpoint`` (mg, megatron), ``hf`` (a model) or ``peft`` (adapters)."""
    if args.save_model_type != "hf":
        return "checkpoint"
    return "peft" if args.save_lora_to_hf else "hf"


ITERATION_DIR = re.compile(r"iter_\d{7}")


def replaced_by(kind: str, name: str) -> bool:
    """Whether the entry ``name`` of ``--save-dir`` is part of a checkpoint of ``kind`` (what a conversion of that
    kind replaces; a Megatron checkpoint's ``iter_*`` directories are kept, but their presence needs --overwrite)."""
    if kind == "checkpoint":
        return name in (TRACKER_FILENAME, "release")
    if kind == "peft":
        return name in (peft_format.PEFT_CONFIG, peft_format.PEFT_WEIGHTS)
    return name in (HF_CONFIG, SAFETENSORS_INDEX) or (name.endswith(".safetensors")
                                                      and name != peft_format.PEFT_WEIGHTS)


def protect_save_dir(args: argparse.Namespace) -> None:
    """``--save-dir`` is a new or empty directory, or holds nothing the conversion would replace, unless
    ``--overwrite``: a training run's tracker and ``iter_*`` directories or an earlier model stay as they are."""
    save_dir = args.save_dir
    if os.path.lexists(save_dir) and not os.path.isdir(save_dir):
        raise ConversionError(f"--save-dir {save_dir} is a file; give a directory (new or empty)")
    if args.overwrite or not os.path.isdir(save_dir):
        return
    kind = target_kind(args)
    held = sorted(name for name in os.listdir(save_dir)
                  if replaced_by(kind, name) or (kind == "checkpoint" and ITERATION_DIR.fullmatch(name)))
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ConversionError(f"--save-dir {save_dir} already holds a checkpoint ({shown}); converting into it would "
                              "replace it (a training directory's tracker would lose its resume point): give a new "
                              "--save-dir, or pass --overwrite to replace it")


def _validate_lora_args(args: argparse.Namespace) -> None:
    if args.save_lora_to_hf and not args.lora_load:
        raise ConversionError("--save-lora-to-hf writes the adapters of --lora-load DIR; pass --lora-load")
    if not args.lora_load:
        return
    if args.load_model_type != "mg":
        raise ConversionError("--lora-load merges adapters into an mg base; pass --load-model-type mg")
    if args.save_lora_to_hf and args.save_model_type != "hf":
        raise ConversionError("--save-lora-to-hf writes PEFT's adapter files; pass --save-model-type hf")
    if not os.path.isdir(args.lora_load):
        raise ConversionError(f"--lora-load {args.lora_load} does not exist or is not a directory; pass the "
                              "directory a LoRA run saved (--save)")
    if peft_format.is_peft_dir(args.lora_load):
        raise ConversionError(f"--lora-load {args.lora_load} is a PEFT adapter; the converter merges a LoRA run's "
                              "--save (load the PEFT adapter into training with --lora-load, then convert its --save)")
    if read_tracker(args.lora_load) is None:
        raise ConversionError(f"--lora-load {args.lora_load} has no {TRACKER_FILENAME}: not an adapter checkpoint; "
                              "pass the directory a LoRA run saved (--save)")


# --------------------------------------------------------------------------- model layout


Location = Tuple[int, int, str]  # (pipeline stage, virtual chunk, parameter name in that chunk)


def checkpoint_tensors(model: torch.nn.Module) -> List[Tuple[str, torch.Tensor]]:
    """The tensors a checkpoint holds: the parameters, then the persistent buffers (a router's ``expert_bias``)."""
    persistent = set(model.state_dict(keep_vars=True))
    buffers = [(name, buf) for name, buf in model.named_buffers() if name in persistent]
    return list(model.named_parameters()) + buffers


class ModelLayout:
    """Our model at a TP size and pipeline placement, built on the meta device.

    ``names``, ``shards``, ``full_shapes`` and ``rules`` describe the whole model
    (one stage, every layer): the canonical parameter names. ``chunk_names[r][c]``
    are the names of chunk ``c`` on stage ``r`` as training builds it
    (:func:`core.pipeline_parallel.layout.chunk_specs` + ``GPTModel``, as
    ``build_model_chunks``), with their local shapes in ``local_shapes``.
    ``locations[name]`` lists where a canonical parameter is stored, its own
    place first; with tied embeddings over several stages the word embeddings
    also sit on the last stage as ``output_layer.weight``.
    """

    def __init__(self, config: TransformerConfig, rules: Sequence[WeightRule],
                 placement: Optional[Placement] = None) -> None:
        self.config, self.tp = config, config.tensor_model_parallel_size
        self.ep = config.expert_model_parallel_size  # every MoE layer's experts split over this many ranks
        etp = config.expert_tensor_parallel_size
        self.whole_experts = etp == 1 and self.tp > 1  # experts not split over TP: spread over TP x EP / TP
        self.ep_files = expert_dimension(self.tp, self.ep, etp)  # the EEE of mp_rank_TT_PPP_EEE
        self.placement: Placement = placement or [[list(range(config.num_layers))]]
        self.pp, self.vpp = len(self.placement), len(self.placement[0])
        state = layout_state(self.tp, ep=self.ep_files, expert_tp=etp)
        with torch.device("meta"):
            model = GPTModel(config, state)
        self.shards: Dict[str, Optional[TPShard]] = {}
        self.full_shapes: Dict[str, Tuple[int, ...]] = {}
        self.experts: set = set()  # expert tensors: EP rank r holds experts [r * E / ep, (r + 1) * E / ep)
        self.stored_shapes: Dict[str, Tuple[int, ...]] = {}  # torch_dist's: the vocabulary without TP padding
        for name, param in checkpoint_tensors(model):
            self.shards[name], self.full_shapes[name] = param_meta(param).tp_shard, tuple(full_shape(param))
            self.stored_shapes[name] = tuple(param_meta(param).init_shape or self.full_shapes[name])
            if param_meta(param).num_global_experts is not None:
                self.experts.add(name)
        del model
        self.names: List[str] = list(self.shards)
        self.rules = {name: find_rule(rules, name) for name in self.names}
        self.tied = not config.untie_embeddings_and_output_weights
        # HF's own copy of tied embeddings (lm_head.weight; GPT-NeoX's embed_out.weight), which some checkpoints hold
        self.tied_output_names = _output_layer_names(rules) if self.tied else ()
        self.chunk_names: List[List[List[str]]] = []
        self.local_shards: Dict[Location, Optional[TPShard]] = {}
        self.expert_locations: set = set()
        self.local_shapes: Dict[Location, Tuple[int, ...]] = {}
        self.locations: Dict[str, List[Location]] = {name: [] for name in self.names}
        copies: List[Tuple[str, Location]] = []
        for stage in range(self.pp):
            stage_names = []
            for chunk, spec in enumerate(chunk_specs(self.placement, stage)):
                with torch.device("meta"):
                    part = GPTModel(config, state, pre_process=spec.pre_process, post_process=spec.post_process,
                                    layer_numbers=spec.layer_numbers)
                names = []
                for name, param in checkpoint_tensors(part):
                    where = (stage, chunk, name)
                    if param_meta(param).num_global_experts is not None:
                        self.expert_locations.add(where)
                    self.local_shards[where] = param_meta(param).tp_shard
                    self.local_shapes[where] = tuple(param.shape)
                    names.append(name)
                    if self.is_tied_copy(name) or (name == EMBEDDING_WEIGHT and not spec.pre_process):  # MTP stage
                        copies.append((EMBEDDING_WEIGHT, where))
                    elif name in self.locations and not self.locations[name]:
                        self.locations[name].append(where)
                    else:
                        raise AssertionError(f"parameter {name} placed twice or unknown")
                stage_names.append(names)
                del part
            self.chunk_names.append(stage_names)
        for name, where in copies:
            self.locations[name].append(where)
        missing = [name for name, places in self.locations.items() if not places]
        if missing:
            raise AssertionError(f"parameters {missing[:3]} are on no pipeline stage")

    def is_tied_copy(self, name: str) -> bool:
        """The last stage's copy of tied word embeddings (only exists when PP > 1)."""
        return self.tied and name == "output_layer.weight"

    @property
    def ranks(self) -> int:
        """Files per pipeline stage: one per (TP rank, EP rank), numbered ``ep_rank * tp + tp_rank``."""
        return self.tp * self.ep_files

    def expert_index(self, rank: int) -> int:
        """Which of the ``ep`` slices of every expert tensor file ``rank`` holds."""
        return rank if self.whole_experts else rank // self.tp

    @property
    def chunk_keys(self) -> List[str]:
        """The state-dict keys of each file: ``model``, or ``model0``, ``model1``, ... (VPP)."""
        return ["model"] if self.vpp == 1 else [f"model{c}" for c in range(self.vpp)]

    def context(self, name: str) -> TensorContext:
        shard = self.shards[name]
        splits = tuple(seg.size for seg in shard.segments) if shard is not None else ()
        return TensorContext(splits, self.config.vocab_size, self.config.padded_vocab_size, self.config)

    def hf_names(self) -> List[str]:
        return [hf for name in self.names for hf in self.rules[name][1]]


def check_tp(config: TransformerConfig, tp: int, source: str) -> None:
    """Reject a target TP that does not divide the heads, KV heads or FFN (named with our flag)."""
    heads, groups, ffn = config.num_attention_heads, config.num_query_groups, config.ffn_hidden_size
    problems = []
    if not config.has_attention_layers:  # all Mamba layers: the config checks the mixer's sizes
        return
    if heads % tp:
        problems.append(f"num_attention_heads {heads}")
    if (groups >= tp and groups % tp) or (groups < tp and tp % groups):
        problems.append(f"num_key_value_heads {groups} (must divide or be divided by TP)")
    if ffn % tp:
        problems.append(f"ffn_hidden_size {ffn}")
    if problems:
        raise ConversionError(f"--target-tensor-parallel-size {tp} does not divide {', '.join(problems)} "
                              f"of {source}; choose a TP size that divides them")


def check_ep(config: TransformerConfig, ep: int, source: str) -> None:
    """Reject a target EP that does not divide the experts (or a model without experts)."""
    if ep == 1:
        return
    if config.num_experts is None:
        raise ConversionError(f"--target-expert-parallel-size {ep}: {source} has no experts (a dense model); "
                              "drop the flag")
    if config.num_experts % ep:
        raise ConversionError(f"--target-expert-parallel-size {ep} does not divide the {config.num_experts} experts "
                              f"of {source}; choose an EP size that divides them")


def with_tp(config: TransformerConfig, tp: int, divisible_by: int, dtype: Optional[torch.dtype],
            source: str, **layers: Any) -> TransformerConfig:
    check_tp(config, tp, source)
    changes: Dict[str, Any] = {"tensor_model_parallel_size": tp, "make_vocab_size_divisible_by": divisible_by,
                               **layers}
    if dtype is not None:
        changes["params_dtype"] = dtype
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as error:
        raise ConversionError(f"{source}: {error}") from None


# --------------------------------------------------------------------------- sources


class HFSource:
    """Reads HF tensors from ``model.safetensors`` or an index of shards, one tensor at a time.

    A shard is opened (memory-mapped) only for the read of one tensor and closed after it, so the
    pages read do not stay in this process's resident memory.
    """

    rereadable = True  # read() leaves the checkpoint as it is: a tensor can be read once per TP rank

    def __init__(self, load_dir: str, family_name: Optional[str]) -> None:
        self.load_dir = load_dir
        self.hf_config = read_hf_config(load_dir)
        self.family: Family = resolve_family(family_name, self.hf_config, os.path.join(load_dir, HF_CONFIG))
        self.family_name = self.family.name
        try:
            self.config = TransformerConfig(**self.family.to_config(self.hf_config))
        except (RegistryError, ValueError) as error:
            raise ConversionError(f"{os.path.join(load_dir, HF_CONFIG)}: {error}") from None
        self.where, self.shapes = self._index()
        self._drop_absent_mtp_layers()

    def _drop_absent_mtp_layers(self) -> None:
        """A config.json with MTP layers (``num_nextn_predict_layers``) over weights without them (transformers
        drops them when it saves DeepSeek-V3 or GLM-4.5): convert the model transformers sees, without MTP."""
        depth = self.config.mtp_num_layers
        if not depth or any(n.startswith(f"model.layers.{self.config.num_layers}.") for n in self.where):
            return
        print(f"convert_ckpt: note: {self.load_dir} has no tensors of its {depth} MTP layer(s) "
              f"(model.layers.{self.config.num_layers}.*); converting without multi-token prediction",
              file=sys.stderr)
        self.config = dataclasses.replace(self.config, mtp_num_layers=None)

    def _index(self) -> Tuple[Dict[str, str], Dict[str, Tuple[int, ...]]]:
        """Tensor name -> shard path, and tensor name -> shape (from the shard headers)."""
        index_path = os.path.join(self.load_dir, SAFETENSORS_INDEX)
        single_path = os.path.join(self.load_dir, SAFETENSORS_SINGLE)
        if os.path.isfile(index_path):
            with open(index_path) as handle:
                weight_map = json.load(handle).get("weight_map", {})
            self.listing = index_path
        elif os.path.isfile(single_path):
            weight_map, self.listing = None, single_path
        else:
            raise ConversionError(f"--load-dir {self.load_dir} has neither {SAFETENSORS_SINGLE} nor "
                                  f"{SAFETENSORS_INDEX}; save the model with save_pretrained(safe_serialization=True)")
        files = sorted(set(weight_map.values())) if weight_map is not None else [SAFETENSORS_SINGLE]
        where: Dict[str, str] = {}
        shapes: Dict[str, Tuple[int, ...]] = {}
        for file in files:
            path = os.path.join(self.load_dir, file)
            if not os.path.isfile(path):
                raise ConversionError(f"{index_path} (family {self.family_name}) lists shard {file}, which is "
                                      f"missing from {self.load_dir}; copy the complete checkpoint")
            try:
                with safe_open(path, framework="pt") as handle:
                    for name in handle.keys():
                        where[name], shapes[name] = path, tuple(handle.get_slice(name).get_shape())
            except (SafetensorError, OSError) as error:
                raise ConversionError(f"{path} is truncated or not a safetensors file ({error}); copy the complete "
                                      "checkpoint again") from None
        if weight_map is not None:  # trust the index only where the shard agrees
            where = {name: os.path.join(self.load_dir, file) for name, file in weight_map.items()
                     if where.get(name) == os.path.join(self.load_dir, file)}
        return where, shapes

    def check(self, layout: ModelLayout) -> None:
        """Every tensor the map needs is present, and every present tensor is used."""
        needed = layout.hf_names()
        for name in needed:
            if name not in self.where:
                raise ConversionError(f"tensor {name!r} needed by family {self.family_name} is missing from "
                                      f"{self.listing}; the weights do not match config.json / --model-type-hf")
        unused = [n for n in self.where if n not in set(needed) and not _ignorable(n, layout)]
        if unused:
            raise ConversionError(f"{len(unused)} tensor(s) in {self.listing} are not used by --model-type-hf "
                                  f"{self.family_name} (e.g. {unused[0]!r}); pick the family that matches config.json")
        for name in layout.names:  # shapes, from the headers only (meta tensors)
            rule, hf_names = layout.rules[name]
            metas = [torch.empty(self.shapes[n], device="meta") for n in hf_names]
            try:
                full = to_ours(rule, metas, layout.context(name))
            except RegistryError as error:
                raise ConversionError(f"{name} from {list(hf_names)} in {self.listing}: {error}") from None
            _check_shape(name, full, layout.full_shapes[name])

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the name in the file, the file) of HF tensor ``hf_name``, read for our ``name``."""
        return hf_name, self.where[hf_name]

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        tensors = []
        for hf_name in hf_names:
            try:
                with safe_open(self.where[hf_name], framework="pt") as handle:
                    tensors.append(handle.get_tensor(hf_name))
            except (SafetensorError, OSError) as error:
                raise ConversionError(f"{self.where[hf_name]}: tensor {hf_name!r} cannot be read ({error}); the file "
                                      "is truncated or damaged, copy the complete checkpoint again") from None
        return tensors


def _output_layer_names(rules: Sequence[WeightRule]) -> Tuple[str, ...]:
    """The HF names of the output layer's weight in the family's map (``lm_head.weight`` without one)."""
    try:
        return find_rule(rules, "output_layer.weight")[1]
    except RegistryError:
        return ("lm_head.weight",)


def _ignorable(name: str, layout: "ModelLayout") -> bool:
    if any(pattern.match(name) for pattern in IGNORED_HF_TENSORS):
        return True
    return name in layout.tied_output_names  # the tied copy of the word embeddings


def read_hf_config(load_dir: str) -> Dict[str, Any]:
    path = os.path.join(load_dir, HF_CONFIG)
    if not os.path.isfile(path):
        raise ConversionError(f"--load-dir {load_dir} has no {HF_CONFIG}: not a Hugging Face model directory "
                              "(for a Megatron checkpoint pass --load-model-type mg)")
    with open(path) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ConversionError(f"{path} is not valid JSON ({error}); restore the file") from None


def resolve_family(name: Optional[str], hf_config: Optional[Dict[str, Any]], where: str) -> Family:
    """The family named by ``--model-type-hf``, else the one of ``hf_config``'s ``model_type``."""
    if name is not None:
        return get_family(name)
    if hf_config is None:  # a checkpoint trained from scratch records neither
        print(f"convert_ckpt: note: {where} records no family; converting as llama2 (pass --model-type-hf "
              "for another)", file=sys.stderr)
        return get_family("llama2")
    return family_for_hf_config(hf_config, where)


def source_iteration(load_dir: str) -> Tuple[int, bool]:
    """(iteration, is release) of the checkpoint in ``load_dir``: the tracker's, else (a training run's --save
    whose tracker is gone) the newest iteration with its completion marker, as training's --load finds it."""
    tracker = latest_iteration(load_dir)  # (a lost tracker: the newest complete iteration, with a warning)
    if tracker is None:
        started = [n for n in sorted(os.listdir(load_dir)) if ITERATION_DIR.fullmatch(n)]
        if started:
            raise ConversionError(f"--load-dir {load_dir} has no {TRACKER_FILENAME} and none of its {len(started)} "
                                  f"iteration directories (the newest: {started[-1]}) is complete (no "
                                  f"{COMPLETE_MARKER}: saves that did not finish); convert a complete checkpoint")
        raise ConversionError(f"--load-dir {load_dir} has no {TRACKER_FILENAME}: not a Megatron checkpoint "
                              "(for a Hugging Face directory pass --load-model-type hf)")
    directory = iteration_dir(load_dir, tracker[0], tracker[1])
    if not os.path.isdir(directory):
        raise ConversionError(f"--load-dir {load_dir}: its {TRACKER_FILENAME} names "
                              f"{'release' if tracker[1] else f'iteration {tracker[0]}'}, but {directory} does not "
                              "exist; fix the tracker to name a saved iteration, or copy the complete checkpoint")
    return tracker


class MegatronSource:
    """Reads every (TP rank, pipeline stage) file; yields full tensors in the HF canonical form.

    The layout (TP, PP, virtual chunks, ``--num-layer-list``, noop layers) comes
    from the checkpoint's ``args`` and ``transformer_config``; the directory names
    and the ``model``/``model0..`` keys must agree with it. Files are memory-mapped
    (``torch.load(mmap=True)``): opening them reads names and shapes only, and a
    read maps each TP rank's file of the stage, copies the piece and unmaps it, so
    resident memory stays at one full tensor.
    """

    rereadable = True  # read() leaves the checkpoint as it is
    overlay: Optional[Callable[[str, torch.Tensor], torch.Tensor]] = None  # (our name, full tensor) -> tensor read
    # names the overlay supplies whole, absent from the files (a LoRA reward model's value head over a plain LM)
    supplied: frozenset = frozenset()

    def __init__(self, load_dir: str, family_name: Optional[str], found: Optional[Tuple[int, bool]] = None) -> None:
        self.load_dir = load_dir
        self.iteration, self.release = found or source_iteration(load_dir)
        self.pp, self.ep = self._pipeline_and_expert_sizes()
        self._reject_distributed_format()
        first = self._map_first()
        args = first.get("args") or argparse.Namespace()
        self.tp = int(getattr(args, "tensor_model_parallel_size", 1) or 1)
        self.config = self._config(first, args, load_dir)
        self.placement = self._placement(first, args)
        self.hf_config = first.get("hf_config")
        self.family = resolve_family(family_name or getattr(args, "model_type_hf", None), self.hf_config,
                                     self.path(0, 0))
        self.family_name = self.family.name
        # shapes[(rank, pp_rank, chunk)] -> that chunk's parameter shapes; rank = ep_rank * tp + tp_rank
        self.shapes: Dict[Tuple[int, int, int], Dict[str, Tuple[int, ...]]] = {}
        self._keep(first, 0, 0)
        del first
        for pp_rank in range(self.pp):
            for rank in range(self.tp * self.ep):
                if (rank, pp_rank) != (0, 0):
                    self._keep(self._map(rank, pp_rank), rank, pp_rank)

    def path(self, rank: int, pp_rank: int) -> str:
        """The file of ``rank`` (``ep_rank * tp + tp_rank``; the TP rank before EP is known) on stage ``pp_rank``."""
        tp = getattr(self, "tp", 1)
        return checkpoint_file(self.load_dir, self.iteration, rank % tp, pp_rank, self.pp, release=self.release,
                               ep_rank=rank // tp, ep_size=self.ep)

    def _pipeline_and_expert_sizes(self) -> Tuple[int, int]:
        """(PP, EP) from the rank directories ``mp_rank_TT[_PPP][_EEE]``; a two-number name is a stage unless
        the checkpoint's args give EP > 1 and PP 1 (Megatron names them alike)."""
        root = iteration_dir(self.load_dir, self.iteration, self.release)
        names = os.listdir(root) if os.path.isdir(root) else []
        parsed = [tuple(int(n) for n in m.groups() if n is not None)
                  for m in (re.fullmatch(r"mp_rank_00(?:_(\d{3}))?(?:_(\d{3}))?", n) for n in names) if m]
        if not parsed or max(len(p) for p in parsed) == 0:
            return 1, 1
        if max(len(p) for p in parsed) == 2:
            return max(p[0] for p in parsed) + 1, max(p[1] for p in parsed) + 1
        count = max(p[0] for p in parsed) + 1
        first = os.path.join(root, sorted(n for n in names if n.startswith("mp_rank_00_"))[0], CHECKPOINT_FILENAME)
        args = map_foreign_file(first).get("args") if os.path.isfile(first) else None
        ep = int(getattr(args, "expert_model_parallel_size", 1) or 1)
        pp = int(getattr(args, "pipeline_model_parallel_size", 1) or 1)
        return (1, count) if ep > 1 and pp == 1 else (count, 1)

    def _reject_distributed_format(self) -> None:
        """Megatron-LM's distributed format (``--ckpt-format torch_dist``: ``*.distcp`` files, no rank
        directories) is not read; say how to get the per-rank one."""
        directory = os.path.dirname(os.path.dirname(self.path(0, 0)))
        names = os.listdir(directory) if os.path.isdir(directory) else []
        if not any(n.startswith("mp_rank_") for n in names) and any(n.endswith(".distcp") for n in names):
            raise ConversionError(f"{directory} is a distributed checkpoint (--ckpt-format torch_dist, *.distcp "
                                  "files); re-save it in the per-rank format with Megatron-LM's --ckpt-format torch "
                                  "(or --ckpt-convert-format torch) and convert that")

    def _map_first(self) -> Dict[str, Any]:
        """The first rank file, read so that one written by another program (Megatron's numpy RNG states,
        enums) opens and is told apart by its keys instead of failing to unpickle."""
        try:
            return map_foreign_file(self.path(0, 0))
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _map(self, tp_rank: int, pp_rank: int) -> Dict[str, Any]:
        """One rank file, memory-mapped (read whole when it is not in torch's zip format)."""
        try:
            return map_file(self.path(tp_rank, pp_rank))
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _keep(self, checkpoint: Dict[str, Any], tp_rank: int, pp_rank: int) -> None:
        keys = model_keys(checkpoint)
        expected = ["model"] if len(self.placement[0]) == 1 else [f"model{c}" for c in range(len(self.placement[0]))]
        if keys != expected:
            found = ", ".join(keys) or "no model state dict"
            raise ConversionError(f"{self.path(tp_rank, pp_rank)} holds {found}, expected {', '.join(expected)} "
                                  "for its virtual pipeline size; the checkpoint is incomplete or inconsistent")
        for chunk, key in enumerate(keys):
            if not isinstance(checkpoint[key], dict):
                raise ConversionError(f"{self.path(tp_rank, pp_rank)}: {key!r} is not a state dict")
            self.shapes[(tp_rank, pp_rank, chunk)] = {
                name: tuple(t.shape) for name, t in self._our_names(checkpoint[key], pp_rank, chunk).items()}

    def _our_names(self, state: Dict[str, Any], stage: int, chunk: int) -> Dict[str, Any]:
        """A chunk's state dict under our parameter names (ours: as stored)."""
        return state

    def _ranks_holding(self, shard: Optional[TPShard], expert: bool, layout: ModelLayout) -> List[int]:
        """The files (``ep_rank * tp + tp_rank``) whose pieces make a tensor: one copy of what is replicated over
        TP (rank 0's) or EP, every TP rank of a split tensor, every EP rank (and TP rank, for whole experts) of
        an expert tensor."""
        tps = range(self.tp if shard is not None or (expert and layout.whole_experts) else 1)
        eps = range(self.ep if expert else 1)
        return [ep_rank * self.tp + tp_rank for ep_rank in eps for tp_rank in tps]

    def _stored_name(self, stage: int, chunk: int, local: str) -> str:
        """The key in the file of our parameter ``local`` of chunk ``chunk`` on ``stage`` (ours: the same)."""
        return local

    def _place(self, name: str, shard: TPShard, piece: torch.Tensor, rank: int, full: torch.Tensor) -> None:
        """Copy TP rank ``rank``'s piece of parameter ``name`` into its place in the full tensor."""
        shard.place(piece, rank, self.tp, full)

    def _to_our_layout(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """The full tensor as our model lays it out (ours: as stored)."""
        return full

    def _config(self, first: Dict[str, Any], args: argparse.Namespace, load_dir: str) -> TransformerConfig:
        saved_pp = int(getattr(args, "pipeline_model_parallel_size", self.pp) or 1)
        if saved_pp != self.pp:
            raise ConversionError(f"{load_dir}: args say pipeline_model_parallel_size {saved_pp}, the rank "
                                  f"directories give {self.pp}; the checkpoint is incomplete or inconsistent")
        if not isinstance(first.get("transformer_config"), dict):
            raise ConversionError(f"{self.path(0, 0)} stores no transformer_config: it was not written by this "
                                  "suite; for a checkpoint of Megatron-LM or MindSpeed-LLM pass --load-model-type "
                                  "megatron")
        values = dict(first["transformer_config"])
        if "noop_layers" not in values:
            values["noop_layers"] = tuple(getattr(args, "noop_layers", None) or ())
        try:
            ep = int(getattr(args, "expert_model_parallel_size", None) or self.ep)  # files x TP with whole experts
            config = TransformerConfig.from_dict({**values, "tensor_model_parallel_size": self.tp,
                                                  "expert_model_parallel_size": ep})
        except (TypeError, ValueError) as error:
            raise ConversionError(f"{load_dir}: cannot rebuild the model config ({error})") from None
        return config

    def _placement(self, first: Dict[str, Any], args: argparse.Namespace) -> Placement:
        vpp = getattr(args, "virtual_pipeline_model_parallel_size", None) or len(model_keys(first)) or 1
        layer_list = getattr(args, "num_layer_list", None) or None
        try:
            return stage_layers(self.config.num_layers, self.pp, vpp if vpp > 1 else None, layer_list)
        except LayoutError as error:
            raise ConversionError(f"{self.load_dir}: its saved pipeline layout does not fit its model ({error})") \
                from None

    def check(self, layout: ModelLayout) -> None:
        for (tp_rank, pp_rank, chunk), state in self.shapes.items():
            path = self.path(tp_rank, pp_rank)
            expected = layout.chunk_names[pp_rank][chunk]
            for name in expected:
                if name not in state and name in self.supplied:
                    continue
                if name not in state:
                    raise ConversionError(f"parameter {name!r} needed by family {self.family_name} is missing from "
                                          f"{path} (chunk {chunk}); the checkpoint does not match its own "
                                          "transformer_config and pipeline layout")
                want = layout.local_shapes[(pp_rank, chunk, name)]
                if state[name] != want:
                    raise ConversionError(f"parameter {name!r} of rank {tp_rank} in {path} has shape "
                                          f"{state[name]}, expected {want} for TP {self.tp}; the "
                                          "checkpoint does not match its own transformer_config")
            extra = sorted(set(state) - set(expected))
            if extra:
                raise ConversionError(f"{path} (chunk {chunk}) has {len(extra)} unexpected parameter(s) (e.g. "
                                      f"{extra[0]!r}); the checkpoint does not match its own transformer_config, "
                                      "noop layers and pipeline layout")

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the name in the file, the rank file) of the first piece of ``name`` holding NaN / Inf (with
        ``finite``: the first piece); the load directory when no stored piece does (the merged --lora-load
        adapters brought them)."""
        if name not in self.supplied:
            stage, chunk, local = layout.locations[name][0]
            key, stored = layout.chunk_keys[chunk], self._stored_name(stage, chunk, local)
            for rank in self._ranks_holding(layout.shards[name], name in layout.experts, layout):
                if finite or non_finite_count(self._map(rank, stage)[key][stored]):
                    return stored, self.path(rank, stage)
        return name, f"{self.load_dir} merged with its --lora-load adapters"

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        if name in self.supplied:  # not in the files: the overlay's tensor
            return to_hf(layout.rules[name][0], self.overlay(name, None), layout.context(name))
        stage, chunk, local = layout.locations[name][0]  # (the tied copy on the last stage is not read)
        key, stored = layout.chunk_keys[chunk], self._stored_name(stage, chunk, local)
        shard = layout.shards[name]
        expert = name in layout.experts
        full: Optional[torch.Tensor] = None
        for rank in self._ranks_holding(shard, expert, layout):
            mapped = self._map(rank, stage)
            piece = mapped[key][stored]
            if full is None:
                full = piece.new_empty(layout.full_shapes[name])
            experts = expert_slice(full, layout.expert_index(rank), layout.ep) if expert else full
            if shard is None:
                experts.copy_(piece)
            else:
                self._place(name, shard, piece, rank % self.tp, experts)  # one rank's pages mapped at a time
            del piece, mapped  # unmaps the file
        full = self._to_our_layout(name, full)
        if self.overlay is not None:  # --lora-load: the adapters merged in
            full = self.overlay(name, full)
        return to_hf(layout.rules[name][0], full, layout.context(name))


class DistSource(MegatronSource):
    """Our ``--ckpt-format torch_dist`` checkpoint (core/dist_checkpointing.py): every tensor is stored whole,
    so it reads as a TP 1, PP 1 checkpoint, one DCP read per tensor."""

    def __init__(self, load_dir: str, family_name: Optional[str], found: Tuple[int, bool]) -> None:
        self.load_dir = load_dir
        self.iteration, self.release = found
        self.directory = directory = iteration_dir(load_dir, self.iteration, self.release)
        self.tp, self.pp, self.ep = 1, 1, 1
        common = _read_common(directory)
        args = common.get("args") or argparse.Namespace()
        self.config = self._config(common, argparse.Namespace(), load_dir)
        self.placement = stage_layers(self.config.num_layers, 1, None, None)
        self.hf_config = common.get("hf_config")
        self.family = resolve_family(family_name or getattr(args, "model_type_hf", None), self.hf_config,
                                     os.path.join(directory, dist_format.COMMON_FILENAME))
        self.family_name = self.family.name
        self.metadata = dist_format.read_metadata(directory)
        self.stored = dist_format.stored_keys(self.metadata)

    def path(self, rank: int, pp_rank: int) -> str:
        return os.path.join(self.directory, dist_format.COMMON_FILENAME)

    def check(self, layout: ModelLayout) -> None:
        for name in layout.names:
            key, want = dist_format.MODEL_PREFIX + name, layout.stored_shapes[name]
            if name in self.supplied:
                continue
            if key not in self.stored:
                raise ConversionError(f"{self.directory} has no tensor {name!r}, which family {self.family_name} "
                                      "needs; the checkpoint does not match its own transformer_config")
            if self.stored[key] != want:
                raise ConversionError(f"tensor {name!r} in {self.directory} has shape {self.stored[key]}, expected "
                                      f"{want}; the checkpoint does not match its own transformer_config")

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the stored key, the checkpoint directory) of ``name`` (DCP spreads a tensor over its files)."""
        return dist_format.MODEL_PREFIX + name, self.directory

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        if name in self.supplied:
            return to_hf(layout.rules[name][0], self.overlay(name, None), layout.context(name))
        stored = dist_format.read_full(self.directory, [dist_format.MODEL_PREFIX + name], self.metadata)
        value = stored[dist_format.MODEL_PREFIX + name]
        full = value.new_zeros(layout.full_shapes[name])  # the TP padding of the vocabulary, zero as trained
        full[tuple(slice(0, n) for n in value.shape)] = value
        if self.overlay is not None:
            full = self.overlay(name, full)
        return to_hf(layout.rules[name][0], full, layout.context(name))


def _read_common(directory: str) -> Dict[str, Any]:
    path = os.path.join(directory, dist_format.COMMON_FILENAME)
    try:
        return map_file(path)
    except CheckpointError as error:
        raise ConversionError(str(error)) from None


# --------------------------------------------------------------------------- sinks


class MegatronSink:
    """Slices each full tensor over the target TP ranks and places it on its pipeline stage(s).

    Each slice is written into its (TP rank, stage) file at once (:class:`StreamingCheckpoint`;
    the file keeps a placeholder), and the file is closed when its last parameter arrives, then
    the tracker: no file's tensors are held in memory. ``passes`` splits the work by TP rank when
    the source can be read once per rank, so that one rank's files are open at a time.
    """

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str,
                 hf_config: Optional[Dict[str, Any]]) -> None:
        self.save_dir, self.layout, self.family_name, self.hf_config = save_dir, layout, family_name, hf_config
        # per_file[(rank, pp_rank)][chunk] -> state dict; missing[(rank, pp_rank)] -> names still to come;
        # rank = ep_rank * tp + tp_rank (one file per TP rank and EP rank of a stage)
        self.per_file: Dict[Tuple[int, int], List[Dict[str, torch.Tensor]]] = {}
        self.missing: Dict[Tuple[int, int], set] = {
            (rank, pp): {(chunk, name) for chunk, names in enumerate(layout.chunk_names[pp]) for name in names}
            for pp in range(layout.pp) for rank in range(layout.ranks)}
        self.saved: set = set()
        self.writers: Dict[Tuple[int, int], StreamingCheckpoint] = {}  # files being written

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        """Source names grouped by target file (pipeline stage), largest tensors first within a stage, so
        that one file is filled at a time and big tensors arrive while it is still small."""
        def key(name: str) -> Tuple[int, int]:
            target = targets[name]
            return self.layout.locations[target][0][0], -math.prod(self.layout.full_shapes[target])
        return sorted(names, key=key)

    def passes(self, rereadable: bool) -> List[Tuple[int, ...]]:
        """The (TP, EP) ranks written by each pass over the source: one rank a pass when it can be reread."""
        ranks = tuple(range(self.layout.ranks))
        return [(rank,) for rank in ranks] if rereadable else [ranks]

    def write(self, name: str, tensors: Sequence[torch.Tensor], ranks: Sequence[int]) -> None:
        layout = self.layout
        full = to_ours(layout.rules[name][0], tensors, layout.context(name))
        _check_shape(name, full, layout.full_shapes[name])
        for stage, chunk, local in layout.locations[name]:
            shard = layout.local_shards[(stage, chunk, local)]
            expert = (stage, chunk, local) in layout.expert_locations
            for rank in ranks:
                experts = expert_slice(full, layout.expert_index(rank), layout.ep) if expert else full
                value = self._piece(local, experts, shard, rank % layout.tp)
                file = (rank, stage)
                self.per_file.setdefault(file, [{} for _ in range(layout.vpp)])[chunk][local] = \
                    self._file(rank, stage).add(value)  # written now; the file keeps a placeholder
                del value
                self.missing[file].discard((chunk, local))
                if not self.missing[file]:
                    self._save(rank, stage)

    def _piece(self, name: str, full: torch.Tensor, shard: Optional[TPShard], rank: int) -> torch.Tensor:
        """TP rank ``rank``'s piece of the full tensor of parameter ``name`` (our layout)."""
        return shard.shard(full, rank, self.layout.tp) if shard is not None else full

    def _file(self, rank: int, stage: int) -> StreamingCheckpoint:
        """The open (rank, stage) file, created at its first tensor."""
        if (rank, stage) not in self.writers:
            layout = self.layout
            path = checkpoint_file(self.save_dir, None, rank % layout.tp, stage, layout.pp, release=True,
                                   ep_rank=rank // layout.tp, ep_size=layout.ep_files)
            self.writers[(rank, stage)] = StreamingCheckpoint(path)
        return self.writers[(rank, stage)]

    def _save(self, rank: int, stage: int) -> None:
        layout = self.layout
        chunks = self.per_file.pop((rank, stage), None) or [{} for _ in range(layout.vpp)]
        self.saved.add((rank, stage))
        ordered = [{n: state[n] for n in names} for state, names in zip(chunks, layout.chunk_names[stage])]
        self._file(rank, stage).close({**dict(zip(layout.chunk_keys, self._stored_states(stage, ordered))),
                                       **self._metadata()})
        del self.writers[(rank, stage)]

    def _stored_states(self, stage: int, chunks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Each chunk's state dict as the file stores it (ours: as built)."""
        return chunks

    def _metadata(self) -> Dict[str, Any]:
        """Everything a file holds besides the model."""
        return {"args": checkpoint_args(self.layout, self.family_name),
                "transformer_config": self.layout.config.to_dict(), "hf_config": self.hf_config,
                "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0}

    def finish(self) -> None:
        unwritten = sorted(file for file, names in self.missing.items() if names)
        if unwritten:
            raise AssertionError(f"files (tp + ep x TP, pp) {unwritten} never received all their parameters")
        for rank, stage in sorted(set(self.missing) - self.saved):  # stages holding only noop layers
            self._save(rank, stage)
        write_tracker(self.save_dir, None, release=True)


class DistSink:
    """Writes an mg ``--ckpt-format torch_dist`` checkpoint (``release``): every tensor whole, as DCP's
    global tensors, with ``common.pt``. Holds the model's tensors until :meth:`finish` (one DCP save)."""

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str,
                 hf_config: Optional[Dict[str, Any]]) -> None:
        self.save_dir, self.layout, self.family_name, self.hf_config = save_dir, layout, family_name, hf_config
        self.tensors: Dict[str, torch.Tensor] = {}

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        return list(names)

    def passes(self, rereadable: bool) -> List[Tuple[int, ...]]:
        return [(0,)]

    def write(self, name: str, tensors: Sequence[torch.Tensor], ranks: Sequence[int]) -> None:
        full = to_ours(self.layout.rules[name][0], tensors, self.layout.context(name))
        _check_shape(name, full, self.layout.full_shapes[name])
        stored = full[tuple(slice(0, n) for n in self.layout.stored_shapes[name])]
        self.tensors[dist_format.MODEL_PREFIX + name] = stored.contiguous()

    def finish(self) -> None:
        directory = iteration_dir(self.save_dir, None, release=True)
        state = {key: dist_format.LocalPieces(value.shape, [((0,) * value.dim(), value)])
                 for key, value in self.tensors.items()}
        dist_format.save(directory, state)
        common = {"args": checkpoint_args(self.layout, self.family_name),
                  "transformer_config": self.layout.config.to_dict(), "hf_config": self.hf_config,
                  "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0, "optimizer": None}
        dist_format.write_common(directory, common, atomic_save)
        write_tracker(self.save_dir, None, release=True)


def checkpoint_args(layout: ModelLayout, family_name: str) -> argparse.Namespace:
    """Megatron flag-style fields describing the saved model and its parallel layout."""
    config = layout.config
    dtype = config.params_dtype
    vpp = layout.vpp if layout.vpp > 1 else None
    counts = [len(chunks[0]) for chunks in layout.placement]
    even = len(set(counts)) == 1
    args = argparse.Namespace(
        num_layers=config.num_layers, hidden_size=config.hidden_size, ffn_hidden_size=config.ffn_hidden_size,
        num_attention_heads=config.num_attention_heads, num_query_groups=config.num_query_groups,
        group_query_attention=config.num_query_groups != config.num_attention_heads,
        kv_channels=config.kv_channels, seq_length=config.max_position_embeddings,
        max_position_embeddings=config.max_position_embeddings,
        tensor_model_parallel_size=config.tensor_model_parallel_size, pipeline_model_parallel_size=layout.pp,
        expert_model_parallel_size=layout.ep, expert_tensor_parallel_size=config.expert_tensor_parallel_size,
        virtual_pipeline_model_parallel_size=vpp,
        num_layers_per_virtual_pipeline_stage=len(layout.placement[0][0]) if vpp else None,
        num_layer_list=None if vpp or even else tuple(counts),
        noop_layers=tuple(config.noop_layers),
        vocab_size=config.vocab_size, padded_vocab_size=config.padded_vocab_size,
        make_vocab_size_divisible_by=config.make_vocab_size_divisible_by, model_type_hf=family_name,
        normalization=config.normalization, norm_epsilon=config.norm_epsilon,
        position_embedding_type=config.position_embedding_type, rotary_base=config.rotary_base,
        rope_scaling_type=config.rope_scaling_type, rope_scaling_factor=config.rope_scaling_factor,
        swiglu=config.activation == "swiglu", add_bias_linear=config.add_bias_linear,
        disable_bias_linear=not config.add_bias_linear,
        add_qkv_bias=config.add_qkv_bias,
        untie_embeddings_and_output_weights=config.untie_embeddings_and_output_weights,
        params_dtype=dtype, bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16,
        iteration=0, consumed_train_samples=0, consumed_valid_samples=0)
    return namespace_for_checkpoint(args)


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
                      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                      torch.uint8: "U8", torch.bool: "BOOL"}


class HFSink:
    """Writes HF tensors into safetensors shards of at most ``max_shard_size``, streaming.

    Each tensor's bytes are appended to the current shard's data file as it arrives; a shard's
    file (header + data) is assembled when it is full, so one tensor is in memory at a time.
    ``config.json`` is written last.
    """

    def __init__(self, save_dir: str, max_shard_size: int, hf_config: Dict[str, Any]) -> None:
        self.save_dir, self.max_shard_size, self.hf_config = save_dir, max_shard_size, hf_config
        self.entries: Dict[str, Dict[str, Any]] = {}  # the open shard's header entries
        self.data: Optional[Any] = None  # the open shard's data file
        self.shard_bytes = 0
        self.shards: List[Tuple[str, List[str]]] = []  # (assembled temporary path, tensor names)
        self.total_size = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        nbytes = tensor.numel() * tensor.element_size()
        if self.entries and self.shard_bytes + nbytes > self.max_shard_size:
            self._close_shard()
        if self.data is None:
            os.makedirs(self.save_dir, exist_ok=True)
            self.data = open(os.path.join(self.save_dir, ".shard.data.tmp"), "wb")
        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()  # little-endian bytes
        self.data.write(raw.data)
        self.entries[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                              "data_offsets": [self.shard_bytes, self.shard_bytes + nbytes]}
        self.shard_bytes += nbytes
        self.total_size += nbytes

    def _close_shard(self) -> None:
        """Assemble the open shard: 8-byte header length, JSON header (8-byte aligned), the data."""
        data_path = os.path.join(self.save_dir, ".shard.data.tmp")
        if self.data is not None:
            self.data.close()
        else:  # no tensor at all: an empty shard
            os.makedirs(self.save_dir, exist_ok=True)
            open(data_path, "wb").close()
        header = json.dumps({"__metadata__": {"format": "pt"}, **self.entries}, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)
        path = os.path.join(self.save_dir, f".shard-{len(self.shards) + 1:05d}.safetensors.tmp")
        with open(path, "wb") as out, open(data_path, "rb") as data:
            out.write(len(header).to_bytes(8, "little"))
            out.write(header)
            shutil.copyfileobj(data, out, 16 * 2**20)
        os.remove(data_path)
        self.shards.append((path, list(self.entries)))
        self.entries, self.data, self.shard_bytes = {}, None, 0

    def finish(self) -> None:
        if self.entries or not self.shards:
            self._close_shard()
        count = len(self.shards)
        weight_map = {}
        for number, (tmp, names) in enumerate(self.shards, start=1):
            final = SAFETENSORS_SINGLE if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
            os.replace(tmp, os.path.join(self.save_dir, final))
            weight_map.update({name: final for name in names})
        if count > 1:
            index = {"metadata": {"total_size": self.total_size}, "weight_map": dict(sorted(weight_map.items()))}
            _write_json(os.path.join(self.save_dir, SAFETENSORS_INDEX), index)
        _write_json(os.path.join(self.save_dir, HF_CONFIG), self.hf_config)


class HFWeightSink:
    """Adapts :class:`HFSink` to the per-parameter ``write`` interface (one pass over the source)."""

    def __init__(self, sink: HFSink, layout: ModelLayout) -> None:
        self.sink, self.layout = sink, layout

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        return list(names)  # the HF files keep the model's order

    def passes(self, rereadable: bool) -> List[Tuple[int, ...]]:
        return [(0,)]

    def write(self, name: str, tensors: Sequence[torch.Tensor], ranks: Sequence[int]) -> None:
        if self.layout.config.value_head and name == "output_layer.weight":
            return  # a reward model: HF's sequence classifier has the score head and no lm_head
        for hf_name, tensor in zip(self.layout.rules[name][1], tensors):
            self.sink.add(hf_name, tensor)

    def finish(self) -> None:
        self.sink.finish()


def _check_shape(name: str, tensor: torch.Tensor, expected: Tuple[int, ...]) -> None:
    if tuple(tensor.shape) != expected:
        raise ConversionError(f"{name}: the weights give shape {tuple(tensor.shape)}, the config implies "
                              f"{expected}; the checkpoint does not match its config")


def staging_dir(save_dir: str) -> str:
    """The temporary sibling of ``save_dir`` a conversion writes into (renamed at the end)."""
    parent, name = os.path.split(os.path.abspath(save_dir))
    return os.path.join(parent, f".{name}.converting-{os.getpid()}")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def publish(staging: str, save_dir: str, kind: str) -> None:
    """Move a finished conversion of ``kind`` (:func:`target_kind`) from ``staging`` to ``save_dir``.

    A new ``save_dir`` is one rename. Into an existing one (empty, or ``--overwrite``), the earlier
    checkpoint of the same kind (:func:`replaced_by`: its markers, tracker or ``config.json``, and its
    files, ``release/`` or ``*.safetensors`` and the index) is removed first, the new entries moved in,
    and the new markers moved last: at no moment does the directory look complete with a mix of both.
    Other files (``iter_*`` directories, a model of the other kind) stay.
    """
    if not os.path.exists(save_dir):
        os.rename(staging, save_dir)
        return
    markers = (TRACKER_FILENAME, HF_CONFIG, peft_format.PEFT_CONFIG)
    for name in os.listdir(save_dir):
        if replaced_by(kind, name):
            _remove(os.path.join(save_dir, name))
    names = os.listdir(staging)
    for name in sorted(names, key=lambda n: n in markers):  # markers last
        _remove(os.path.join(save_dir, name))
        os.rename(os.path.join(staging, name), os.path.join(save_dir, name))
    os.rmdir(staging)


def _write_json(path: str, value: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- Megatron-LM / MindSpeed-LLM


class MegatronLMSource(MegatronSource):
    """A checkpoint written by Megatron-LM or MindSpeed-LLM (``--load-model-type megatron``).

    The model is the one its ``args`` describe (:func:`megatron_format.config_from_args`); the
    TP/PP/VPP layout, ``num_layer_list`` and noop layers come from there too. Names are mapped to
    ours (chunk-local layer numbers to global ones, Transformer Engine norm names to ours,
    ``_extra_state`` entries skipped), and the ``linear_qkv`` rows of the TP ranks (each a contiguous
    run of query groups) are joined and permuted from the per-group interleaved layout to ours.
    """

    def __init__(self, load_dir: str, family_name: Optional[str], vocab_size: Optional[int]) -> None:
        self.vocab_size_flag = vocab_size
        self.stored_names: Dict[Tuple[int, int], Dict[str, str]] = {}  # (stage, chunk) -> {ours: theirs}
        super().__init__(load_dir, family_name)

    def _map(self, tp_rank: int, pp_rank: int) -> Dict[str, Any]:
        try:
            return map_foreign_file(self.path(tp_rank, pp_rank))
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _config(self, first: Dict[str, Any], args: argparse.Namespace, load_dir: str) -> TransformerConfig:
        path = self.path(0, 0)
        if "transformer_config" in first:
            raise ConversionError(f"{path} stores a transformer_config: it was written by this suite, whose "
                                  "linear_qkv rows are not Megatron's; pass --load-model-type mg")
        if not isinstance(first.get("args"), argparse.Namespace):
            raise ConversionError(f"{path} has no 'args': Megatron-LM and MindSpeed-LLM store the model's arguments "
                                  "there, and without them its heads, groups and parallel layout are unknown")
        saved_pp = int(getattr(args, "pipeline_model_parallel_size", None) or 1)
        if saved_pp != self.pp:
            raise ConversionError(f"{load_dir}: args.pipeline_model_parallel_size is {saved_pp}, the rank "
                                  f"directories give {self.pp}; the checkpoint is incomplete or inconsistent")
        try:
            kwargs = megatron_format.config_from_args(args, self.vocab_size_flag)
            config = TransformerConfig(**{**kwargs, "tensor_model_parallel_size": self.tp})
        except ValueError as error:  # MegatronFormatError included
            raise ConversionError(f"{path}: {error}") from None
        if config.num_query_groups % self.tp:
            raise ConversionError(f"{path}: args.num_query_groups {config.num_query_groups} is not divisible by "
                                  f"args.tensor_model_parallel_size {self.tp}; the checkpoint is inconsistent")
        return config

    def _placement(self, first: Dict[str, Any], args: argparse.Namespace) -> Placement:
        layer_list = getattr(args, "num_layer_list", None)
        if isinstance(layer_list, str):  # MindSpeed's flag value, "3,5"
            args = argparse.Namespace(**{**vars(args), "num_layer_list": [int(n) for n in layer_list.split(",")]})
        return super()._placement(first, args)

    def _our_names(self, state: Dict[str, Any], stage: int, chunk: int) -> Dict[str, Any]:
        layers = self.placement[stage][chunk]
        ours: Dict[str, Any] = {}
        names: Dict[str, str] = {}
        for their, value in state.items():
            if their.split(".")[0] == "language_model":
                raise ConversionError(f"{self.path(0, stage)} holds a legacy (non-mcore) GPT model ({their!r}); "
                                      "only mcore models (--use-mcore-models) are supported")
            parsed = megatron_format.our_layer_name(their)
            if parsed is None:
                continue  # _extra_state: no weights
            local, name = parsed
            if local is not None:
                if local >= len(layers):
                    raise ConversionError(f"{self.path(0, stage)}: {their!r} is layer {local} of a chunk of "
                                          f"{len(layers)} layers; the checkpoint does not match its args")
                name = name.replace("{i}", str(layers[local]))
            ours[name], names[name] = value, their
        self.stored_names[(stage, chunk)] = names
        return ours

    def _stored_name(self, stage: int, chunk: int, local: str) -> str:
        return self.stored_names[(stage, chunk)][local]

    def _place(self, name: str, shard: TPShard, piece: torch.Tensor, rank: int, full: torch.Tensor) -> None:
        if not megatron_format.is_fused_qkv(name):
            super()._place(name, shard, piece, rank, full)
            return
        rows = piece.size(0)  # each rank holds a contiguous run of query groups, in rank order
        full.narrow(0, rank * rows, rows).copy_(piece)

    def _to_our_layout(self, name: str, full: torch.Tensor) -> torch.Tensor:
        if not megatron_format.is_fused_qkv(name):
            return full
        config = self.config  # full: [groups * (q/g + 2) * hd, ...] interleaved
        return interleaved_to_ours(full, config.num_attention_heads, config.num_query_groups, config.kv_channels)


class MegatronLMSink(MegatronSink):
    """Writes a checkpoint Megatron-LM and MindSpeed-LLM load (``--save-model-type megatron``).

    Files as :class:`MegatronSink` writes ours, but with their names (chunk-local layer numbers;
    Transformer Engine norm names and ``_extra_state`` entries with ``--transformer-impl
    transformer_engine``), ``linear_qkv`` rows interleaved per query group and split over TP by
    whole groups, and ``args`` in their flag names (:func:`megatron_format.args_from_config`).
    """

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str, hf_config: Optional[Dict[str, Any]],
                 transformer_impl: str) -> None:
        super().__init__(save_dir, layout, family_name, hf_config)
        config, self.transformer_impl = layout.config, transformer_impl
        if config.num_query_groups % layout.tp:
            raise ConversionError(f"--target-tensor-parallel-size {layout.tp} does not divide the "
                                  f"{config.num_query_groups} key/value groups: Megatron-LM splits them over TP "
                                  "(it does not replicate them); choose a TP size that divides them")
        try:
            self.fields = megatron_format.args_from_config(config)
        except megatron_format.MegatronFormatError as error:
            raise ConversionError(f"--save-model-type megatron: {error}") from None
        self.names: Dict[Tuple[int, int], Dict[str, str]] = {}  # (stage, chunk) -> {ours: theirs}
        for stage, chunks in enumerate(layout.chunk_names):
            for chunk, names in enumerate(chunks):
                local = {layer: index for index, layer in enumerate(layout.placement[stage][chunk])}
                self.names[(stage, chunk)] = {name: self._their_name(name, local) for name in names}

    def _their_name(self, name: str, local: Dict[int, int]) -> str:
        parts = megatron_format.split_layer(name)
        return megatron_format.their_name(name, local[parts[0]] if parts else None, self.transformer_impl)

    def _piece(self, name: str, full: torch.Tensor, shard: Optional[TPShard], rank: int) -> torch.Tensor:
        if not megatron_format.is_fused_qkv(name):
            return super()._piece(name, full, shard, rank)
        config = self.layout.config
        interleaved = ours_to_interleaved(full, config.num_attention_heads, config.num_query_groups,
                                          config.kv_channels)  # [groups * (q/g + 2) * hd, ...]
        return interleaved.chunk(self.layout.tp, dim=0)[rank].clone()  # a contiguous run of groups

    def _stored_states(self, stage: int, chunks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        states = []
        for chunk, state in enumerate(chunks):
            names = self.names[(stage, chunk)]
            stored: Dict[str, Any] = {names[name]: value for name, value in state.items()}
            if self.transformer_impl == "transformer_engine":
                noop = set(self.layout.config.noop_layers)
                layers = [i for i, layer in enumerate(self.layout.placement[stage][chunk]) if layer not in noop]
                stored.update({key: None for key in megatron_format.extra_state_names(layers)})
            states.append(stored)
        return states

    def _metadata(self) -> Dict[str, Any]:
        args = checkpoint_args(self.layout, self.family_name)
        vars(args).update(self.fields, transformer_impl=self.transformer_impl)
        return {"args": args, "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0}


# --------------------------------------------------------------------------- LoRA adapters (--lora-load)


class LoraAdapters:
    """An adapter checkpoint (``--lora-load DIR``, as a LoRA run's ``--save`` writes it) read whole: its
    ``lora`` record and the full tensors of its adapters (and modules to save) under our names.

    Its own layout (TP, PP, VPP) comes from its ``args`` as for any mg source; each piece is joined with
    the shard spec of the adapter in a model built like training's (``add_lora`` on the meta device).

    A reward model's adapters (``--stage orm``) hold the value head it trained (``value_head.weight``, always
    trainable under LoRA) while their base is the language model it started from: :meth:`attach` then makes
    the source that reward model (``value_head`` on, the head read from here), so it exports as HF's
    ``...ForSequenceClassification`` (or a plain mg reward model), as a fully trained one does.
    """

    def __init__(self, lora_dir: str, family_name: str) -> None:
        source = MegatronSource(lora_dir, family_name)
        first = source._map(0, 0)
        record, saved_args = first.get("lora"), first.get("args")
        if not isinstance(record, dict):
            raise ConversionError(f"--lora-load {lora_dir} holds no LoRA adapters (no 'lora' entry); pass a "
                                  "checkpoint saved by a run with --lora-target-modules")
        self.config = LoraConfig(r=int(record["r"]), alpha=float(record["alpha"]),
                                 dropout=float(getattr(saved_args, "lora_dropout", None) or 0.0),
                                 target_modules=tuple(record["target_modules"]),
                                 modules_to_save=tuple(record.get("modules_to_save") or ()),
                                 module_ranks=tuple(sorted((record.get("module_ranks") or {}).items())))
        with torch.device("meta"):
            model = GPTModel(source.config, layout_state(source.tp))
        add_lora(model, self.config)
        shards = {name: param_meta(param).tp_shard for name, param in model.named_parameters() if param.requires_grad}
        self.tensors: Dict[str, torch.Tensor] = {}
        for (rank, stage, chunk), shapes in sorted(source.shapes.items()):
            key = "model" if len(source.placement[0]) == 1 else f"model{chunk}"
            for name in shapes if rank == 0 else ():
                if name not in shards:  # the last stage's copy of tied embeddings
                    continue
                holders = range(source.tp) if shards[name] is not None else range(1)
                pieces = [source._map(holder, stage)[key][name] for holder in holders]
                self.tensors[name] = shards[name].unshard(pieces) if shards[name] is not None else pieces[0]
        missing = sorted(set(shards) - set(self.tensors))
        if missing:
            raise ConversionError(f"--lora-load {lora_dir} lacks {missing[0]}; the checkpoint is incomplete")
        self.reward_model = VALUE_HEAD_RULE.ours in self.tensors  # trained with --stage orm

    def attach(self, source: "MegatronSource") -> None:
        """Merge into what ``source`` reads; a reward model's adapters over a language model turn the source
        into that reward model (its config's ``value_head`` on, the head supplied by the adapters)."""
        if self.reward_model and not source.config.value_head:
            source.config = dataclasses.replace(source.config, value_head=True)
            source.supplied = frozenset({VALUE_HEAD_RULE.ours})
        source.overlay = self.merged

    def check_base(self, layout: ModelLayout, lora_dir: str) -> None:
        """Every adapter and module to save fits the base model's weight."""
        for name, tensor in self.tensors.items():
            module, factor = name.rsplit(".", 2)[:2] if is_adapter(name) else (None, None)
            weight = f"{module}.weight" if module else name
            if weight not in layout.full_shapes:  # (a reward model's value head is supplied: see attach)
                raise ConversionError(f"--lora-load {lora_dir}: {name} needs {weight}, which the --load-dir model "
                                      f"({layout.config.num_layers} layers) lacks; the adapters were trained on "
                                      "another model")
            out, into = layout.full_shapes[weight][0], layout.full_shapes[weight][-1]
            expected = {None: layout.full_shapes[weight], "lora_A": (tensor.shape[0], into),
                        "lora_B": (out, tensor.shape[-1])}[factor]  # A [rank, in], B [out, rank]
            if tuple(tensor.shape) != tuple(expected):
                raise ConversionError(f"--lora-load {lora_dir}: {name} is {tuple(tensor.shape)}, the base weight "
                                      f"{weight} is {layout.full_shapes[weight]}; the adapters were trained on "
                                      "another model")

    def merged(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """Base tensor ``name`` (full, our layout) with the adapters merged: ``W + alpha/r B A`` in fp32, a
        module to save replaced by its trained copy."""
        if name in self.tensors:  # (``full`` None: a tensor the base lacks, the reward model's value head)
            return self.tensors[name] if full is None else self.tensors[name].to(full.dtype)
        module = name[:-len(".weight")]
        a, b = self.tensors.get(f"{module}.lora_A.weight"), self.tensors.get(f"{module}.lora_B.weight")
        if a is None or b is None:
            return full
        delta = self.config.scaling * (b.float() @ a.float())  # [out, r] @ [r, in] -> [out, in]
        return (full.float() + delta).to(full.dtype)


def write_peft_adapter(args: argparse.Namespace, source: "MegatronSource", adapters: LoraAdapters,
                       layout: ModelLayout, renaming: Dict[str, str], directory: str) -> None:
    """``--save-lora-to-hf``: the adapters in PEFT's files, per HF projection, with HF layer numbers."""
    if adapters.config.modules_to_save:
        raise ConversionError(f"--lora-load {args.lora_load} also trained "
                              f"{' '.join(adapters.config.modules_to_save)} (--lora-modules-to-save), which PEFT's "
                              "LoRA files do not hold here; drop --save-lora-to-hf to write the merged model")
    tensors = {rename(name, renaming): tensor for name, tensor in adapters.tensors.items()}
    for name, tensor in tensors.items():  # (no source read: the adapters are written as they are)
        bad = non_finite_count(tensor)
        if bad:
            refuse_non_finite(f"tensor {name!r} of --lora-load {args.lora_load} holds {bad} NaN/Inf value(s) of "
                              f"{tensor.numel()}", NON_FINITE_FIX, args.allow_non_finite)
    rule_of = layout.rules.__getitem__
    modules = peft_format.adapted_modules(tensors)
    try:
        peft_tensors = peft_format.to_peft(tensors, rule_of, layout.context)
        targets = peft_format.hf_targets(modules, rule_of)
        rank_pattern = {target: tensors[f"{module}.lora_A.weight"].shape[0] for module in modules
                        if tensors[f"{module}.lora_A.weight"].shape[0] != adapters.config.r
                        for target in peft_format.hf_targets([module], rule_of)}  # block-form modules
    except peft_format.PeftFormatError as error:
        raise ConversionError(f"--save-lora-to-hf (family {source.family_name}): {error}") from None
    if adapters.reward_model:  # a sequence classifier's adapter: the score head saved whole, as PEFT does
        head = VALUE_HEAD_RULE.ours
        for hf_name, tensor in zip(rule_of(head)[1], to_hf(rule_of(head)[0], tensors[head], layout.context(head))):
            peft_tensors[peft_format.module_key(hf_name)] = tensor.contiguous()
    base = (source.hf_config or {}).get("_name_or_path") or os.path.abspath(args.load_dir)
    config = peft_format.adapter_config(adapters.config.r, adapters.config.alpha, adapters.config.dropout, targets,
                                        base, rank_pattern, sequence_classifier=adapters.reward_model)
    peft_format.write(directory, peft_tensors, config)


# --------------------------------------------------------------------------- driver


def open_source(args: argparse.Namespace):
    if args.load_model_type == "hf":
        return HFSource(args.load_dir, args.model_type_hf)
    if args.load_model_type == "megatron":
        return MegatronLMSource(args.load_dir, args.model_type_hf, args.vocab_size)
    found = source_iteration(args.load_dir)
    source = DistSource if dist_format.is_dist_checkpoint(iteration_dir(args.load_dir, *found)) else MegatronSource
    return source(args.load_dir, args.model_type_hf, found)


def real_layers(config: TransformerConfig) -> List[int]:
    """The global numbers of the layers that hold weights (HF layer ``j`` is the ``j``-th of them)."""
    noop = set(config.noop_layers)
    return [i for i in range(config.num_layers) if i not in noop]


def target_noop_layers(args: argparse.Namespace, source) -> Tuple[int, Tuple[int, ...]]:
    """(total layers, noop layers) of the target; checked against the source's real layers."""
    real = len(real_layers(source.config))
    if args.save_model_type == "hf":
        return real, ()
    noop = args.noop_layers
    if noop is None:
        noop = source.config.noop_layers if args.load_model_type != "hf" else ()
    total = real + len(noop)
    origin = "HF layers" if args.load_model_type == "hf" else "non-noop layers in the source"
    if args.num_layers is not None and args.num_layers != total:
        raise ConversionError(f"--num-layers {args.num_layers} does not equal the {real} {origin} + {len(noop)} "
                              f"--noop-layers = {total}; set --num-layers {total} or change --noop-layers")
    if len(set(noop)) != len(noop):
        raise ConversionError(f"--noop-layers {','.join(map(str, noop))} lists a layer twice; list each once")
    bad = sorted(i for i in noop if not 0 <= i < total)
    if bad:
        raise ConversionError(f"--noop-layers {bad} out of range: with {real} {origin} and {len(noop)} noop "
                              f"layer(s) the target has {total} layers, numbered 0 to {total - 1}")
    return total, tuple(sorted(noop))


def target_placement(args: argparse.Namespace, num_layers: int, noop: Sequence[int], real: int) -> Placement:
    """The production placement of the target (mirrors the training flags' validation)."""
    pp = args.target_pipeline_parallel_size
    per_stage, vpp = args.num_layers_per_virtual_pipeline_stage, args.virtual_pipeline_model_parallel_size
    layers = (f"{num_layers} layers ({real} with weights + {len(noop)} --noop-layers)" if noop
              else f"{num_layers} layers")
    try:
        vpp = resolve_virtual_pipeline(num_layers, pp, per_stage, vpp)
        return stage_layers(num_layers, pp, vpp, args.num_layer_list)
    except LayoutError as error:
        message = str(error).replace("--pipeline-model-parallel-size", "--target-pipeline-parallel-size")
        raise ConversionError(f"{message} (the target has {layers})") from None


def target_layout(args: argparse.Namespace, source, rules: Sequence[WeightRule]) -> ModelLayout:
    """The saved model: the source's config at the target TP (mg) or at TP 1 (hf), with the
    target's layers, noop layers and pipeline placement."""
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    num_layers, noop = target_noop_layers(args, source)
    if args.save_model_type == "hf":
        tp, divisible_by, placement = 1, 1, None
    else:
        tp, divisible_by = args.target_tensor_parallel_size, args.make_vocab_size_divisible_by
        if divisible_by is None:
            divisible_by = 1 if args.load_model_type == "hf" else source.config.make_vocab_size_divisible_by
        placement = target_placement(args, num_layers, noop, num_layers - len(noop))
    ep = args.target_expert_parallel_size if args.save_model_type == "mg" else 1
    etp = args.target_expert_tensor_parallel_size if args.save_model_type == "mg" else None
    check_ep(source.config, ep, args.load_dir)
    config = with_tp(source.config, tp, divisible_by, dtype, args.load_dir, num_layers=num_layers, noop_layers=noop,
                     expert_model_parallel_size=ep, expert_tensor_parallel_size=etp,
                     sequence_parallel=source.config.sequence_parallel or (etp == 1 and tp > 1),
                     hybrid_override_pattern=target_pattern(source.config, num_layers, noop),
                     **target_layer_sets(source.config, num_layers, noop))
    return ModelLayout(config, rules, placement)


def target_pattern(source: TransformerConfig, num_layers: int, noop: Sequence[int]) -> Optional[str]:
    """The source's ``--hybrid-override-pattern`` laid over the target's layers: the ``j``-th real layer keeps
    its kind; a noop layer takes the kind of the real layer after it (the last one's at the end)."""
    pattern = source.hybrid_override_pattern
    if pattern is None:
        return None
    kinds = [pattern[i] for i in real_layers(source)]
    result, real = [], iter(kinds)
    noop_set = set(noop)
    for layer in range(num_layers):
        result.append(None if layer in noop_set else next(real))
    following = kinds[-1] if kinds else "M"
    for layer in reversed(range(num_layers)):
        following = result[layer] = result[layer] or following
    return "".join(result)


# TransformerConfig fields that list global layer numbers
LAYER_SET_FIELDS = ("no_rope_layers", "full_attention_layers", "dense_bias_layers")


def target_layer_sets(source: TransformerConfig, num_layers: int, noop: Sequence[int]) -> Dict[str, Any]:
    """The source's per-layer settings renumbered for the target's layers: the ``j``-th real source layer's
    membership goes to the ``j``-th real target layer. ``--sliding-window-pattern`` counts global layer
    numbers, so when the numbering changes it becomes the equivalent ``--full-attention-layers``."""
    target_real = [i for i in range(num_layers) if i not in set(noop)]
    renumber = dict(zip(real_layers(source), target_real))
    changes: Dict[str, Any] = {name: tuple(sorted(renumber[i] for i in getattr(source, name) if i in renumber))
                               for name in LAYER_SET_FIELDS}
    pattern = source.sliding_window_pattern
    if pattern is not None and any(a != b for a, b in renumber.items()):
        changes["full_attention_layers"] = tuple(renumber[i] for i in real_layers(source)
                                                 if source.layer_window(i) is None)
        changes["sliding_window_pattern"] = None
    return changes


def layer_renaming(source: TransformerConfig, target: TransformerConfig) -> Dict[str, str]:
    """Source layer number -> target layer number (the ``j``-th real layer to the ``j``-th)."""
    return {str(a): str(b) for a, b in zip(real_layers(source), real_layers(target))}


LAYER_NAME = re.compile(r"^decoder\.layers\.(\d+)\.")


def rename(name: str, renaming: Dict[str, str]) -> str:
    match = LAYER_NAME.match(name)
    if match is None:
        return name
    return f"decoder.layers.{renaming[match.group(1)]}." + name[match.end():]


def open_sink(args: argparse.Namespace, source, layout: ModelLayout, directory: str):
    """The writer of the target format, into ``directory`` (the staging directory)."""
    if args.save_model_type == "mg" and args.ckpt_format == "torch_dist":
        return DistSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "mg":
        return MegatronSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "megatron":
        return MegatronLMSink(directory, layout, source.family_name, source.hf_config,
                              args.transformer_impl or "local")
    try:
        hf_config = source.family.to_hf_config(layout.config, source.hf_config)
    except RegistryError as error:
        raise ConversionError(f"{args.load_dir}: {error}") from None
    return HFWeightSink(HFSink(directory, parse_size(args.max_shard_size), hf_config), layout)


def convert(args: argparse.Namespace) -> None:
    validate_args(args)
    source = open_source(args)
    adapters = LoraAdapters(args.lora_load, source.family_name) if args.lora_load else None
    if adapters is not None:
        adapters.attach(source)  # before the layouts: a reward model's adapters add the value head
    rules = source.family.rules(source.config)
    source_layout = ModelLayout(source.config, rules, getattr(source, "placement", None))
    layout = target_layout(args, source, rules)
    source.check(source_layout)
    renaming = layer_renaming(source.config, layout.config)
    targets = {name: rename(name, renaming) for name in source_layout.names}
    if sorted(targets.values()) != sorted(layout.names):  # same flags on both sides: cannot differ
        raise AssertionError("source and target parameters differ")
    if adapters is not None:
        adapters.check_base(source_layout, args.lora_load)
    staging = staging_dir(args.save_dir)
    _remove(staging)
    if adapters is not None and args.save_lora_to_hf:
        try:
            write_peft_adapter(args, source, adapters, layout, renaming, staging)
            publish(staging, args.save_dir, target_kind(args))
        finally:
            _remove(staging)
        return
    sink = open_sink(args, source, layout, staging)
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    passes, names = sink.passes(source.rereadable), sink.order(source_layout.names, targets)
    try:
        with tqdm(total=len(passes) * len(names), desc="converting", unit="tensor") as progress:
            for ranks in passes:  # one pass per target TP rank when the source can be reread
                for name in names:
                    tensors = source.read(name, source_layout.rules[name][1], source_layout)
                    check_finite(source, name, tensors, source_layout, args.allow_non_finite)
                    if dtype is not None:
                        tensors = cast(source, name, tensors, dtype, source_layout, args)
                    sink.write(targets[name], tensors, ranks)
                    progress.update()
        sink.finish()
        publish(staging, args.save_dir, target_kind(args))
    finally:
        _remove(staging)


NON_FINITE_FIX = ("the run that saved it diverged or the file is damaged: convert an earlier checkpoint, or pass "
                  "--allow-non-finite to export it anyway")


def refuse_non_finite(what: str, fix: str, allow: bool) -> None:
    """A ConversionError ``what: fix``; with ``--allow-non-finite`` a warning instead (above the progress bar)."""
    if not allow:
        raise ConversionError(f"{what}; {fix}")
    tqdm.write(f"convert_ckpt: warning: {what}; exported as is (--allow-non-finite)", file=sys.stderr)


def check_finite(source, name: str, tensors: Sequence[torch.Tensor], layout: ModelLayout, allow: bool) -> None:
    """Refuse to export a tensor holding NaN / Inf (a diverged run's checkpoint), naming it and the source file;
    with ``--allow-non-finite`` warn and go on."""
    for hf_name, tensor in zip(layout.rules[name][1], tensors):
        bad = non_finite_count(tensor)
        if not bad:
            continue
        stored, path = source.locate(name, hf_name, layout)
        refuse_non_finite(f"tensor {stored!r} in {path} holds {bad} NaN/Inf value(s) of {tensor.numel()}",
                          NON_FINITE_FIX, allow)


def cast(source, name: str, tensors: Sequence[torch.Tensor], dtype: torch.dtype, layout: ModelLayout,
         args: argparse.Namespace) -> List[torch.Tensor]:
    """The tensors in ``--params-dtype``; values beyond its range (fp16's 65504) would become Inf: refused,
    naming the tensor, unless ``--allow-non-finite``."""
    result = []
    for hf_name, tensor in zip(layout.rules[name][1], tensors):
        converted = tensor.to(dtype)
        overflow = non_finite_count(converted) - non_finite_count(tensor)
        if overflow:
            stored, path = source.locate(name, hf_name, layout, finite=True)
            refuse_non_finite(f"--params-dtype {args.params_dtype}: {overflow} value(s) of tensor {stored!r} in "
                              f"{path} exceed {args.params_dtype}'s range (largest {torch.finfo(dtype).max:g}) and "
                              "would become Inf", "keep the checkpoint's dtype (drop --params-dtype) or use bf16",
                              args.allow_non_finite)
        result.append(converted)
    return result


GLIBC_M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)


def return_large_frees_to_the_os(threshold: int = 2**20) -> None:
    """Serve every allocation of ``threshold`` bytes or more with its own mapping (glibc's
    ``M_MMAP_THRESHOLD``), so that a freed tensor goes back to the OS at once.

    By default glibc raises that threshold up to 32 MiB after the first large free, and the
    freed tensors below it (shards, fused pieces) then stay in the heap: resident memory creeps
    up over a conversion (TinyLlama's shape: peak RSS 0.58 GB instead of 0.42 GB). Elsewhere
    than glibc this does nothing.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(GLIBC_M_MMAP_THRESHOLD, threshold)
    except (OSError, AttributeError):
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the converter; returns the exit code (2 with a one-line message on bad input)."""
    return_large_frees_to_the_os()
    try:
        args = build_parser().parse_args(argv)
        convert(args)
    except (ConversionError, RegistryError, CheckpointError) as error:
        print(f"convert_ckpt: error: {error}", file=sys.stderr)
        return 2
    print(f"convert_ckpt: wrote {args.save_model_type} checkpoint to {args.save_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

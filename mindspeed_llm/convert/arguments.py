"""The converter's flags (Megatron / MindSpeed names) and their validation, done before anything is read."""
from __future__ import annotations

import argparse
import os
import re

import torch

from core.checkpointing import TRACKER_FILENAME, read_tracker
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.convert.files import protect_save_dir
from mindspeed_llm.flags import FlagParser, add_pipeline_layout_args
from mindspeed_llm.models import megatron_format
from mindspeed_llm.models.registry import get_family

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def build_parser() -> argparse.ArgumentParser:
    """The converter's flags (Megatron / MindSpeed names); a bad flag is a :class:`ConversionError`."""
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
                        help="EP of an mg or megatron target: each file mp_rank_TT[_PPP]_EEE holds 1/EP of every "
                             "MoE layer's experts")
    parser.add_argument("--target-expert-tensor-parallel-size", type=int, default=None,
                        help="expert TP of an mg target: the target TP (default; experts split like the MLP) or 1 "
                             "(whole experts spread over TP x EP / TP ranks, EP a multiple of TP)")
    add_pipeline_layout_args(parser, title="pipeline layout of an mg or megatron target (--noop-layers "
                                           "default: none from hf, the source's from mg or megatron)")
    _add_model_args(parser)
    return parser


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    """The flags of the saved model (layers, vocabulary, dtype, naming, format) and of the run's safety."""
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
    parser.add_argument("--moe-grouped-gemm", action="store_true",
                        help="experts of a megatron target as the grouped-GEMM modules hold them: TEGroupedMLP's "
                             "linear_fc1.weight<i> with --transformer-impl transformer_engine, the legacy "
                             "GroupedMLP's weight1 / weight2 (MindSpeed-LLM) with local layers; default: "
                             "SequentialMLP's local_experts.<i> (a megatron source is read in any of them)")
    parser.add_argument("--megatron-mtp-layer-name", choices=megatron_format.MTP_LAYER_NAMES,
                        default=megatron_format.MTP_LAYER,
                        help="the name of an MTP module's layer in a megatron target: mtp_model_layer (current "
                             "megatron-core; the default) or transformer_layer (megatron-core 0.16 and earlier, "
                             "MindSpeed-LLM); a megatron source is read with either")
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
    parser.add_argument("--save-hf-fp8", action="store_true",
                        help="with --save-model-type hf: write the linear weights as DeepSeek's block FP8 (E4M3 and "
                             "weight_scale_inv per 128 x 128 block, quantization_config fp8), as inference servers "
                             "load DeepSeek-V3/V3.2 and GLM-5; embeddings, norms, routers and lm_head stay as they are")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what --save-dir already holds of the target format (a tracker, release/ or "
                             "iter_* directories; config.json or *.safetensors); without it such a --save-dir is "
                             "refused and left untouched")
    parser.add_argument("--allow-non-finite", action="store_true",
                        help="export tensors holding NaN/Inf with a warning (default: refuse, naming the tensor and "
                             "its file)")


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
    """Refuse a flag combination the conversion cannot honour, before anything is read or written."""
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
    if args.target_expert_parallel_size > 1 and args.save_model_type not in ("mg", "megatron"):
        raise ConversionError(f"--target-expert-parallel-size shards the experts of an mg or megatron target; a "
                              f"{args.save_model_type} target holds all experts, drop it")
    if args.megatron_mtp_layer_name != megatron_format.MTP_LAYER and args.save_model_type != "megatron":
        raise ConversionError("--megatron-mtp-layer-name names the MTP layers of a megatron target; drop it or pass "
                              "--save-model-type megatron")
    if args.moe_grouped_gemm and args.save_model_type != "megatron":
        raise ConversionError("--moe-grouped-gemm lays out the experts of a megatron target; drop it or pass "
                              "--save-model-type megatron")
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
    _validate_fp8_export(args)


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


def _validate_fp8_export(args: argparse.Namespace) -> None:
    """``--save-hf-fp8`` writes an HF model."""
    if args.save_hf_fp8 and (args.save_model_type != "hf" or args.save_lora_to_hf):
        raise ConversionError("--save-hf-fp8 writes an HF model's weights in FP8: pass --save-model-type hf (without "
                              "--save-lora-to-hf)")


def _validate_lora_args(args: argparse.Namespace) -> None:
    """``--lora-load`` / ``--save-lora-to-hf``: an mg base and a LoRA run's ``--save``."""
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
    from mindspeed_llm.transforms import peft_format

    if peft_format.is_peft_dir(args.lora_load):
        raise ConversionError(f"--lora-load {args.lora_load} is a PEFT adapter; the converter merges a LoRA run's "
                              "--save (load the PEFT adapter into training with --lora-load, then convert its --save)")
    if read_tracker(args.lora_load) is None:
        raise ConversionError(f"--lora-load {args.lora_load} has no {TRACKER_FILENAME}: not an adapter checkpoint; "
                              "pass the directory a LoRA run saved (--save)")



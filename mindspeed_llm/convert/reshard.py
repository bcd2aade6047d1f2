"""The target of a conversion: the source's model at the target TP / PP / VPP / EP layout, its noop layers and
per-layer settings renumbered, and the map from source parameter names to target ones."""
from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from core.pipeline_parallel.layout import LayoutError, Placement, resolve_virtual_pipeline, stage_layers
from core.transformer.config import TransformerConfig
from mindspeed_llm.convert.arguments import DTYPES
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.convert.layout import ModelLayout, check_ep, real_layers, with_tp
from mindspeed_llm.models.registry import WeightRule

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
    ep = args.target_expert_parallel_size if args.save_model_type in ("mg", "megatron") else 1
    etp = args.target_expert_tensor_parallel_size if args.save_model_type == "mg" else None
    check_ep(source.config, ep, args.load_dir)
    config = with_tp(source.config, tp, divisible_by, dtype, args.load_dir, num_layers=num_layers, noop_layers=noop,
                     expert_model_parallel_size=ep, expert_tensor_parallel_size=etp,
                     sequence_parallel=source.config.sequence_parallel or (etp == 1 and tp > 1),
                     hybrid_override_pattern=target_pattern(source.config, num_layers, noop),
                     linear_attention_freq=target_linear_attention_freq(source.config, num_layers, noop),
                     **target_layer_sets(source.config, num_layers, noop))
    return ModelLayout(config, rules, placement)


def _laid_over(kinds: Sequence[Any], num_layers: int, noop: Sequence[int], last: Any) -> List[Any]:
    """Per-real-layer ``kinds`` laid over the target's layers: the ``j``-th real layer keeps its kind; a noop
    layer takes the kind of the real layer after it (the last one's, or ``last`` without any, at the end)."""
    result, real = [], iter(kinds)
    noop_set = set(noop)
    for layer in range(num_layers):
        result.append(None if layer in noop_set else next(real))
    following = kinds[-1] if kinds else last
    for layer in reversed(range(num_layers)):
        following = result[layer] = following if result[layer] is None else result[layer]
    return result


def target_pattern(source: TransformerConfig, num_layers: int, noop: Sequence[int]) -> Optional[str]:
    """The source's ``--hybrid-override-pattern`` laid over the target's layers (:func:`_laid_over`)."""
    pattern = source.hybrid_override_pattern
    if pattern is None:
        return None
    return "".join(_laid_over([pattern[i] for i in real_layers(source)], num_layers, noop, "M"))


def target_linear_attention_freq(source: TransformerConfig, num_layers: int, noop: Sequence[int]) -> Optional[str]:
    """The source's ``--linear-attention-freq`` marks laid over the target's layers (:func:`_laid_over`), as the
    list expression of one 0 or 1 per target layer."""
    if source.linear_attention_freq is None:
        return None
    marks = _laid_over([int(source.linear_attention_layers[i]) for i in real_layers(source)], num_layers, noop, 0)
    if marks == [int(mark) for mark in source.linear_attention_layers]:  # the same layers: the source's spelling
        return source.linear_attention_freq
    return str(marks)


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
    """Parameter ``name`` with its layer number mapped by ``renaming`` (:func:`layer_renaming`)."""
    match = LAYER_NAME.match(name)
    if match is None:
        return name
    return f"decoder.layers.{renaming[match.group(1)]}." + name[match.end():]



"""Checkpoints written by Megatron-LM and MindSpeed-LLM (mcore models, legacy ``torch.save`` layout).

On disk they look like ours (``core/checkpointing.py``): ``iter_XXXXXXX`` or
``release``, ``mp_rank_TT[_PPP]/model_optim_rng.pt`` holding ``model`` (or
``model0``, ``model1``, ... per virtual chunk), ``args`` (the run's argparse
``Namespace``), ``checkpoint_version`` and ``iteration``. They differ in four ways:

* the model's architecture lives only in ``args``, under Megatron's and
  MindSpeed's flag names (:func:`config_from_args`, :func:`args_from_config`);
* layers are numbered within their pipeline chunk (``decoder.layers.0`` on every
  stage), ours globally (the converter renumbers);
* ``linear_qkv`` rows are interleaved per query group (each group's query heads,
  its key head, its value head; a TP rank holds a contiguous run of groups),
  ours are ``[Q; K; V]`` (:mod:`mindspeed_llm.models.qkv_layout`);
* with Transformer Engine layers (``--transformer-impl transformer_engine``,
  Megatron-LM's default) the norm before attention / MLP is fused into the next
  linear: ``self_attention.linear_qkv.layer_norm_weight`` and
  ``mlp.linear_fc1.layer_norm_weight`` (``layer_norm_bias`` for LayerNorm), and
  TE modules carry ``_extra_state`` entries. MindSpeed-LLM's mcore models use
  local layers (``--transformer-impl local``): ``input_layernorm.weight`` and
  ``pre_mlp_layernorm.weight``, as ours. Both styles are read; the writer uses
  the one asked for.

A setting the decoder cannot model (MoE: ``num_experts``; MLA; learned absolute
positions; squared ReLU; MindSpeed's sandwich norms, ...) is a
:class:`MegatronFormatError` naming the ``args`` key.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import fields
from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from core.transformer.config import RUNTIME_CONFIG_FIELDS
from core.transformer.config import (ACTIVATION_SWITCHES, QK_NORM_SWITCHES, TransformerConfig,
                                     activation_from_switches, activation_switches, pad_vocab_size,
                                     qk_norm_from_switches, qk_norm_switches)

TRANSFORMER_IMPLS = ("local", "transformer_engine")

# TransformerConfig fields that Megatron-LM / MindSpeed-LLM ``args`` hold under the same name and meaning.
SAME_NAME_FIELDS = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels", "max_position_embeddings",
    "make_vocab_size_divisible_by", "normalization", "norm_epsilon", "rotary_base", "rotary_percent",
    "add_bias_linear", "add_qkv_bias", "untie_embeddings_and_output_weights", "apply_layernorm_1p",
    "rope_scaling_type", "rope_scaling_factor", "input_embeds_norm", "sliding_window",
    "output_multiplier_scale", "attn_logit_softcapping", "output_logit_softcapping", "query_pre_attn_scalar",
    "fp32_residual_connection",
)
# TransformerConfig field -> the ``args`` name Megatron-LM / MindSpeed-LLM use for it.
RENAMED_FIELDS = {
    "rope_interleaved": "rotary_interleaved",
    "rope_low_freq_factor": "low_freq_factor",
    "rope_high_freq_factor": "high_freq_factor",
    "rope_original_max_position_embeddings": "original_max_position_embeddings",
}
# Fields derived specially (see config_from_args); every other architecture field must keep its default.
DERIVED_FIELDS = ("num_query_groups", "vocab_size", "position_embedding_type", "noop_layers", "params_dtype",
                  "activation", "qk_norm")
# The activation switches Megatron-LM / MindSpeed-LLM ``args`` hold (our ``activation`` spelled as they spell it)
MEGATRON_ACTIVATION_SWITCHES = ("swiglu", "geglu", "gelu_tanh")
# The q/k norm switches they hold (our ``qk_norm`` spelled as they spell it: per-head norms or none)
MEGATRON_QK_NORM_SWITCHES = ("qk_layernorm",)

# ``args`` keys that, when set, describe a model the decoder does not build: key -> what it is. (Only keys
# whose Megatron / MindSpeed default is unset or False: Megatron-LM keeps e.g. moe_layer_freq=1 and
# kv_lora_rank=32 in every checkpoint.)
UNSUPPORTED_ARGS = {
    "num_experts": "a mixture of experts (MoE)",
    "multi_latent_attention": "multi-latent attention (MLA)",
    "multi_head_latent_attention": "multi-latent attention (MLA)",
    "squared_relu": "a squared-ReLU MLP",
    "apply_residual_connection_post_layernorm": "post-LN residuals",
    "scale_emb": "MiniCPM's embedding and residual scales",
    "dim_model_base": "MiniCPM's logit scale",
    "post_norm": "MindSpeed's sandwich norms (post_attn_norm)",
    "add_dense_bias": "a bias on linear_proj only",
    "is_hybrid_model": "a hybrid Mamba model",
    "hybrid_override_pattern": "a hybrid Mamba model",
    "mtp_num_layers": "multi-token prediction layers",
    "num_layers_in_first_pipeline_stage": "an uneven first pipeline stage (use num_layer_list)",
    "num_layers_in_last_pipeline_stage": "an uneven last pipeline stage (use num_layer_list)",
    "decoder_first_pipeline_num_layers": "an uneven first pipeline stage (use num_layer_list)",
    "decoder_last_pipeline_num_layers": "an uneven last pipeline stage (use num_layer_list)",
    "pipeline_model_parallel_layout": "a custom pipeline layout",
    "rotary_seq_len_interpolation_factor": "rotary sequence-length interpolation",
}

# Megatron-LM's ``--use-rope-scaling`` is Llama 3.1's scaling with these fixed parameters.
MEGATRON_LLAMA3_ROPE = dict(rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                            rope_original_max_position_embeddings=8192)


class MegatronFormatError(ValueError):
    """A Megatron checkpoint (or a target for one) this converter cannot represent; one line, naming the key."""


def _arg(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    value = getattr(args, name, default)
    return default if value is None else value


def check_supported(args: argparse.Namespace) -> None:
    """Refuse ``args`` that describe a model the decoder cannot build, naming the key."""
    for key, what in UNSUPPORTED_ARGS.items():
        value = getattr(args, key, None)
        if value not in (None, False, 0, "", [], ()):
            raise MegatronFormatError(f"args.{key} = {value!r}: {what} is not supported by this decoder")
    kind = _arg(args, "position_embedding_type", "learned_absolute")
    if kind not in ("rope", "none") and not getattr(args, "use_rotary_position_embeddings", False):
        raise MegatronFormatError(f"args.position_embedding_type = {kind!r} is not supported (rope or none)")
    if _arg(args, "normalization", "LayerNorm") not in ("LayerNorm", "RMSNorm"):
        raise MegatronFormatError(f"args.normalization = {args.normalization!r} is not supported "
                                  "(LayerNorm or RMSNorm)")
    if not _arg(args, "swiglu", False) and getattr(args, "activation_func", None) not in (None, "gelu"):
        raise MegatronFormatError(f"args.activation_func = {args.activation_func!r} is not supported")


def config_from_args(args: argparse.Namespace, vocab_size: Optional[int] = None) -> Dict[str, Any]:
    """:class:`TransformerConfig` kwargs from a Megatron-LM / MindSpeed-LLM ``args`` Namespace.

    ``vocab_size``: the real vocabulary (``--vocab-size``); default ``args.vocab_size``, else the padded one.
    """
    check_supported(args)
    for key in ("num_layers", "hidden_size", "num_attention_heads", "padded_vocab_size"):
        if getattr(args, key, None) is None:
            raise MegatronFormatError(f"args lacks {key}; the checkpoint does not describe its model")
    kwargs: Dict[str, Any] = {}
    for name in SAME_NAME_FIELDS:
        if getattr(args, name, None) is not None:
            kwargs[name] = getattr(args, name)
    for name, key in RENAMED_FIELDS.items():
        if getattr(args, key, None) is not None:
            kwargs[name] = getattr(args, key)
    if getattr(args, "add_rmsnorm_offset", False):  # MindSpeed's spelling of (1 + w) RMSNorm
        kwargs["apply_layernorm_1p"] = True
    if getattr(args, "norm_epsilon", None) is None and getattr(args, "layernorm_epsilon", None) is not None:
        kwargs["norm_epsilon"] = args.layernorm_epsilon  # older Megatron
    heads = int(args.num_attention_heads)
    grouped = getattr(args, "group_query_attention", False) and getattr(args, "num_query_groups", None)
    kwargs["num_query_groups"] = int(args.num_query_groups) if grouped else heads
    kwargs["position_embedding_type"] = "none" if _arg(args, "position_embedding_type") == "none" else "rope"
    kwargs["max_position_embeddings"] = int(_arg(args, "max_position_embeddings", _arg(args, "seq_length", 4096)))
    if getattr(args, "use_rope_scaling", False):  # Megatron-LM: Llama 3.1 scaling
        kwargs.update(rope_scaling_type="llama3", rope_scaling_factor=float(_arg(args, "rope_scaling_factor", 8.0)),
                      **MEGATRON_LLAMA3_ROPE)
    if kwargs.get("rope_scaling_type") is None:
        kwargs["rope_scaling_factor"] = 1.0  # Megatron keeps its default 8.0 when scaling is off
    kwargs["noop_layers"] = layer_numbers(getattr(args, "noop_layers", None))
    kwargs["activation"] = activation_from_switches({name: _arg(args, name, False)
                                                     for name in MEGATRON_ACTIVATION_SWITCHES})
    kwargs["qk_norm"] = qk_norm_from_switches({name: _arg(args, name, False) for name in MEGATRON_QK_NORM_SWITCHES})
    kwargs["params_dtype"] = _params_dtype(args)
    kwargs.update(attention_dropout=float(_arg(args, "attention_dropout", 0.0)),
                  hidden_dropout=float(_arg(args, "hidden_dropout", 0.0)),
                  init_method_std=float(_arg(args, "init_method_std", 0.02)))
    kwargs["vocab_size"] = _vocab_size(args, kwargs, vocab_size)
    return kwargs


def layer_numbers(value: Any) -> Tuple[int, ...]:
    """Sorted layer numbers from MindSpeed's ``noop_layers`` / ``num_layer_list`` as stored: the flag's
    text (``"0,7"``), or a list or set of ints."""
    if isinstance(value, str):
        return tuple(sorted(int(part) for part in value.split(",") if part.strip()))
    return tuple(sorted(int(part) for part in value or ()))


def _params_dtype(args: argparse.Namespace) -> torch.dtype:
    dtype = getattr(args, "params_dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype.replace("torch.", ""), None), torch.dtype):
        return getattr(torch, dtype.replace("torch.", ""))
    return torch.bfloat16 if getattr(args, "bf16", False) else torch.float16 if getattr(args, "fp16", False) \
        else torch.float32


def _vocab_size(args: argparse.Namespace, kwargs: Dict[str, Any], given: Optional[int]) -> int:
    """The real vocabulary; it must pad to the checkpoint's ``padded_vocab_size`` as Megatron pads."""
    padded = int(args.padded_vocab_size)
    divisible_by = int(kwargs.get("make_vocab_size_divisible_by", 128))
    tp = int(_arg(args, "tensor_model_parallel_size", 1))
    if given is not None:
        if pad_vocab_size(given, divisible_by, tp) != padded:
            raise MegatronFormatError(f"--vocab-size {given} pads to {pad_vocab_size(given, divisible_by, tp)} with "
                                      f"make_vocab_size_divisible_by {divisible_by} x TP {tp}, but args."
                                      f"padded_vocab_size is {padded}; pass the tokenizer's vocabulary size")
        return given
    stored = getattr(args, "vocab_size", None)
    if stored is not None and pad_vocab_size(int(stored), divisible_by, tp) == padded:
        return int(stored)
    if padded % (divisible_by * tp):
        kwargs["make_vocab_size_divisible_by"] = 1  # keep the stored rows as they are
    return padded


def args_from_config(config: TransformerConfig) -> Dict[str, Any]:
    """Megatron-LM / MindSpeed-LLM ``args`` fields describing ``config`` (the inverse of
    :func:`config_from_args`); a field they cannot express is a :class:`MegatronFormatError`."""
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    known = set(SAME_NAME_FIELDS) | set(RENAMED_FIELDS) | set(DERIVED_FIELDS) | set(RUNTIME_CONFIG_FIELDS)
    for name in sorted(set(defaults) - known):
        value = getattr(config, name)
        if value not in (defaults[name], ()) and not (value is None and defaults[name] is None):
            raise MegatronFormatError(f"this model sets {name} = {value!r}, which Megatron-LM / MindSpeed-LLM "
                                      "checkpoints cannot express; convert it to hf or mg instead")
    switches = {**activation_switches(config.activation), **qk_norm_switches(config.qk_norm)}
    for name in ACTIVATION_SWITCHES + QK_NORM_SWITCHES:
        if switches[name] and name not in MEGATRON_ACTIVATION_SWITCHES + MEGATRON_QK_NORM_SWITCHES:
            raise MegatronFormatError(f"this model sets {name} = True, which Megatron-LM / MindSpeed-LLM "
                                      "checkpoints cannot express; convert it to hf or mg instead")
    out: Dict[str, Any] = {name: getattr(config, name) for name in SAME_NAME_FIELDS}
    out.update({name: switches[name] for name in MEGATRON_ACTIVATION_SWITCHES + MEGATRON_QK_NORM_SWITCHES})
    out.update({key: getattr(config, name) for name, key in RENAMED_FIELDS.items()})
    grouped = config.num_query_groups != config.num_attention_heads
    out.update(num_query_groups=config.num_query_groups, group_query_attention=grouped,
               position_embedding_type=config.position_embedding_type,
               use_rotary_position_embeddings=config.position_embedding_type == "rope", add_position_embedding=False,
               disable_bias_linear=not config.add_bias_linear, seq_length=config.max_position_embeddings,
               vocab_size=config.vocab_size, padded_vocab_size=config.padded_vocab_size,
               noop_layers=list(config.noop_layers) or None, params_dtype=config.params_dtype,
               bf16=config.params_dtype == torch.bfloat16, fp16=config.params_dtype == torch.float16,
               attention_dropout=config.attention_dropout, hidden_dropout=config.hidden_dropout,
               init_method_std=config.init_method_std, num_experts=None, multi_latent_attention=False)
    llama3 = config.rope_scaling_type == "llama3" and all(
        getattr(config, name) == value for name, value in MEGATRON_LLAMA3_ROPE.items())
    out["use_rope_scaling"] = llama3  # Megatron-LM's spelling of the same scaling
    out["add_rmsnorm_offset"] = config.apply_layernorm_1p and config.normalization == "RMSNorm"  # MindSpeed's
    return out


# --------------------------------------------------------------------------- parameter names

LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
# our layer-local name -> the Transformer Engine style name
TE_NORM_NAMES = {
    "input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
    "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
    "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
    "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias",
}
FROM_TE_NORM_NAMES = {te: ours for ours, te in TE_NORM_NAMES.items()}
# modules with a Transformer Engine ``_extra_state`` entry in each layer (TE spec)
TE_EXTRA_STATE_MODULES = ("self_attention.linear_qkv", "self_attention.core_attention", "self_attention.linear_proj",
                          "mlp.linear_fc1", "mlp.linear_fc2")
QKV_SUFFIXES = ("self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias")


def is_fused_qkv(name: str) -> bool:
    """Whether ``name`` (ours or theirs) is a fused QKV weight or bias, whose rows are laid out differently."""
    return name.endswith(QKV_SUFFIXES)


def split_layer(name: str) -> Optional[Tuple[int, str]]:
    """(layer number, name within the layer) of a decoder layer parameter, else None."""
    match = LAYER.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


def their_name(our_name: str, local_layer: Optional[int], transformer_impl: str) -> str:
    """The Megatron name of our parameter ``our_name`` in a chunk where its layer is ``local_layer``."""
    parts = split_layer(our_name)
    if parts is None:
        return our_name
    suffix = parts[1]
    if transformer_impl == "transformer_engine":
        suffix = TE_NORM_NAMES.get(suffix, suffix)
    return f"decoder.layers.{local_layer}.{suffix}"


def our_layer_name(their: str) -> Optional[Tuple[Optional[int], str]]:
    """(chunk-local layer number or None, our name with that number left as ``{i}``) of a Megatron
    parameter name; None for entries that carry no weights (``_extra_state``)."""
    if their.endswith("._extra_state") or their == "_extra_state":
        return None
    parts = split_layer(their)
    if parts is None:
        return None, their
    local, suffix = parts
    return local, "decoder.layers.{i}." + FROM_TE_NORM_NAMES.get(suffix, suffix)


def extra_state_names(local_layers: Sequence[int]) -> Tuple[str, ...]:
    """The ``_extra_state`` entries Transformer Engine adds for the chunk-local layers ``local_layers``."""
    return tuple(f"decoder.layers.{i}.{module}._extra_state" for i in local_layers
                 for module in TE_EXTRA_STATE_MODULES)

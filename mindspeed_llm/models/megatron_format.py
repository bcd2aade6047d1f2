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

Hybrid models (Megatron-core's ``HybridStack`` / ``MambaStack``, e.g. Nemotron-H) convert too, when
every layer is a Mamba2 ('M'), gated DeltaNet ('G'), attention ('*'), MLP ('-') or MoE ('E') layer:

* the pattern is ``args.hybrid_layer_pattern`` (Megatron-core >= 0.17; ``|`` between pipeline segments,
  segment ``c * PP + r`` on chunk ``c`` of stage ``r``), else ``hybrid_override_pattern`` (older), else
  the one ``hybrid_attention_ratio`` / ``hybrid_mlp_ratio`` allocate (:func:`pattern_from_ratios`), else
  all Mamba when ``is_hybrid_model`` or a Mamba / hybrid stack ``spec`` says so. The writer stores the
  pattern both ways (``hybrid_layer_pattern`` with ``|`` between its stages and chunks);
* a Mamba layer is ``norm`` + ``mixer.{in_proj, conv1d, dt_bias, A_log, D, norm, out_proj}``, as ours:
  TP rank ``t`` holds ``in_proj`` rows ``[z_t; x_t; B_t; C_t; dt_t]`` and conv channels ``[x_t; B_t;
  C_t]`` (heads and groups split alike). With Transformer Engine its norm is fused into ``in_proj``
  (``mixer.in_proj.layer_norm_weight``) and ``in_proj`` / ``out_proj`` carry ``_extra_state``;
  attention-only and MLP-only layers have just their half of a transformer layer's names. The final norm
  is ``decoder.final_norm``. Megatron-core >= 0.19 stores the conv as ``mixer.conv1d_weight`` /
  ``conv1d_bias``: read; the writer uses ``conv1d.weight`` / ``conv1d.bias`` (earlier releases,
  MindSpeed-LLM, and the key of Megatron's own distributed checkpoints);
* Megatron's mixer is Mamba2 with ``expand`` 2 unless ``mamba_num_heads`` is set, a conv of width 4 with a
  bias, no in/out biases, ``ngroups % TP == 0`` and a gated norm with eps 1e-5; anything else (Mamba1,
  another conv, ``add_bias_linear`` with Mamba layers, ``norm_epsilon`` other than 1e-5 with Mamba layers,
  fewer groups than TP, a dt clamp above, KDA 'K' / MLA '+' / DSA 'D' layers, noop layers) is refused. It clamps no dt and runs its kernel in chunks of 128: our dt floor (the low bound of
  transformers' ``time_step_limit``) and SSD chunk, which it does not read, are kept in ``args`` under our
  names (:data:`PRESERVED_MAMBA_ARGS`) for the way back; a checkpoint without them reads as Megatron runs.

Gated DeltaNet layers (Megatron-core's ``GatedDeltaNet``: ``--experimental-attention-variant gdn`` /
``gated_delta_net`` on the layers ``linear_attention_freq`` marks 1, Qwen3.5 / Qwen3-Next, or hybrid 'G'
letters) are ``self_attention.{in_proj, conv1d, A_log, dt_bias, out_norm, out_proj}``: TP rank ``t``'s
``in_proj`` rows are ``[q_t; k_t; v_t; z_t; b_t; a_t]`` (our ``in_proj_qkvz`` and ``in_proj_ba``, grouped
per key head, are its two parts), its conv channels ``[q_t; k_t; v_t]``; with Transformer Engine the
layer's norm is fused into ``in_proj`` (``self_attention.in_proj.layer_norm_weight``). ``out_norm`` is a
norm of the model's kind, so zero-centred ((1 + w), stored w - 1) when the model's norms are
(``apply_layernorm_1p``), where our gated norm keeps a plain w. Megatron's layer has no biases, SiLU
everywhere, L2-normed q/k and ``beta = sigmoid(b)``; OLMo-Hybrid's ``2 sigmoid(b)``, KDA and the other linear
mixers are refused. ``attention_output_gate`` puts each group's gate heads after its query heads in
``linear_qkv`` (``[q; gate; k; v]`` per group).

Mixture-of-experts layers (``num_experts``; GPT models place them by ``moe_layer_freq``, written as the
per-layer list, hybrids by 'E') are ``mlp.router.weight`` (and its ``expert_bias`` buffer),
``mlp.shared_experts.{linear_fc1, linear_fc2, gate_weight}`` and the experts of one expert-parallel rank
(its files ``mp_rank_TT_PPP_EEE``), each split over TP like the dense MLP (Megatron's default expert TP), in
one of three layouts (:func:`expert_entry_names`): SequentialMLP, TEGroupedMLP or the legacy GroupedMLP.
Their norm is never fused. Routing is mapped to what Megatron's router computes (softmax over the top-k
logits, or over all experts with ``moe_router_pre_softmax``; sigmoid renormalised when top-k > 1; groups
scored by their best top-k / group-topk; the expert bias with sigmoid only); our softmax over all experts
with a renormalised top-k is its default, and other routing is refused.

Multi-latent attention (``multi_latent_attention`` with ``qk_layernorm``, its latent norms) has our names:
``linear_q_down_proj`` / ``linear_q_proj``, ``q_layernorm``, ``linear_q_up_proj``, ``linear_kv_down_proj``,
``kv_layernorm``, ``linear_kv_up_proj``, ``linear_proj``. megatron-core's local layers build the down
projections as ColumnParallelLinear (rows split over TP, gathered); Transformer Engine keeps them whole
(``TELinear``, duplicated), fuses the latent norms into the up projections (``layer_norm_weight``) and keeps the
input norm apart. Its RoPE de-interleaves the rope channels (DeepSeek's layout: our ``rope_interleaved``);
YaRN is ``rope_type`` yarn (MLA's default) with ``rotary_scaling_factor``, ``mscale``, ``mscale_all_dim``,
``beta_fast``, ``beta_slow`` and ``original_max_position_embeddings``. MTP modules (``mtp_num_layers``) are
``mtp.layers.{k}.{enorm, hnorm, eh_proj, final_layernorm}`` and their layer (built as the last decoder layer)
under ``mtp_model_layer`` (current megatron-core) or ``transformer_layer`` (0.16 and earlier, MindSpeed-LLM),
on the last pipeline stage, which then holds the word embeddings too.

A setting the decoder cannot model (MTP in hybrid patterns; learned absolute positions; MindSpeed's sandwich
norms, ...) is a :class:`MegatronFormatError` naming the ``args`` key.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from core.transformer.config import RUNTIME_CONFIG_FIELDS
from core.transformer.gated_delta_net import ba_from_separate, qkvz_from_separate, separate_from_ba, separate_from_qkvz
from core.transformer.config import (ACTIVATION_SWITCHES, ATTENTION, ATTENTION_MIXER, DENSE_MLP, DSA, DSA_VARIANT,
                                     GDN_MIXER,
                                     LAYER_LETTERS, MAMBA, MAMBA_MIXER, MOE_MLP, QK_NORM_SWITCHES, VARIANT_MIXERS,
                                     TransformerConfig,
                                     activation_from_switches, activation_switches, feature_fields,
                                     pad_vocab_size, parse_layer_frequency, qk_norm_from_switches,
                                     qk_norm_switches)

TRANSFORMER_IMPLS = ("local", "transformer_engine")

# TransformerConfig fields that Megatron-LM / MindSpeed-LLM ``args`` hold under the same name and meaning.
SAME_NAME_FIELDS = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels", "max_position_embeddings",
    "make_vocab_size_divisible_by", "normalization", "norm_epsilon", "rotary_base", "rotary_percent",
    "add_bias_linear", "add_qkv_bias", "untie_embeddings_and_output_weights", "apply_layernorm_1p",
    "rope_scaling_type", "rope_scaling_factor", "input_embeds_norm", "sliding_window",
    "output_multiplier_scale", "attn_logit_softcapping", "output_logit_softcapping", "query_pre_attn_scalar",
    "fp32_residual_connection", "apply_residual_connection_post_layernorm", "attention_output_gate",
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
MEGATRON_ACTIVATION_SWITCHES = ("swiglu", "geglu", "gelu_tanh", "squared_relu")
# The q/k norm switches they hold (our ``qk_norm`` spelled as they spell it: per-head norms or none)
MEGATRON_QK_NORM_SWITCHES = ("qk_layernorm",)

# ``args`` keys that, when set, describe a model the decoder does not build: key -> what it is. (Only keys
# whose Megatron / MindSpeed default is unset or False: Megatron-LM keeps e.g. moe_layer_freq=1 and
# kv_lora_rank=32 in every checkpoint.)
UNSUPPORTED_ARGS = {
    "scale_emb": "MiniCPM's embedding and residual scales",
    "dim_model_base": "MiniCPM's logit scale",
    "post_norm": "MindSpeed's sandwich norms (post_attn_norm)",
    "add_dense_bias": "a bias on linear_proj only",
    "mtp_hybrid_override_pattern": "multi-token prediction layers of a hybrid model",
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


# --------------------------------------------------------------------------- hybrid (Mamba) models

# Megatron's hybrid letters this converter maps (Mamba2, gated DeltaNet, attention, MLP, MoE); the others are
# named when refused
HYBRID_LETTERS = ("M", "G", "*", "-", "E")
MEGATRON_HYBRID_LETTERS = {**LAYER_LETTERS, "D": "a DeepSeek sparse attention layer",
                           "+": "a multi-latent attention layer"}
PIPE, MTP_SEPARATOR = "|", "/"
# Megatron's MambaMixer as its MambaLayer builds it: these are fixed there (no args key)
MEGATRON_MAMBA_FIXED = dict(mamba_version=2, mamba_d_conv=4, mamba_conv_bias=True, mamba_dt_rank=None,
                            mamba_dt_limit_max=None, mamba_mixer_rms_eps=None, mamba_mixer_rms_weights=False)
MEGATRON_MAMBA_EXPAND = 2  # d_inner = 2 x hidden unless mamba_num_heads is set
MEGATRON_MAMBA_NORM_EPS = 1e-5  # its gated norm's eps, whatever norm_epsilon says
# The ``args`` keys (Megatron's defaults) of the Mamba sizes Megatron-core reads
MEGATRON_MAMBA_ARGS = dict(mamba_state_dim=128, mamba_head_dim=64, mamba_num_groups=8)
# Mamba fields Megatron's mixer does not read (it clamps no dt; its kernel runs chunks of 128): kept in ``args``
# under our names for the way back; absent, the value says what Megatron's mixer does
PRESERVED_MAMBA_ARGS = dict(mamba_chunk_size=128, mamba_dt_limit_min=0.0)
# ``args.spec`` naming one of these builds a Mamba / hybrid stack (older pretrain_mamba.py runs)
MEGATRON_STACK_SPECS = ("mamba_stack_spec", "hybrid_stack_spec")


def pattern_from_ratios(num_layers: int, attention_ratio: float, mlp_ratio: float) -> str:
    """The pattern older Megatron-core allocates from ``--hybrid-attention-ratio`` / ``--hybrid-mlp-ratio``:
    ``round(L * ratio)`` attention layers spread evenly between runs of Mamba layers (one first and last),
    then ``round(L * mlp_ratio)`` MLP layers spread evenly over the Mamba layers left."""
    letters = ["M"] * num_layers

    def spread(letter: str, spacing: float) -> None:
        budget = spacing  # Mamba layers still owed before the next ``letter``
        for index in range(num_layers):
            if letters[index] != "M":
                continue
            if budget < 0.5:
                letters[index] = letter
                budget += spacing
            else:
                budget -= 1

    attention = round(num_layers * attention_ratio)
    spread("*", (num_layers - attention) / (attention + 1))
    mlp = round(num_layers * mlp_ratio)
    if mlp:
        spread("-", (num_layers - attention - mlp) / mlp)
    return "".join(letters)


def stored_pattern(args: argparse.Namespace) -> Optional[str]:
    """The hybrid layer pattern a Megatron ``args`` describes, with its ``|`` pipeline separators; None for a
    GPT model."""
    for key in ("hybrid_layer_pattern", "hybrid_override_pattern"):
        pattern = getattr(args, key, None)
        if pattern:
            if MTP_SEPARATOR in pattern:
                raise MegatronFormatError(f"args.{key} = {pattern!r}: its '/' parts are multi-token prediction "
                                          "layers, which are not supported")
            return str(pattern)
    layers = getattr(args, "num_layers", None)
    attention, mlp = float(_arg(args, "hybrid_attention_ratio", 0.0)), float(_arg(args, "hybrid_mlp_ratio", 0.0))
    if layers and (attention > 0 or mlp > 0):
        return pattern_from_ratios(int(layers), attention, mlp)
    spec = getattr(args, "spec", None)
    spec_text = " ".join(spec) if isinstance(spec, (list, tuple)) else str(spec or "")
    if layers and (getattr(args, "is_hybrid_model", False) or any(name in spec_text for name in MEGATRON_STACK_SPECS)):
        return "M" * int(layers)
    return None


def pattern_segments(args: argparse.Namespace) -> Optional[List[str]]:
    """The ``|``-separated pipeline segments of the stored pattern (virtual stage ``c * PP + r`` each), or None
    when it has no separators (Megatron then splits the layers evenly over the stages)."""
    pattern = stored_pattern(args)
    return pattern.split(PIPE) if pattern and PIPE in pattern else None


def staged_pattern(pattern: str, placement: Sequence[Sequence[Sequence[int]]]) -> str:
    """``pattern`` with ``|`` between the pipeline segments of ``placement`` (``[stage][chunk]`` -> layers), in
    Megatron's order (chunk 0 of every stage, then chunk 1, ...); the plain pattern on one stage and chunk."""
    pp, vpp = len(placement), len(placement[0])
    if pp * vpp == 1:
        return pattern
    segments = [placement[stage][chunk] for chunk in range(vpp) for stage in range(pp)]
    flat = [layer for segment in segments for layer in segment]
    if flat != list(range(len(pattern))):
        raise MegatronFormatError("the pipeline placement does not hold the layers in Megatron's segment order; "
                                  "a hybrid pattern cannot describe it")
    return PIPE.join("".join(pattern[layer] for layer in segment) for segment in segments)


def _refuse_letters(pattern: str, where: str) -> None:
    bad = [letter for letter in pattern if letter not in HYBRID_LETTERS]
    if bad:
        what = MEGATRON_HYBRID_LETTERS.get(bad[0], "an unknown layer")
        raise MegatronFormatError(f"{where} = {pattern!r}: {bad[0]!r} is {what}; only Mamba ('M'), gated DeltaNet "
                                  "('G'), attention ('*'), MLP ('-') and MoE ('E') layers convert to and from "
                                  "Megatron-LM")


def _hybrid_kwargs(args: argparse.Namespace, kwargs: Dict[str, Any]) -> None:
    """The hybrid pattern and Mamba fields of ``args`` into ``kwargs`` (nothing for a GPT model)."""
    stored = stored_pattern(args)
    if stored is None:
        return
    pattern = stored.replace(PIPE, "")
    _refuse_letters(pattern, "args.hybrid_layer_pattern")
    if kwargs["noop_layers"]:
        raise MegatronFormatError(f"args.noop_layers = {list(kwargs['noop_layers'])} with a hybrid pattern is not "
                                  "supported")
    kwargs.update(hybrid_override_pattern=pattern, num_layers=len(pattern))  # Megatron counts the pattern
    if "*" not in pattern:  # no layer reads positions
        kwargs["position_embedding_type"] = "none"
    if not set(pattern) & {"*", "-"}:  # all Mamba: no attention or MLP field applies
        for name in feature_fields(ATTENTION):
            kwargs.pop(name, None)
    if "M" not in pattern:
        return
    if kwargs.get("add_bias_linear"):
        raise MegatronFormatError("args.add_bias_linear = True with Mamba layers: Megatron's Mamba mixer has no "
                                  "biases, this decoder's follow add_bias_linear; not supported")
    eps = kwargs.get("norm_epsilon", MEGATRON_MAMBA_NORM_EPS)
    if eps != MEGATRON_MAMBA_NORM_EPS:
        raise MegatronFormatError(f"args.norm_epsilon = {eps!r} with Mamba layers: Megatron's Mamba gated norm "
                                  f"uses {MEGATRON_MAMBA_NORM_EPS}, this decoder's norm_epsilon; not supported")
    kwargs.update(MEGATRON_MAMBA_FIXED)
    kwargs.update({key: _arg(args, key, default) for key, default in MEGATRON_MAMBA_ARGS.items()})
    kwargs.update({key: _arg(args, key, default) for key, default in PRESERVED_MAMBA_ARGS.items()})
    heads = getattr(args, "mamba_num_heads", None)
    if heads is not None:
        kwargs["mamba_heads"] = int(heads)
    else:
        kwargs["mamba_expand"] = MEGATRON_MAMBA_EXPAND


def _hybrid_args(config: TransformerConfig) -> Dict[str, Any]:
    """The hybrid ``args`` of ``config`` (GPT models: the keys that say so); refuses what Megatron's hybrid
    stack cannot build."""
    pattern = config.hybrid_override_pattern
    out: Dict[str, Any] = dict(hybrid_override_pattern=pattern, hybrid_layer_pattern=pattern,
                               is_hybrid_model=pattern is not None, hybrid_attention_ratio=0.0, hybrid_mlp_ratio=0.0)
    if pattern is None:
        return out
    _refuse_letters(pattern, "this model's hybrid_override_pattern")
    if config.noop_layers:
        raise MegatronFormatError(f"this model sets noop_layers = {list(config.noop_layers)} with a hybrid pattern, "
                                  "which Megatron-LM checkpoints cannot express")
    if "M" not in pattern:
        return out
    fixed = {**MEGATRON_MAMBA_FIXED, "add_bias_linear": False, "norm_epsilon": MEGATRON_MAMBA_NORM_EPS}
    for name, value in fixed.items():
        if getattr(config, name) != value:
            raise MegatronFormatError(f"this model sets {name} = {getattr(config, name)!r} with Mamba layers; "
                                      f"Megatron-LM's Mamba mixer has {name} = {value!r} (its checkpoints cannot "
                                      "express it); convert it to hf or mg instead")
    heads = config.mamba_num_heads
    default_width = config.mamba_d_inner == MEGATRON_MAMBA_EXPAND * config.hidden_size
    out.update({key: getattr(config, key) for key in (*MEGATRON_MAMBA_ARGS, *PRESERVED_MAMBA_ARGS)})
    out["mamba_num_heads"] = None if default_width else heads
    return out


# --------------------------------------------------------------------------- gated DeltaNet layers

# Megatron-core's spellings of its GatedDeltaNet in ``experimental_attention_variant`` ('gdn'; 'gated_delta_net'
# before 0.17 and its alias since); its 'gdn2' and 'dsa' are other layers
MEGATRON_GDN_VARIANTS = ("gdn", "gated_delta_net")
MEGATRON_GDN_VARIANT = "gated_delta_net"  # the spelling written: every Megatron-core release with GDN reads it
# the GDN sizes Megatron-core's args hold under our names, with its defaults
MEGATRON_GDN_ARGS = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                         linear_num_key_heads=16, linear_num_value_heads=32)
# GDN fields Megatron's layer does not read (its kernel runs chunks of 64): kept in args under our names
PRESERVED_GDN_ARGS = dict(linear_chunk_size=64)
GDN_FIELDS = ("experimental_attention_variant", "linear_attention_freq", *MEGATRON_GDN_ARGS, *PRESERVED_GDN_ARGS)


def _gdn_kwargs(args: argparse.Namespace, kwargs: Dict[str, Any]) -> None:
    """The gated DeltaNet fields of ``args`` into ``kwargs``: a GPT model's variant and its layer marks
    (``linear_attention_freq``, 1 a GDN layer), or the sizes of a hybrid pattern's 'G' layers."""
    variant = getattr(args, "experimental_attention_variant", None)
    if variant == DSA_VARIANT:
        return _dsa_kwargs(args, kwargs)
    if variant is not None and variant not in MEGATRON_GDN_VARIANTS:
        raise MegatronFormatError(f"args.experimental_attention_variant = {variant!r}: only Megatron-core's gated "
                                  f"DeltaNet ({' / '.join(MEGATRON_GDN_VARIANTS)}) and DSA convert")
    hybrid = kwargs.get("hybrid_override_pattern")
    if hybrid is None and variant is not None:  # a GPT model: the variant on the layers marked 1
        freq = getattr(args, "linear_attention_freq", None)
        if freq is None:
            raise MegatronFormatError(f"args.experimental_attention_variant = {variant!r} without "
                                      "args.linear_attention_freq: which layers are gated DeltaNet is unknown")
        marks = str([int(mark) for mark in freq]) if isinstance(freq, (list, tuple)) else str(freq)
        kwargs.update(experimental_attention_variant=MEGATRON_GDN_VARIANT, linear_attention_freq=marks)
    elif "G" not in (hybrid or ""):
        return
    if kwargs.get("add_bias_linear"):
        raise MegatronFormatError("args.add_bias_linear = True with gated DeltaNet layers: Megatron's GatedDeltaNet "
                                  "has no biases, this decoder's follow add_bias_linear; not supported")
    kwargs.update({key: int(_arg(args, key, default)) for key, default in MEGATRON_GDN_ARGS.items()})
    kwargs.update({key: _arg(args, key, default) for key, default in PRESERVED_GDN_ARGS.items()})


def _gdn_args(config: TransformerConfig) -> Dict[str, Any]:
    """The gated DeltaNet ``args`` of ``config``; refuses what Megatron's GatedDeltaNet cannot build."""
    out: Dict[str, Any] = dict(experimental_attention_variant=None, linear_attention_freq=None)
    variant = config.experimental_attention_variant
    if config.is_dsa:
        return {**out, **_dsa_args(config)}
    if variant is not None and config.hybrid_override_pattern is None:
        if VARIANT_MIXERS[variant] != GDN_MIXER:
            raise MegatronFormatError(f"this model sets experimental_attention_variant = {variant!r}, which "
                                      "Megatron-LM checkpoints cannot express (of the linear mixers only gated "
                                      "DeltaNet converts); convert it to hf or mg instead")
        out.update(experimental_attention_variant=MEGATRON_GDN_VARIANT,
                   linear_attention_freq=[int(mark) for mark in config.linear_attention_layers])
    if GDN_MIXER not in config.layer_mixers:
        return out
    if config.add_bias_linear:
        raise MegatronFormatError("this model sets add_bias_linear = True with gated DeltaNet layers; Megatron-LM's "
                                  "GatedDeltaNet has no biases (its checkpoints cannot express them); convert it to "
                                  "hf or mg instead")
    out.update({key: getattr(config, key) for key in (*MEGATRON_GDN_ARGS, *PRESERVED_GDN_ARGS)})
    return out


# --------------------------------------------------------------------------- DeepSeek Sparse Attention

# Megatron-core's DSA (experimental_attention_variant 'dsa', on MLA): its args are our fields' names; the layer is
# AbsorbedMLASelfAttention with unfused latent and input norms and Transformer Engine's whole (duplicated) down
# projections, and the indexer lives in the core attention: ours ``self_attention.indexer.X`` is its
# ``self_attention.core_attention.indexer.{linear_wq_b, linear_wk, k_norm, linear_weights_proj}``
MEGATRON_DSA_ARGS = ("dsa_indexer_n_heads", "dsa_indexer_head_dim", "dsa_indexer_topk", "dsa_indexer_topk_freq",
                     "dsa_indexer_skip_topk_offset", "dsa_indexer_rope_interleaved", "dsa_indexer_k_norm_epsilon")
DSA_INDEXER, MEGATRON_DSA_INDEXER = "self_attention.indexer.", "self_attention.core_attention.indexer."
DSA_INDEXER_NAMES = {"wq_b": "linear_wq_b", "wk": "linear_wk", "k_norm": "k_norm", "weights_proj": "linear_weights_proj"}
FROM_DSA_INDEXER_NAMES = {theirs: ours for ours, theirs in DSA_INDEXER_NAMES.items()}
TE_DSA_INDEXER_MODULES = tuple(MEGATRON_DSA_INDEXER + name for name in ("linear_wq_b", "linear_wk",
                                                                         "linear_weights_proj"))


def _dsa_kwargs(args: argparse.Namespace, kwargs: Dict[str, Any]) -> None:
    """DSA's fields of ``args`` (Megatron-core's names are ours) into ``kwargs``; refuses the scoring it varies."""
    if not (getattr(args, "multi_latent_attention", False) or getattr(args, "multi_head_latent_attention", False)):
        raise MegatronFormatError("args.experimental_attention_variant = 'dsa' without multi_latent_attention: "
                                  "Megatron-core's DSA runs on MLA only")
    if not _arg(args, "dsa_indexer_scoring_relu", True):
        raise MegatronFormatError("args.dsa_indexer_scoring_relu = False: this decoder's indexer always applies ReLU "
                                  "to its head scores (DeepSeek-V3.2's); not supported")
    if getattr(args, "dsa_indexer_rope_interleaved", None) is None:
        raise MegatronFormatError("args.dsa_indexer_rope_interleaved is missing: the file comes from a megatron-core "
                                  "(0.16 or earlier) whose indexer rotates its last rope channels as MLA does, "
                                  "which this decoder's indexer (the rope channels first, DeepSeek's) does not; "
                                  "not supported")
    kwargs["experimental_attention_variant"] = DSA_VARIANT
    kwargs.update({name: getattr(args, name) for name in MEGATRON_DSA_ARGS if getattr(args, name, None) is not None})


def _dsa_args(config: TransformerConfig) -> Dict[str, Any]:
    """DSA's ``args`` (its Hadamard rotation of q and k is orthogonal: the scores are ours with or without it)."""
    return dict(experimental_attention_variant=DSA_VARIANT, dsa_indexer_scoring_relu=True,
                **{name: getattr(config, name) for name in MEGATRON_DSA_ARGS})


def dsa_their_suffix(suffix: str) -> str:
    """Megatron's name of our DSA indexer parameter ``suffix`` (layer-local)."""
    module, _, rest = suffix[len(DSA_INDEXER):].partition(".")
    return f"{MEGATRON_DSA_INDEXER}{DSA_INDEXER_NAMES[module]}.{rest}"


def dsa_our_suffix(suffix: str) -> str:
    """Our name of Megatron's DSA indexer parameter ``suffix`` (layer-local)."""
    module, _, rest = suffix[len(MEGATRON_DSA_INDEXER):].partition(".")
    return f"{DSA_INDEXER}{FROM_DSA_INDEXER_NAMES.get(module, module)}.{rest}"


def gdn_in_proj_rows(config: TransformerConfig, tp: int) -> Tuple[int, int]:
    """The rows of one TP rank's ``in_proj_qkvz`` and ``in_proj_ba`` (the two parts of Megatron's ``in_proj``)."""
    key_rows = 2 * config.linear_num_key_heads * config.linear_key_head_dim
    value_rows = 2 * config.linear_num_value_heads * config.linear_value_head_dim
    return (key_rows + value_rows) // tp, 2 * config.linear_num_value_heads // tp


# --------------------------------------------------------------------------- mixture-of-experts layers

# MoE fields Megatron-core's args hold under our names and meanings
MOE_SAME_NAME_FIELDS = (
    "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_router_score_function", "moe_router_dtype",
    "moe_router_num_groups", "moe_router_group_topk", "moe_router_topk_scaling_factor",
    "moe_router_enable_expert_bias", "moe_router_bias_update_rate", "moe_router_load_balancing_type",
    "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_expert_capacity_factor", "moe_shared_expert_intermediate_size",
    "moe_apply_probs_on_input",
)
# the MoE fields written specially (_moe_args), and the runtime ones Megatron's args hold under our names
MOE_FIELDS = (*MOE_SAME_NAME_FIELDS, "shared_expert_gate", "moe_router_pre_softmax", "norm_topk_prob",
              "moe_layer_freq", "first_k_dense_replace", "moe_router_group_score_topk")
# Megatron's layouts of a rank's experts (E of them): SequentialMLP (``local_experts.{i}.linear_fc1.weight``, the
# local spec, or TE without grouped GEMM), TEGroupedMLP (``linear_fc1.weight{i}``, TE with --moe-grouped-gemm) and
# the legacy GroupedMLP of local layers with --moe-grouped-gemm (MindSpeed-LLM's: ``weight1`` [h, E x fc1 rows]
# whose memory is the E matrices fc1_i^T, ``weight2`` [E x fc2 columns, h] of fc2_i^T)
SEQUENTIAL_EXPERTS, TE_GROUPED_EXPERTS, GROUPED_EXPERTS = "sequential", "te_grouped", "grouped"
EXPERT_PARTS = {"mlp.experts.linear_fc1.weight": "fc1", "mlp.experts.linear_fc2.weight": "fc2"}  # ours -> which
EXPERT_ENTRY = (  # Megatron's name of one expert entry -> (layout, which, local expert or None)
    (re.compile(r"^mlp\.experts\.local_experts\.(\d+)\.linear_(fc1|fc2)\.weight$"), SEQUENTIAL_EXPERTS),
    (re.compile(r"^mlp\.experts\.linear_(fc1|fc2)\.weight(\d+)$"), TE_GROUPED_EXPERTS),
    (re.compile(r"^mlp\.experts\.weight([12])$"), GROUPED_EXPERTS),
)
SHARED_EXPERT_GATE, MEGATRON_SHARED_EXPERT_GATE = "mlp.shared_expert_gate", "mlp.shared_experts.gate_weight"
TE_SHARED_EXPERT_MODULES = ("mlp.shared_experts.linear_fc1", "mlp.shared_experts.linear_fc2")


def expert_layout(transformer_impl: str, grouped_gemm: bool) -> str:
    """The expert layout Megatron builds for a run's ``transformer_impl`` and ``--moe-grouped-gemm``."""
    if not grouped_gemm:
        return SEQUENTIAL_EXPERTS
    return TE_GROUPED_EXPERTS if transformer_impl == "transformer_engine" else GROUPED_EXPERTS


def expert_entry(suffix: str) -> Optional[Tuple[str, str, Optional[int]]]:
    """(layout, 'fc1' or 'fc2', local expert or None for the grouped layout's one tensor) of a layer-local
    Megatron name, else None."""
    for pattern, layout in EXPERT_ENTRY:
        match = pattern.match(suffix)
        if match is None:
            continue
        if layout == SEQUENTIAL_EXPERTS:
            return layout, match.group(2), int(match.group(1))
        if layout == TE_GROUPED_EXPERTS:
            return layout, match.group(1), int(match.group(2))
        return layout, f"fc{match.group(1)}", None
    return None


def expert_entry_names(layout: str, which: str, local_experts: int) -> List[str]:
    """The layer-local Megatron names holding a rank's ``local_experts`` experts' ``which`` ('fc1' or 'fc2')."""
    if layout == SEQUENTIAL_EXPERTS:
        return [f"mlp.experts.local_experts.{i}.linear_{which}.weight" for i in range(local_experts)]
    if layout == TE_GROUPED_EXPERTS:
        return [f"mlp.experts.linear_{which}.weight{i}" for i in range(local_experts)]
    return [f"mlp.experts.weight{which[-1]}"]


def experts_to_megatron(layout: str, which: str, piece: torch.Tensor) -> List[torch.Tensor]:
    """A rank's stacked expert piece ``[E, rows, cols]`` (ours) as the tensors of :func:`expert_entry_names`."""
    if layout != GROUPED_EXPERTS:
        return [expert.clone() for expert in piece.unbind(0)]  # [rows, cols] each
    transposed = piece.transpose(1, 2).contiguous()  # [E, cols, rows]: fc_i^T in turn
    if which == "fc1":
        return [transposed.reshape(piece.size(2), -1)]  # [h, E x fc1 rows]
    return [transposed.reshape(-1, piece.size(1))]  # [E x fc2 columns, h]


def experts_from_megatron(layout: str, which: str, entries: Sequence[torch.Tensor],
                          local_experts: int) -> torch.Tensor:
    """The inverse of :func:`experts_to_megatron`: ``[E, rows, cols]``."""
    if layout != GROUPED_EXPERTS:
        return torch.stack(list(entries))
    weight = entries[0]
    if which == "fc1":  # [h, E x rows] whose memory is [E, h, rows]
        return weight.reshape(local_experts, weight.size(0), -1).transpose(1, 2)
    return weight.reshape(local_experts, -1, weight.size(1)).transpose(1, 2)  # [E x cols, h] -> [E, h, cols]


def _layer_marks(freq: Any, num_layers: int) -> List[int]:
    """Megatron's ``moe_layer_freq`` (N: layer i when i % N == 0; a list of 0/1; its list text) per layer."""
    if isinstance(freq, str):  # N, or a list expression (the N of parse_layer_frequency means another thing)
        freq = int(freq) if freq.strip().isdigit() else parse_layer_frequency(freq, num_layers, "args.moe_layer_freq")
    if isinstance(freq, int):
        return [int(layer % freq == 0) for layer in range(num_layers)]
    marks = [int(mark) for mark in freq]
    if len(marks) != num_layers:
        raise MegatronFormatError(f"args.moe_layer_freq {marks} has {len(marks)} entries for {num_layers} layers")
    return marks


def _moe_placement(marks: Sequence[int]) -> Tuple[int, int]:
    """(moe_layer_freq, first_k_dense_replace) giving the per-layer MoE ``marks``; refused when none does."""
    first = marks.index(1) if 1 in marks else len(marks)
    for freq in range(1, len(marks) + 1):
        if all(mark == int(layer >= first and layer % freq == 0) for layer, mark in enumerate(marks)):
            return freq, first
    raise MegatronFormatError(f"args.moe_layer_freq {list(marks)}: this decoder places MoE layers every N-th layer "
                              "after the first K dense ones, which cannot give this pattern")


def _moe_kwargs(args: argparse.Namespace, kwargs: Dict[str, Any]) -> None:
    """The mixture-of-experts fields of ``args`` into ``kwargs`` (nothing without ``num_experts``)."""
    pattern = kwargs.get("hybrid_override_pattern")
    if not getattr(args, "num_experts", None):
        if "E" in (pattern or ""):
            raise MegatronFormatError(f"args.hybrid_layer_pattern {pattern!r} has MoE ('E') layers but args has no "
                                      "num_experts; the checkpoint does not describe its experts")
        return
    if kwargs.get("add_bias_linear"):
        raise MegatronFormatError("args.add_bias_linear = True with experts: Megatron's routers and experts then "
                                  "have biases, which this converter does not map; not supported")
    etp = getattr(args, "expert_tensor_parallel_size", None)
    if etp is not None and int(etp) != int(_arg(args, "tensor_model_parallel_size", 1)):
        raise MegatronFormatError(f"args.expert_tensor_parallel_size = {etp} differs from the tensor parallel size: "
                                  "only experts split like the dense MLP (ETP = TP) are supported")
    kwargs.update({name: getattr(args, name) for name in MOE_SAME_NAME_FIELDS if getattr(args, name, None) is not None})
    kwargs["shared_expert_gate"] = bool(_arg(args, "moe_shared_expert_gate", False))
    score = kwargs.get("moe_router_score_function", "softmax")
    if score == "softmax":
        if kwargs.get("moe_router_enable_expert_bias"):
            raise MegatronFormatError("args.moe_router_enable_expert_bias = True with softmax scores: Megatron "
                                      "ignores the expert bias there, this decoder selects with it; not supported")
        # softmax over all experts then the top-k renormalised (MindSpeed's norm_topk_prob) is a softmax over
        # the top-k logits, Megatron's default: read as ours spells it
        norm = bool(_arg(args, "norm_topk_prob", False))
        kwargs.update(moe_router_pre_softmax=norm or bool(_arg(args, "moe_router_pre_softmax", False)),
                      norm_topk_prob=norm)
    elif score == "sigmoid":  # Megatron renormalises the top-k sigmoid weights exactly when it keeps several
        kwargs.update(moe_router_pre_softmax=False, norm_topk_prob=int(kwargs.get("moe_router_topk", 2)) > 1)
    else:
        raise MegatronFormatError(f"args.moe_router_score_function = {score!r} is not supported (softmax or sigmoid)")
    if pattern is None:
        first_k = getattr(args, "first_k_dense_replace", None)  # MindSpeed's, beside an int moe_layer_freq
        marks = _layer_marks(_arg(args, "moe_layer_freq", 1), int(kwargs["num_layers"]))
        if first_k:
            marks = [mark if layer >= int(first_k) else 0 for layer, mark in enumerate(marks)]
        kwargs["moe_layer_freq"], kwargs["first_k_dense_replace"] = _moe_placement(marks)


def _moe_args(config: TransformerConfig) -> Dict[str, Any]:
    """The mixture-of-experts ``args`` of ``config``; refuses routing Megatron's router does not compute."""
    if config.num_experts is None:
        return dict(num_experts=None)
    if config.add_bias_linear or config.add_router_bias:
        raise MegatronFormatError("this model has biases on its router or experts; Megatron-LM's MoE layers have "
                                  "them only with add_bias_linear everywhere, which this converter does not map; "
                                  "convert it to hf or mg instead")
    score, topk = config.moe_router_score_function, config.moe_router_topk
    grouped = config.moe_router_num_groups is not None
    if score == "softmax":
        what = ("selects without the expert bias" if config.moe_router_enable_expert_bias else
                "ranks groups by their top logits, not by renormalised softmax scores"
                if grouped and config.moe_router_pre_softmax and config.norm_topk_prob else None)
        if what:
            raise MegatronFormatError(f"this model's softmax routing differs from Megatron-LM's, which {what}; "
                                      "convert it to hf or mg instead")
        pre_softmax = config.moe_router_pre_softmax and not config.norm_topk_prob
    elif score == "sigmoid":
        if config.norm_topk_prob != (topk > 1):
            raise MegatronFormatError(f"this model sets norm_topk_prob = {config.norm_topk_prob} with sigmoid scores "
                                      f"and top-{topk}; Megatron-LM renormalises them exactly when top-k > 1; "
                                      "convert it to hf or mg instead")
        pre_softmax = False
    else:
        raise MegatronFormatError(f"this model sets moe_router_score_function = {score!r}, which Megatron-LM "
                                  "checkpoints cannot express; convert it to hf or mg instead")
    score_topk = config.moe_router_group_score_topk
    if grouped and score_topk is not None and score_topk != topk // config.moe_router_group_topk:
        raise MegatronFormatError(f"this model sets moe_router_group_score_topk = {score_topk}; Megatron-LM scores "
                                  f"a group by its best top-k / group-topk = {topk // config.moe_router_group_topk} "
                                  "experts; convert it to hf or mg instead")
    out = {name: getattr(config, name) for name in MOE_SAME_NAME_FIELDS}
    hybrid = config.hybrid_override_pattern is not None
    out.update(moe_shared_expert_gate=config.shared_expert_gate, moe_router_pre_softmax=pre_softmax,
               norm_topk_prob=config.norm_topk_prob, first_k_dense_replace=None,
               moe_layer_freq=1 if hybrid else [int(config.is_moe_layer(i)) for i in range(config.num_layers)])
    return out


# --------------------------------------------------------------------------- multi-latent attention and MTP

# MLA sizes Megatron-core's args hold under our names, with its defaults
MEGATRON_MLA_ARGS = dict(q_lora_rank=None, kv_lora_rank=32, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128)
# our YaRN fields -> Megatron's MLA names (its ``rope_type`` says whether they apply), with its defaults
MEGATRON_YARN_ARGS = {"rope_scaling_factor": ("rotary_scaling_factor", 1.0),
                      "rope_scaling_mscale": ("mscale", 1.0), "rope_scaling_mscale_all_dim": ("mscale_all_dim", 0.0),
                      "rope_scaling_beta_fast": ("beta_fast", 32.0), "rope_scaling_beta_slow": ("beta_slow", 1.0),
                      "rope_original_max_position_embeddings": ("original_max_position_embeddings", 4096)}
# megatron-core's local MLA layers build the down projections as ColumnParallelLinear (rows split over TP)
MLA_DOWN_PROJECTIONS = ("self_attention.linear_q_down_proj.weight", "self_attention.linear_kv_down_proj.weight")
MLA_FIELDS = ("multi_latent_attention", *MEGATRON_MLA_ARGS, "rope_scaling_beta_fast", "rope_scaling_beta_slow",
              "rope_scaling_mscale", "rope_scaling_mscale_all_dim")
MTP_FIELDS = ("mtp_num_layers",)


def mla_down_rows(config: TransformerConfig, name: str) -> int:
    """The rows of the MLA down projection ``name`` (our parameter name) in ``config``."""
    if name.endswith(MLA_DOWN_PROJECTIONS[0]):
        return config.q_lora_rank or 0
    return config.kv_lora_rank + config.qk_pos_emb_head_dim


def _mla_kwargs(args: argparse.Namespace, kwargs: Dict[str, Any]) -> None:
    """The multi-latent attention fields of ``args`` into ``kwargs``: its sizes, its latent norms (Megatron's
    ``qk_layernorm`` with MLA), its RoPE on de-interleaved rope channels (our ``rope_interleaved``) and YaRN by
    Megatron's ``rope_type`` (MLA's default)."""
    if not (getattr(args, "multi_latent_attention", False) or getattr(args, "multi_head_latent_attention", False)):
        return
    if not _arg(args, "qk_layernorm", False):
        raise MegatronFormatError("args.multi_latent_attention without args.qk_layernorm: Megatron's MLA then has no "
                                  "q/kv latent norms, which this decoder's MLA always has; not supported")
    kwargs.update({key: _arg(args, key, default) for key, default in MEGATRON_MLA_ARGS.items()})
    kwargs.update(multi_latent_attention=True, qk_norm="none", rope_interleaved=True)
    if _arg(args, "rotary_interleaved", False):
        raise MegatronFormatError("args.rotary_interleaved = True with multi-latent attention: Megatron then "
                                  "rotates the de-interleaved rope channels as pairs again; not supported")
    rope_type = _arg(args, "rope_type", "yarn")
    if rope_type == "yarn":
        kwargs["rope_scaling_type"] = "yarn"
        kwargs.update({ours: type(default)(_arg(args, theirs, default))
                       for ours, (theirs, default) in MEGATRON_YARN_ARGS.items()})
    elif rope_type != "rope":
        raise MegatronFormatError(f"args.rope_type = {rope_type!r} is not supported (rope or yarn)")


def _mla_args(config: TransformerConfig) -> Dict[str, Any]:
    """The multi-latent attention ``args`` of ``config``; refuses what Megatron's MLA does not compute."""
    if not config.multi_latent_attention:
        return dict(multi_latent_attention=False)
    required = {"rope_interleaved": (True, "its MLA rotates the rope channels de-interleaved (DeepSeek's layout)"),
                "mla_latent_norm_epsilon": (None, "its latent norms use norm_epsilon"),
                "qkv_bias": (False, "its MLA projections have no biases"),
                "attention_scale": (None, "its MLA softmax scale is 1/sqrt(head dim) times YaRN's mscale^2")}
    for name, (value, why) in required.items():
        ours = getattr(config, name)
        if ours != value:
            raise MegatronFormatError(f"this model sets {name} = {ours!r} with multi-latent attention; Megatron-LM "
                                      f"cannot express it ({why}); convert it to hf or mg instead")
    if config.rope_scaling_type not in (None, "yarn"):
        raise MegatronFormatError(f"this model sets rope_scaling_type = {config.rope_scaling_type!r} with "
                                  "multi-latent attention; Megatron-LM's MLA has rope or yarn only; convert it to hf "
                                  "or mg instead")
    out: Dict[str, Any] = {key: getattr(config, key) for key in MEGATRON_MLA_ARGS}
    out.update(multi_latent_attention=True, qk_layernorm=True, rotary_interleaved=False,
               rope_type="yarn" if config.rope_scaling_type == "yarn" else "rope")
    out.update({theirs: getattr(config, ours) for ours, (theirs, _) in MEGATRON_YARN_ARGS.items()})
    return out


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
    _hybrid_kwargs(args, kwargs)
    _gdn_kwargs(args, kwargs)
    _moe_kwargs(args, kwargs)
    _mla_kwargs(args, kwargs)
    if getattr(args, "mtp_num_layers", None):
        kwargs["mtp_num_layers"] = int(args.mtp_num_layers)
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
    hybrid = _hybrid_args(config)  # first: a layer kind Megatron lacks is named by its letter
    gdn, moe, mla = _gdn_args(config), _moe_args(config), _mla_args(config)
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    known = set(SAME_NAME_FIELDS) | set(RENAMED_FIELDS) | set(DERIVED_FIELDS) | set(RUNTIME_CONFIG_FIELDS) | {
        "hybrid_override_pattern", *feature_fields(MAMBA), *GDN_FIELDS, *feature_fields(DSA),
        *MOE_FIELDS, *MTP_FIELDS, *(MLA_FIELDS if config.multi_latent_attention else ("multi_latent_attention",)),
    }  # checked by _hybrid_args, _gdn_args, _moe_args, _mla_args
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
               init_method_std=config.init_method_std, multi_latent_attention=False, rope_type=None)
    llama3 = config.rope_scaling_type == "llama3" and all(
        getattr(config, name) == value for name, value in MEGATRON_LLAMA3_ROPE.items())
    out["use_rope_scaling"] = llama3  # Megatron-LM's spelling of the same scaling
    out["add_rmsnorm_offset"] = config.apply_layernorm_1p and config.normalization == "RMSNorm"  # MindSpeed's
    out.update(hybrid)
    out.update(gdn)
    out.update(moe)
    if mla["multi_latent_attention"]:  # the latent norms are Megatron's qk_layernorm with MLA
        out.update(mla)
    out["mtp_num_layers"] = config.mtp_num_layers
    return out


# --------------------------------------------------------------------------- parameter names

LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
# our layer-local name -> the Transformer Engine style name (a Mamba layer's norm is fused into its in_proj)
TE_NORM_NAMES = {
    "input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
    "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
    "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
    "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias",
    "norm.weight": "mixer.in_proj.layer_norm_weight",
    "norm.bias": "mixer.in_proj.layer_norm_bias",
}
# a gated DeltaNet layer fuses its input norm into the GDN's in_proj instead
GDN_TE_NORM_NAMES = {"input_layernorm.weight": "self_attention.in_proj.layer_norm_weight",
                     "input_layernorm.bias": "self_attention.in_proj.layer_norm_bias"}
# an MLA layer's latent norms, fused into its up projections
MLA_TE_NORM_NAMES = {"self_attention.q_layernorm.weight": "self_attention.linear_q_up_proj.layer_norm_weight",
                     "self_attention.kv_layernorm.weight": "self_attention.linear_kv_up_proj.layer_norm_weight"}
FROM_TE_NORM_NAMES = {te: ours for names in (TE_NORM_NAMES, GDN_TE_NORM_NAMES, MLA_TE_NORM_NAMES)
                      for ours, te in names.items()}
# An MTP module's layer: ours ``mtp.layers.{k}.transformer_layer.*`` (megatron-core <= 0.16's name, and
# MindSpeed-LLM's); later megatron-core names it ``mtp_model_layer``. Both are read; --megatron-mtp-layer-name
# picks the one written.
MTP_LAYER, MTP_LAYER_NAMES = "mtp_model_layer", ("mtp_model_layer", "transformer_layer")
MTP_OURS = re.compile(r"^mtp\.layers\.(\d+)\.transformer_layer\.(.*)$")
MTP_THEIRS = re.compile(r"^mtp\.layers\.(\d+)\.(?:transformer_layer|mtp_model_layer)\.(.*)$")
# Megatron-core >= 0.19's names of the Mamba conv (direct mixer parameters) -> ours (and earlier releases')
FROM_CONV_PARAMETER_NAMES = {"mixer.conv1d_weight": "mixer.conv1d.weight", "mixer.conv1d_bias": "mixer.conv1d.bias"}
# the final norm: ours (and Megatron's GPT TransformerBlock's) -> Megatron's HybridStack / MambaStack's
FINAL_NORM, HYBRID_FINAL_NORM = "decoder.final_layernorm.", "decoder.final_norm."
# modules with a Transformer Engine ``_extra_state`` entry, per part of a layer (TE spec)
TE_ATTENTION_MODULES = ("self_attention.linear_qkv", "self_attention.core_attention", "self_attention.linear_proj")
TE_MLP_MODULES = ("mlp.linear_fc1", "mlp.linear_fc2")
TE_MAMBA_MODULES = ("mixer.in_proj", "mixer.out_proj")  # (its gated norm is mamba_ssm's, without one)
TE_GDN_MODULES = ("self_attention.in_proj", "self_attention.out_proj")
QKV_SUFFIXES = ("self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias")
# A gated DeltaNet layer (Megatron-core's GatedDeltaNet): its one ``in_proj`` holds, on TP rank t, the rows
# ``[q_t; k_t; v_t; z_t; b_t; a_t]`` (each part the rank's heads in order); ours are two projections grouped per
# key head, ``in_proj_qkvz`` (the first four parts) and ``in_proj_ba`` (the last two). Its ``out_norm`` is our
# gated norm, zero-centred ((1 + w), stored w - 1) when the model's norms are (``apply_layernorm_1p``).
GDN_IN_PROJ = "self_attention.in_proj.weight"
GDN_IN_PROJ_PARTS = ("self_attention.in_proj_qkvz.weight", "self_attention.in_proj_ba.weight")  # Megatron's order
GDN_OUT_NORM, GDN_NORM = "self_attention.out_norm.weight", "self_attention.norm.weight"
GDN_RENAMED = {GDN_NORM: GDN_OUT_NORM, **{part: GDN_IN_PROJ for part in GDN_IN_PROJ_PARTS}}
FROM_GDN_NAMES = {GDN_OUT_NORM: GDN_NORM}


def is_fused_qkv(name: str) -> bool:
    """Whether ``name`` (ours or theirs) is a fused QKV weight or bias, whose rows are laid out differently."""
    return name.endswith(QKV_SUFFIXES)


def split_layer(name: str) -> Optional[Tuple[int, str]]:
    """(layer number, name within the layer) of a decoder layer parameter, else None."""
    match = LAYER.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


def their_name(our_name: str, local_layer: Optional[int], transformer_impl: str, hybrid: bool = False,
               mixer: Optional[str] = None, mlp: Optional[str] = None, mla: bool = False,
               mtp_layer: str = MTP_LAYER, dsa: bool = False) -> str:
    """The Megatron name of our parameter ``our_name`` in a chunk where its layer is ``local_layer``;
    ``hybrid``: of a hybrid model (Megatron's HybridStack, whose final norm is ``final_norm``); ``mixer``,
    ``mlp`` and ``mla``: the layer's parts (see :func:`their_layer_suffix`; an MTP module's layer has the last
    decoder layer's), ``mtp_layer``: the name of an MTP module's layer (:data:`MTP_LAYER_NAMES`); ``dsa``: the
    model's MLA layers are DeepSeek Sparse Attention."""
    mtp = MTP_OURS.match(our_name)
    if mtp:
        suffix = their_layer_suffix(mtp.group(2), transformer_impl, mixer, mlp, mla, dsa)
        return f"mtp.layers.{mtp.group(1)}.{mtp_layer}.{suffix}"
    parts = split_layer(our_name)
    if parts is None:
        if hybrid and our_name.startswith(FINAL_NORM):
            return HYBRID_FINAL_NORM + our_name[len(FINAL_NORM):]
        return our_name
    return f"decoder.layers.{local_layer}.{their_layer_suffix(parts[1], transformer_impl, mixer, mlp, mla, dsa)}"


def their_layer_suffix(suffix: str, transformer_impl: str, mixer: Optional[str], mlp: Optional[str],
                       mla: bool, dsa: bool = False) -> str:
    """Megatron's name of our layer-local ``suffix``: a gated DeltaNet's parameters are named and fused as
    Megatron-core's GatedDeltaNet (both parts of its ``in_proj`` get that one name), a DSA indexer's as its core
    attention's, and Transformer Engine fuses norms into the next linear, except an MoE layer's and an MLA layer's
    input norm (whose latent norms it fuses into the up projections instead; a DSA layer fuses none of them)."""
    if suffix.startswith(DSA_INDEXER):
        return dsa_their_suffix(suffix)
    if dsa and suffix.startswith(("input_layernorm", "self_attention.")):
        return suffix
    if mixer == GDN_MIXER:
        suffix = GDN_RENAMED.get(suffix, suffix)
        if transformer_impl == "transformer_engine":
            suffix = GDN_TE_NORM_NAMES.get(suffix, suffix)
    if suffix == SHARED_EXPERT_GATE:
        suffix = MEGATRON_SHARED_EXPERT_GATE
    if transformer_impl != "transformer_engine":
        return suffix
    if mla:
        if suffix.startswith("input_layernorm"):
            return suffix
        suffix = MLA_TE_NORM_NAMES.get(suffix, suffix)
    if mlp == MOE_MLP and suffix.startswith("pre_mlp_layernorm"):
        return suffix
    return TE_NORM_NAMES.get(suffix, suffix)


def our_layer_name(their: str) -> Optional[Tuple[Optional[int], str]]:
    """(chunk-local layer number or None, our name with that number left as ``{i}``) of a Megatron
    parameter name; None for entries that carry no weights (``_extra_state``). A gated DeltaNet's
    ``in_proj`` keeps its name: it holds two of ours (:func:`gdn_in_proj_rows`)."""
    if their.endswith("._extra_state") or their == "_extra_state":
        return None
    mtp = MTP_THEIRS.match(their)
    if mtp:
        return None, f"mtp.layers.{mtp.group(1)}.transformer_layer.{our_layer_suffix(mtp.group(2))}"
    parts = split_layer(their)
    if parts is None:
        if their.startswith(HYBRID_FINAL_NORM):
            return None, FINAL_NORM + their[len(HYBRID_FINAL_NORM):]
        return None, their
    local, suffix = parts
    return local, "decoder.layers.{i}." + our_layer_suffix(suffix)


def our_layer_suffix(suffix: str) -> str:
    """Our layer-local name of Megatron's ``suffix`` (the inverse of :func:`their_layer_suffix`)."""
    if suffix.startswith(MEGATRON_DSA_INDEXER):
        return dsa_our_suffix(suffix)
    suffix = FROM_CONV_PARAMETER_NAMES.get(suffix, FROM_GDN_NAMES.get(suffix, suffix))
    if suffix == MEGATRON_SHARED_EXPERT_GATE:
        suffix = SHARED_EXPERT_GATE
    return FROM_TE_NORM_NAMES.get(suffix, suffix)


def is_gdn_in_proj(their: str) -> bool:
    """Whether Megatron's ``their`` is a gated DeltaNet's fused ``in_proj`` (two of our parameters)."""
    return their.endswith("." + GDN_IN_PROJ)


def is_gdn_in_proj_part(our_name: str) -> bool:
    """Whether our ``our_name`` is one of the two projections a Megatron GatedDeltaNet fuses into ``in_proj``."""
    return our_name.endswith(GDN_IN_PROJ_PARTS)


def gdn_part_to_megatron(our_name: str, piece: torch.Tensor, config: TransformerConfig, tp: int) -> torch.Tensor:
    """A TP rank's piece of ``in_proj_qkvz`` / ``in_proj_ba`` (grouped per key head) as the rows of its part of
    Megatron's ``in_proj`` on that rank: ``[q; k; v; z]`` / ``[b; a]``, each over the rank's heads in order."""
    if our_name.endswith(GDN_IN_PROJ_PARTS[0]):
        return torch.cat(separate_from_qkvz(piece, config, tp))
    return torch.cat(separate_from_ba(piece, config, tp))


def gdn_part_from_megatron(our_name: str, rows: torch.Tensor, config: TransformerConfig, tp: int) -> torch.Tensor:
    """The inverse of :func:`gdn_part_to_megatron`: a rank's ``[q; k; v; z]`` or ``[b; a]`` rows grouped per key
    head as our TP piece."""
    if our_name.endswith(GDN_IN_PROJ_PARTS[0]):
        z_rows = config.linear_num_value_heads * config.linear_value_head_dim // tp
        qkv, z = rows.split([rows.size(0) - z_rows, z_rows])
        return qkvz_from_separate(qkv, z, config, tp)
    b, a = rows.chunk(2)
    return ba_from_separate(b, a, config, tp)


def is_gdn_norm(our_name: str) -> bool:
    """Whether our ``our_name`` is a gated DeltaNet's gated norm (Megatron's ``out_norm``)."""
    return our_name.endswith("." + GDN_NORM)


def te_modules(config: TransformerConfig, layer: int, experts: str = TE_GROUPED_EXPERTS,
               local_experts: int = 1) -> Tuple[str, ...]:
    """The Transformer Engine modules (with an ``_extra_state`` each) of global layer ``layer``; an MoE layer's
    experts in the ``experts`` layout, ``local_experts`` of them on a rank."""
    mixer, mlp = config.layer_parts(layer)
    moe: Tuple[str, ...] = ()
    if config.is_moe_layer(layer):
        moe = (("mlp.experts.linear_fc1", "mlp.experts.linear_fc2") if experts == TE_GROUPED_EXPERTS else
               tuple(f"mlp.experts.local_experts.{i}.linear_{which}" for i in range(local_experts)
                     for which in ("fc1", "fc2")))
        moe += TE_SHARED_EXPERT_MODULES if config.moe_shared_expert_intermediate_size else ()
    attention = TE_ATTENTION_MODULES
    if config.multi_latent_attention:
        queries = ("linear_q_proj",) if config.q_lora_rank is None else ("linear_q_down_proj", "linear_q_up_proj")
        core = () if config.is_dsa else ("core_attention",)  # DSA's core attention is not a TE module
        attention = tuple(f"self_attention.{name}" for name in (
            *queries, "linear_kv_down_proj", "linear_kv_up_proj", *core, "linear_proj"))
        if config.is_dsa and config.dsa_topk_source(layer) == layer:  # a sharing layer builds no indexer
            attention += TE_DSA_INDEXER_MODULES
    return ((TE_MAMBA_MODULES if mixer == MAMBA_MIXER else ())
            + (TE_GDN_MODULES if mixer == GDN_MIXER else ())
            + (attention if mixer == ATTENTION_MIXER else ())
            + (TE_MLP_MODULES if mlp == DENSE_MLP and not config.is_moe_layer(layer) else ()) + moe)


def extra_state_names(layers: Sequence[Tuple[int, int]], config: TransformerConfig, experts: str = TE_GROUPED_EXPERTS,
                      local_experts: int = 1, mtp_layer: Optional[str] = None) -> Tuple[str, ...]:
    """The ``_extra_state`` entries Transformer Engine adds for ``layers``: (chunk-local, global) numbers; with
    ``mtp_layer`` (the chunk holds the MTP modules) those of each MTP module, whose layer is built as the last
    decoder layer."""
    names = [f"decoder.layers.{local}.{module}._extra_state" for local, layer in layers
             for module in te_modules(config, layer, experts, local_experts)]
    if mtp_layer is not None:
        last = te_modules(config, config.num_layers - 1, experts, local_experts)
        names += [f"mtp.layers.{k}.{module}._extra_state" for k in range(config.mtp_num_layers or 0)
                  for module in ("eh_proj", *(f"{mtp_layer}.{inner}" for inner in last))]
    return tuple(names)

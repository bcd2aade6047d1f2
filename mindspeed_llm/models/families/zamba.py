"""Zamba2 (``zamba2``) and Zamba (``zamba``) as registry data: Mamba layers, and at some depths a shared attention
block before the Mamba layer (our letter ``Z``, :mod:`core.transformer.shared_block`).

``layers_block_type`` gives per layer ``mamba``/``linear_attention`` ('M') or ``hybrid`` ('Z'). The hybrid
layers take turns over ``num_mem_blocks`` shared blocks (the k-th hybrid layer runs block ``k mod N``); a block
is attention over ``[hidden; embeddings]`` (``2h`` wide, heads of ``2h / num_attention_heads`` channels, softmax
scale ``(head_dim / 2) ** -0.5``: our ``--query-pre-attn-scalar head_dim/2``) and a GeGLU MLP. transformers
saves each block once, under its first hybrid layer (later ones tie to it), and the per-depth adapters inside
it, indexed by the hybrid layer's rank::

    ours                                                 HF (model.layers.{i}.*; {s}: the block's first hybrid layer)
    decoder.layers.{i}.norm  (M | Z)                     input_layernorm | mamba_decoder.input_layernorm
    decoder.layers.{i}.mixer.<name>                      mamba.<name> | mamba_decoder.mamba.<name>
    decoder.layers.{i}.adapters.proj (Z)                 linear
    decoder.layers.{i}.adapters.mlp_adapter.down | up    {s}.shared_transformer.feed_forward
                                                         .gate_up_proj_adapter_list.{d}.0 | .1
    decoder.layers.{i}.adapters.q/k/v_adapter.down | up  {s}.shared_transformer.self_attn
                                                         .linear_q/k/v_adapter_list.{d}.0 | .1
    decoder.shared_blocks.{k}.input_layernorm            {s}.shared_transformer.input_layernorm
    decoder.shared_blocks.{k}.self_attention.linear_qkv  cat({s}.shared_transformer.self_attn.q_proj, k_proj, v_proj)
    decoder.shared_blocks.{k}.self_attention.linear_proj {s}.shared_transformer.self_attn.o_proj
    decoder.shared_blocks.{k}.pre_mlp_layernorm          {s}.shared_transformer.pre_ff_layernorm
    decoder.shared_blocks.{k}.mlp.linear_fc1 / fc2       {s}.shared_transformer.feed_forward.gate_up_proj / down_proj

The MLP adapters exist whatever the config says (``adapter_rank``); the attention ones with
``use_shared_attention_adapter``, which transformers can only build when the KV heads are the query heads.
Attention has RoPE over the whole head with ``use_mem_rope``, else no positions. The Mamba2 mixer has
``n_mamba_heads`` heads of ``mamba_expand x hidden / n_mamba_heads`` channels, a conv bias always (transformers
builds one whatever ``use_conv_bias`` says), in/out projection biases with ``add_bias_linear`` (refused: the
suite's Mamba projections have none), its gated norm's eps fixed at 1e-5 (so ``rms_norm_eps`` must be 1e-5
here, as in every published model) and dt clamped below at ``time_step_min``. Embeddings are tied by default.

transformers ties the shared blocks only with ``tie_word_embeddings``: an untied config has one block per hybrid
layer (``--num-shared-blocks`` = the 'Z' layers), each saved under its own layer.

Refused in one line: ``use_long_context`` (a rescaled RoPE transformers applies on its own), projection biases,
another ``rms_norm_eps``, and attention adapters with grouped KV heads.

Zamba (v1) has the same 'Z' layers over one shared block (one per hybrid layer when untied) without adapters or
positions, its MLP's gate and up projections saved apart and the block under ``shared_transf``. Its Mamba is
Mamba1 split into ``n_mamba_heads`` independent SSMs (our ``--mamba-version 1 --mamba-num-heads``, each head
``mamba_expand x hidden / heads`` channels wide) with no dt clamp; transformers keeps each per-head tensor as
``[heads, ...]`` (``x_proj_weight [heads, r + 2n, p]``, ``dt_proj_weight [heads, p, r]``, ``A_log``, ``D``,
``dt_proj_bias``: ours flatten the first two dims) and ``in_proj``'s rows as ``x_0, z_0, x_1, z_1, ...`` (ours
``[x; z]``). Refused: projection biases and a Mamba activation other than SiLU.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.families.llama_like import _refuse
from mindspeed_llm.models.families.ssm import INFINITY, MIXER_TENSORS
from mindspeed_llm.models.registry import (GATED_ACTIVATIONS, TRANSFORMS, Family, RegistryError, WeightRule,
                                           _checked, _dtype_name, _gated_activation, _rope_settings, _rope_to_hf,
                                           register, require_config)

BLOCK_LETTERS = {"mamba": "M", "linear_attention": "M", "hybrid": "Z"}
LETTER_BLOCKS = {"M": "mamba", "Z": "hybrid"}
GATED_NORM_EPS = 1e-5  # transformers' Zamba2RMSNormGated inside every Mamba2 mixer
# keys transformers reads but that change nothing here, or that initialisation alone uses (kept for the inverse)
PRESERVED = ("time_step_max", "time_step_floor", "use_mamba_kernels", "use_mem_eff_path", "num_logits_to_keep",
             "use_conv_bias", "hybrid_layer_ids", "attention_hidden_size", "attention_head_dim", "kv_channels",
             "num_query_groups", "mamba_headdim")
PRESERVED_V1 = ("time_step_min", "time_step_max", "time_step_floor", "use_mamba_kernels", "num_logits_to_keep",
                "use_associative_scan", "attn_layer_period", "attn_layer_offset")


def _pattern(hf: Dict[str, Any], family: str = "zamba2") -> str:
    blocks = hf.get("layers_block_type") or hf.get("layer_types")
    if not blocks:
        raise RegistryError(f"{family} config.json needs layers_block_type (one of mamba/hybrid per layer)")
    unknown = sorted({block for block in blocks if block not in BLOCK_LETTERS})
    if unknown:
        raise RegistryError(f"{family} layers_block_type {unknown} are not supported ({sorted(BLOCK_LETTERS)})")
    return "".join(BLOCK_LETTERS[block] for block in blocks)


def _zamba2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    _refuse("zamba2", hf, use_long_context=False, add_bias_linear=False, rms_norm_eps=GATED_NORM_EPS)
    pattern, hidden = _pattern(hf), int(hf["hidden_size"])
    heads = int(hf.get("num_attention_heads", 32))
    groups = int(hf.get("num_key_value_heads") or heads)
    attention_adapters = bool(hf.get("use_shared_attention_adapter", False))
    if attention_adapters and groups != heads:
        raise RegistryError(f"zamba2 use_shared_attention_adapter with num_key_value_heads={groups} != "
                            f"num_attention_heads={heads} is not supported (transformers' adapters are 2 x hidden "
                            "wide for k and v too)")
    head_dim = 2 * hidden // heads
    mamba_heads, expand = int(hf.get("n_mamba_heads", 8)), int(hf.get("mamba_expand", 2))
    kwargs: Dict[str, Any] = dict(
        num_layers=len(pattern), hybrid_override_pattern=pattern, hidden_size=hidden,
        ffn_hidden_size=int(hf.get("intermediate_size") or 4 * hidden), num_attention_heads=heads,
        num_query_groups=groups, kv_channels=head_dim, query_pre_attn_scalar=head_dim / 2,
        vocab_size=int(hf["vocab_size"]), max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        normalization="RMSNorm", norm_epsilon=GATED_NORM_EPS, add_bias_linear=False,
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", True),
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)),
        make_vocab_size_divisible_by=1, **_gated_activation({**hf, "hidden_act": hf.get("hidden_act") or "gelu"}),
        mamba_version=2, mamba_state_dim=int(hf.get("mamba_d_state", 64)),
        mamba_head_dim=expand * hidden // mamba_heads, mamba_num_groups=int(hf.get("mamba_ngroups", 1)),
        mamba_expand=expand, mamba_d_conv=int(hf.get("mamba_d_conv", 4)), mamba_conv_bias=True,
        mamba_chunk_size=int(hf.get("chunk_size", 256)), mamba_dt_limit_min=float(hf.get("time_step_min", 0.001)))
    if expand * hidden % mamba_heads:
        raise RegistryError(f"zamba2 mamba_expand x hidden_size = {expand * hidden} is not a multiple of "
                            f"n_mamba_heads={mamba_heads}")
    if "Z" in pattern:
        kwargs.update(num_shared_blocks=_blocks(hf, pattern),
                      shared_block_adapter_rank=int(hf.get("adapter_rank", 128)),
                      shared_block_attention_adapters=attention_adapters)
        if hf.get("use_mem_rope", False):
            kwargs.update(position_embedding_type="rope", **_rope_settings(hf))
        else:
            kwargs["position_embedding_type"] = "none"
    else:  # an all-Mamba stack: no attention or MLP field applies
        for key in ("ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
                    "query_pre_attn_scalar", "attention_dropout", "activation", "add_bias_linear"):
            kwargs.pop(key, None)
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _blocks(hf: Dict[str, Any], pattern: str) -> int:
    """How many distinct shared blocks the model holds: ``num_mem_blocks``, but one per hybrid layer when the
    embeddings are untied (transformers ties the blocks' weights only under ``tie_word_embeddings``)."""
    if hf.get("tie_word_embeddings", True):
        return int(hf.get("num_mem_blocks", 1))
    return pattern.count("Z")


def _zamba2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    pattern = cfg.hybrid_override_pattern
    if pattern is None or set(pattern) - set(LETTER_BLOCKS):
        raise RegistryError("zamba2 needs --hybrid-override-pattern of M and Z letters")
    require_config(cfg, "zamba2", normalization="RMSNorm", norm_epsilon=GATED_NORM_EPS, mamba_version=2,
                   mamba_conv_bias=True, mamba_dt_limit_max=None, mamba_norm_before_gate=False,
                   apply_layernorm_1p=False, fp32_residual_connection=False)
    out: Dict[str, Any] = dict(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        layers_block_type=[LETTER_BLOCKS[letter] for letter in pattern],
        max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.norm_epsilon,
        tie_word_embeddings=not cfg.untie_embeddings_and_output_weights, initializer_range=cfg.init_method_std,
        mamba_d_state=cfg.mamba_state_dim, mamba_d_conv=cfg.mamba_d_conv, mamba_expand=cfg.mamba_expand,
        mamba_ngroups=cfg.mamba_num_groups, n_mamba_heads=cfg.mamba_num_heads, chunk_size=cfg.mamba_chunk_size,
        time_step_min=cfg.mamba_dt_limit_min, add_bias_linear=False, use_conv_bias=True, use_long_context=False,
        attention_dropout=0.0, use_cache=True, torch_dtype=str(cfg.params_dtype).replace("torch.", ""))
    if cfg.mamba_expand * cfg.hidden_size != cfg.mamba_d_inner:
        raise RegistryError("zamba2's Mamba width is mamba_expand x hidden_size: drop --mamba-num-heads")
    if cfg.has_shared_blocks:
        out.update(_shared_block_hf_config(cfg))
    return out


def _shared_block_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    heads = cfg.num_attention_heads
    if cfg.kv_channels * heads != 2 * cfg.hidden_size or cfg.query_pre_attn_scalar != cfg.kv_channels / 2:
        raise RegistryError("zamba2's shared attention has heads of 2 x hidden / heads channels and "
                            "--query-pre-attn-scalar kv_channels / 2")
    if cfg.shared_block_adapter_rank is None:
        raise RegistryError("zamba2's shared MLP always has adapters: add --shared-block-adapter-rank")
    block = _shared_block_fields(cfg, "zamba2")
    hybrid = cfg.hybrid_override_pattern.count("Z")
    if cfg.untie_embeddings_and_output_weights and cfg.num_shared_blocks < hybrid:
        raise RegistryError(f"zamba2 ties its shared blocks only with tied embeddings: with --untie-embeddings-"
                            f"and-output-weights use --num-shared-blocks {hybrid} (one per 'Z' layer)")
    if cfg.shared_block_attention_adapters and cfg.num_query_groups != heads:
        raise RegistryError("zamba2's attention adapters need as many KV heads as query heads")
    out: Dict[str, Any] = dict(
        block, num_mem_blocks=cfg.num_shared_blocks,
        adapter_rank=cfg.shared_block_adapter_rank, use_shared_attention_adapter=cfg.shared_block_attention_adapters,
        use_mem_rope=cfg.position_embedding_type == "rope")
    if out["use_mem_rope"]:
        if cfg.rotary_percent != 1.0:
            raise RegistryError("zamba2 rotates the whole head: drop --rotary-percent")
        out.update(_rope_to_hf(cfg))
    elif cfg.position_embedding_type != "none":
        raise RegistryError("zamba2's attention has RoPE or no positions: use --position-embedding-type rope|none")
    return out


def _shared_block_fields(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    """The HF fields of a shared block both Zambas spell alike (its MLP, heads and activation); refuses what
    neither block has."""
    if cfg.activation not in ("geglu", "swiglu", "geglu_tanh"):
        raise RegistryError(f"{family}'s shared MLP is gated (geglu or swiglu), not {cfg.activation}")
    require_config(cfg, family, add_qkv_bias=False, add_dense_bias=False, qk_norm="none", sliding_window=None,
                   softmax_type="vanilla", post_norm=False, post_norm_only=False)
    hidden_act = {value: key for key, value in GATED_ACTIVATIONS.items() if key not in ("swish", "gelu_new")}
    return dict(intermediate_size=cfg.ffn_hidden_size, num_attention_heads=cfg.num_attention_heads,
                num_key_value_heads=cfg.num_query_groups, hidden_act=hidden_act[cfg.activation])


# --------------------------------------------------------------------------- weight maps


def _hybrid_layers(cfg: TransformerConfig) -> List[int]:
    return [i for i, letter in enumerate(cfg.hybrid_override_pattern or "") if letter == "Z"]


# our mixer tensor, its HF name under ``mamba.``, the transform: Zamba2's Mamba2 (the names of ours) and Zamba's
# multi-head Mamba1 (HF keeps a tensor per head, ``[heads, ...]``, and ``in_proj``'s x and gate rows interleaved)
ZAMBA2_MIXER = tuple((name, name, "copy") for name in MIXER_TENSORS)
ZAMBA_MIXER = (("in_proj.weight", "in_proj.weight", "zamba_in_proj"), ("conv1d.weight", "conv1d.weight", "copy"),
               ("conv1d.bias", "conv1d.bias", "copy"), ("x_proj.weight", "x_proj_weight", "zamba_heads"),
               ("dt_proj.weight", "dt_proj_weight", "zamba_heads"), ("dt_proj.bias", "dt_proj_bias", "zamba_heads"),
               ("A_log", "A_log", "zamba_heads"), ("D", "D", "zamba_heads"),
               ("out_proj.weight", "out_proj.weight", "copy"))


def _layer_rules(layer: int, letter: str, mixer: Tuple[Tuple[str, str, str], ...]) -> Tuple[WeightRule, ...]:
    """The rules of our layer ``layer`` (its norm and Mamba mixer, by the ``mixer`` table; a 'Z' layer's own
    projection)."""
    ours, hf = f"decoder.layers.{layer}.", f"model.layers.{layer}."
    mamba = hf + ("mamba_decoder." if letter == "Z" else "")
    rules = [WeightRule(ours + "norm.weight", (mamba + "input_layernorm.weight",)),
             *(WeightRule(ours + f"mixer.{name}", (mamba + f"mamba.{theirs}",), transform)
               for name, theirs, transform in mixer)]
    if letter == "Z":
        rules.append(WeightRule(ours + "adapters.proj.weight", (hf + "linear.weight",)))
    return tuple(rules)


def _adapter_rules(layer: int, depth: int, source: int) -> Tuple[WeightRule, ...]:
    """A 'Z' layer's adapters, saved inside its block under the block's first hybrid layer ``source``."""
    ours, hf = f"decoder.layers.{layer}.adapters.", f"model.layers.{source}.shared_transformer."
    names = [("mlp_adapter", f"feed_forward.gate_up_proj_adapter_list.{depth}")]
    names += [(f"{p}_adapter", f"self_attn.linear_{p}_adapter_list.{depth}") for p in "qkv"]
    return tuple(WeightRule(ours + f"{name}.{part}.weight", (hf + f"{theirs}.{index}.weight",))
                 for name, theirs in names for part, index in (("down", 0), ("up", 1)))


def _block_rules(block: int, source: int, module: str = "shared_transformer",
                 mlp_fc1: Tuple[str, ...] = ("gate_up_proj",)) -> Tuple[WeightRule, ...]:
    """Shared block ``block``, saved under hybrid layer ``source``'s ``module`` (Zamba2's ``shared_transformer``,
    Zamba's ``shared_transf``); ``mlp_fc1``: the MLP's input projection(s), fused in order when several."""
    ours, hf = f"decoder.shared_blocks.{block}.", f"model.layers.{source}.{module}."
    fc1 = tuple(hf + f"feed_forward.{name}.weight" for name in mlp_fc1)
    return (WeightRule(ours + "input_layernorm.weight", (hf + "input_layernorm.weight",)),
            WeightRule(ours + "self_attention.linear_qkv.weight",
                       tuple(hf + f"self_attn.{p}_proj.weight" for p in "qkv"), "fuse_rows"),
            WeightRule(ours + "self_attention.linear_proj.weight", (hf + "self_attn.o_proj.weight",)),
            WeightRule(ours + "pre_mlp_layernorm.weight", (hf + "pre_ff_layernorm.weight",)),
            WeightRule(ours + "mlp.linear_fc1.weight", fc1, "fuse_rows" if len(fc1) > 1 else "copy"),
            WeightRule(ours + "mlp.linear_fc2.weight", (hf + "feed_forward.down_proj.weight",)))


ENDS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    WeightRule("decoder.final_layernorm.weight", ("model.final_layernorm.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"))


def _zamba2_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Concrete rules for this model's layers: each 'Z' layer's adapters and each block live under the
    block's first hybrid layer."""
    pattern = cfg.hybrid_override_pattern or ""
    hybrid = _hybrid_layers(cfg)
    blocks = cfg.num_shared_blocks if hybrid else 0
    rules = [rule for i, letter in enumerate(pattern) for rule in _layer_rules(i, letter, ZAMBA2_MIXER)]
    rules += [rule for depth, layer in enumerate(hybrid)
              for rule in _adapter_rules(layer, depth, hybrid[depth % blocks])]
    rules += [rule for k in range(min(blocks, len(hybrid))) for rule in _block_rules(k, hybrid[k])]
    return tuple(rules) + ENDS


def _unused_adapter_prefixes(hf: Dict[str, Any]) -> Tuple[str, ...]:
    """Untied configs (one block copy per hybrid layer): each copy also holds the adapters of the other depths
    that share its ``block_id``, which no layer runs; the converter leaves them out with a note."""
    blocks = hf.get("layers_block_type") or hf.get("layer_types") or []
    if hf.get("tie_word_embeddings", True):
        return ()
    hybrid = [i for i, block in enumerate(blocks) if block == "hybrid"]
    slots = int(hf.get("num_mem_blocks", 1))
    lists = ["feed_forward.gate_up_proj_adapter_list"] + [f"self_attn.linear_{p}_adapter_list" for p in "qkv"]
    return tuple(f"model.layers.{layer}.shared_transformer.{name}.{other}."
                 for depth, layer in enumerate(hybrid) for other in range(len(hybrid))
                 if other != depth and other % slots == depth % slots for name in lists)


ZAMBA2 = register(Family("zamba2", "zamba2", "Zamba2ForCausalLM", _zamba2_config,
                         _checked("zamba2", _zamba2_config, _zamba2_hf_config), ENDS, preserved_keys=PRESERVED,
                         weights_for=_zamba2_weights, unloaded_hf_prefixes_for=_unused_adapter_prefixes), "zamba-2")

# --------------------------------------------------------------------------- Zamba (v1)


def _zamba_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Zamba v1: Mamba1 layers of ``n_mamba_heads`` independent SSMs, one shared block (no adapters, no positions,
    a GeGLU MLP of separate gate and up projections)."""
    _refuse("zamba", hf, mamba_proj_bias=False, hidden_mamba_act="silu")
    pattern, hidden = _pattern(hf, "zamba"), int(hf["hidden_size"])
    heads = int(hf.get("num_attention_heads", 16))
    attention_width = int(hf.get("attention_hidden_size") or 2 * hidden)
    if attention_width != 2 * hidden:
        raise RegistryError(f"zamba attention_hidden_size={attention_width} is not supported (the shared block "
                            f"reads [hidden; embeddings], 2 x hidden_size = {2 * hidden})")
    head_dim = int(hf.get("attention_head_dim") or 2 * hidden // heads)
    mamba_heads, expand = int(hf.get("n_mamba_heads", 2)), int(hf.get("mamba_expand", 2))
    if expand * hidden % mamba_heads:
        raise RegistryError(f"zamba mamba_expand x hidden_size = {expand * hidden} is not a multiple of "
                            f"n_mamba_heads={mamba_heads}")
    dt_rank = hf.get("mamba_dt_rank", "auto")
    kwargs: Dict[str, Any] = dict(
        num_layers=len(pattern), hybrid_override_pattern=pattern, hidden_size=hidden,
        ffn_hidden_size=int(hf.get("intermediate_size") or 4 * hidden), num_attention_heads=heads,
        num_query_groups=int(hf.get("num_key_value_heads") or heads), kv_channels=head_dim,
        query_pre_attn_scalar=head_dim / 2, position_embedding_type="none",
        vocab_size=int(hf["vocab_size"]), max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        normalization="RMSNorm", norm_epsilon=float(hf.get("rms_norm_eps", 1e-5)), add_bias_linear=False,
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", True),
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)),
        make_vocab_size_divisible_by=1, **_gated_activation({**hf, "hidden_act": hf.get("hidden_act") or "gelu"}),
        mamba_version=1, mamba_state_dim=int(hf.get("mamba_d_state", 16)), mamba_expand=expand,
        mamba_d_conv=int(hf.get("mamba_d_conv", 4)), mamba_conv_bias=bool(hf.get("mamba_conv_bias", True)),
        mamba_dt_rank=math.ceil(hidden / 16) if dt_rank in ("auto", None) else int(dt_rank))
    if mamba_heads > 1:  # independent SSMs; one is the plain Mamba1 over every channel
        kwargs.update(mamba_heads=mamba_heads, mamba_head_dim=expand * hidden // mamba_heads)
    if "Z" in pattern:
        kwargs["num_shared_blocks"] = _blocks({**hf, "num_mem_blocks": 1}, pattern)
    else:  # an all-Mamba stack: no attention or MLP field applies
        for key in ("ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
                    "query_pre_attn_scalar", "attention_dropout", "activation", "add_bias_linear",
                    "position_embedding_type"):
            kwargs.pop(key, None)
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _zamba_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    pattern = cfg.hybrid_override_pattern
    if pattern is None or set(pattern) - set(LETTER_BLOCKS):
        raise RegistryError("zamba needs --hybrid-override-pattern of M and Z letters")
    require_config(cfg, "zamba", normalization="RMSNorm", mamba_version=1, mamba_dt_limit_min=0.0,
                   mamba_dt_limit_max=None, mamba_mixer_rms_eps=None, apply_layernorm_1p=False,
                   fp32_residual_connection=False, add_bias_linear=False)
    if cfg.mamba_expand * cfg.hidden_size != cfg.mamba_d_inner:
        raise RegistryError("zamba's Mamba width is mamba_expand x hidden_size: --mamba-num-heads x "
                            "--mamba-head-dim must equal it")
    out: Dict[str, Any] = dict(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        layers_block_type=[LETTER_BLOCKS[letter] for letter in pattern],
        max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.norm_epsilon,
        tie_word_embeddings=not cfg.untie_embeddings_and_output_weights, initializer_range=cfg.init_method_std,
        n_mamba_heads=cfg.mamba1_heads, mamba_d_state=cfg.mamba_state_dim, mamba_d_conv=cfg.mamba_d_conv,
        mamba_expand=cfg.mamba_expand, mamba_dt_rank=cfg.mamba_dt_rank_or_default,
        mamba_conv_bias=cfg.mamba_conv_bias, mamba_proj_bias=False, hidden_mamba_act="silu",
        attention_hidden_size=2 * cfg.hidden_size, attention_dropout=0.0, use_cache=True,
        torch_dtype=str(cfg.params_dtype).replace("torch.", ""))
    if cfg.has_shared_blocks:
        out.update(_zamba_block_hf_config(cfg))
    return out


def _zamba_block_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.query_pre_attn_scalar != cfg.kv_channels / 2:
        raise RegistryError("zamba's shared attention scales by (head_dim / 2) ** -0.5: --query-pre-attn-scalar "
                            "kv_channels / 2")
    if cfg.shared_block_adapter_rank is not None or cfg.shared_block_attention_adapters:
        raise RegistryError("zamba's shared block has no adapters (that is zamba2): drop --shared-block-adapter-rank "
                            "and --shared-block-attention-adapters")
    block = _shared_block_fields(cfg, "zamba")
    if cfg.position_embedding_type != "none":
        raise RegistryError("zamba's attention has no positions: use --position-embedding-type none")
    hybrid = cfg.hybrid_override_pattern.count("Z")
    blocks = 1 if not cfg.untie_embeddings_and_output_weights else hybrid
    if cfg.num_shared_blocks != blocks:
        raise RegistryError(f"zamba shares one block over its 'Z' layers (one per 'Z' layer with untied "
                            f"embeddings, as transformers ties them): use --num-shared-blocks {blocks}")
    return dict(block, attention_head_dim=cfg.kv_channels)


def _zamba_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Concrete rules: each block lives under its first hybrid layer (all of them under the first when tied)."""
    pattern = cfg.hybrid_override_pattern or ""
    hybrid = _hybrid_layers(cfg)
    blocks = min(cfg.num_shared_blocks, len(hybrid)) if hybrid else 0
    rules = [rule for i, letter in enumerate(pattern) for rule in _layer_rules(i, letter, ZAMBA_MIXER)]
    rules += [rule for k in range(blocks) for rule in _block_rules(k, hybrid[k], "shared_transf",
                                                                  ("gate_proj", "up_proj"))]
    return tuple(rules) + ENDS


def _in_proj_to_ours(tensors: List[torch.Tensor], ctx: Any) -> torch.Tensor:
    """HF's ``in_proj`` rows ``x_0, z_0, x_1, z_1, ...`` -> ours ``[x; z]``."""
    return torch.cat([tensors[0][0::2], tensors[0][1::2]])


def _in_proj_to_hf(tensor: torch.Tensor, ctx: Any) -> List[torch.Tensor]:
    x, z = tensor.chunk(2)
    return [torch.stack([x, z], dim=1).flatten(0, 1).contiguous()]  # [2 d, h]: x_0, z_0, x_1, z_1, ...


def _heads_to_ours(tensors: List[torch.Tensor], ctx: Any) -> torch.Tensor:
    """A per-head tensor ``[heads, a, ...]`` -> ours ``[heads a, ...]``."""
    return tensors[0].flatten(0, 1)


def _heads_to_hf(tensor: torch.Tensor, ctx: Any) -> List[torch.Tensor]:
    return [tensor.unflatten(0, (ctx.config.mamba1_heads, -1)).contiguous()]


TRANSFORMS.setdefault("zamba_in_proj", (_in_proj_to_ours, _in_proj_to_hf))
TRANSFORMS.setdefault("zamba_heads", (_heads_to_ours, _heads_to_hf))

ZAMBA = register(Family("zamba", "zamba", "ZambaForCausalLM", _zamba_config,
                        _checked("zamba", _zamba_config, _zamba_hf_config), ENDS,
                        preserved_keys=PRESERVED_V1, weights_for=_zamba_weights), "zamba")

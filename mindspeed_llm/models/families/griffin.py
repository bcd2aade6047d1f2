"""Griffin (RecurrentGemma, ``recurrent_gemma``) as registry data: Griffin's recurrent blocks beside local attention,
every layer with its gated MLP.

HF's ``block_types`` (the published config.json spells it ``_block_types``; cycled over the layers;
``recurrent`` / ``attention``) become
``--experimental-attention-variant rg_lru`` with ``--linear-attention-freq`` marks (1 a recurrent block, 0
attention); the attention layers all slide (``attention_window_size``: ``--sliding-window``), are multi-query by
default, rotate half of each head (``partial_rotary_factor`` 0.5) and have a bias on the output projection only.
The norms are Gemma's ``x (1 + w)`` (``--apply-layernorm-1p``); the MLP is a gated GELU (tanh) of
``intermediate_size / 2`` with biases; the embeddings are scaled by ``sqrt(hidden)`` rounded to bf16, as
transformers' ``normalizer`` buffer is (``--embedding-multiplier``), and the logits capped by ``tanh``
(``logits_soft_cap``: ``--output-logit-softcapping``). Embeddings are tied by default.

    ours (decoder.layers.{i}.*)                          HF (model.layers.{i}.*)
    input_layernorm / pre_mlp_layernorm                  temporal_pre_norm / channel_pre_norm
    self_attention.{linear_y, linear_x, conv_1d, rg_lru.*, linear_out}    temporal_block.<same>  (recurrent)
    self_attention.linear_qkv / linear_proj              temporal_block.[q_proj; k_proj; v_proj] / o_proj
    mlp.linear_fc1 / linear_fc2                          mlp_block.[gate_proj; up_proj] / down_proj (with biases)

Refused in one line: a ``block_types`` entry other than the two and a non-default RoPE.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

from core.transformer.config import RG_LRU_MIXER, TransformerConfig, parse_layer_frequency
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, _common_config,
                                           _common_hf_config, _layer, register, require_config)

BLOCK_MARKS = {"recurrent": 1, "attention": 0}
DEFAULT_BLOCK_TYPES = ("recurrent", "recurrent", "attention")  # RecurrentGemmaConfig's
RG_LRU_TENSORS = ("linear_y.weight", "linear_y.bias", "linear_x.weight", "linear_x.bias", "conv_1d.weight",
                  "conv_1d.bias", "rg_lru.recurrent_param", "rg_lru.input_gate_weight", "rg_lru.input_gate_bias",
                  "rg_lru.recurrent_gate_weight", "rg_lru.recurrent_gate_bias", "linear_out.weight",
                  "linear_out.bias")


def embedding_scale(hidden: int) -> float:
    """``sqrt(hidden)`` as transformers' bf16 ``normalizer`` buffer holds it."""
    return float(torch.tensor(hidden ** 0.5, dtype=torch.bfloat16))


def _marks(hf: Dict[str, Any], layers: int) -> List[int]:
    types = list(hf.get("block_types") or hf.get("_block_types") or DEFAULT_BLOCK_TYPES)  # the Hub file's spelling
    unknown = sorted(set(types) - set(BLOCK_MARKS))
    if unknown or not types:
        raise RegistryError(f"recurrent_gemma block_types {unknown or types} are not supported ({sorted(BLOCK_MARKS)})")
    return [BLOCK_MARKS[kind] for kind in (types * layers)[:layers]]


def _block_types(marks: List[int]) -> List[str]:
    """The shortest ``block_types`` whose cycle gives ``marks``."""
    kinds = ["recurrent" if mark else "attention" for mark in marks]
    for period in range(1, len(kinds) + 1):
        if (kinds[:period] * len(kinds))[:len(kinds)] == kinds:
            return kinds[:period]
    return kinds


def _recurrent_gemma_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
          "partial_rotary_factor": 0.5, "attention_window_size": 2048, "logits_soft_cap": 30.0, **hf}
    rope = hf.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default":
        raise RegistryError(f"recurrent_gemma rope_type {rope['rope_type']!r} is not supported (only 'default')")
    layers, hidden, heads = int(hf["num_hidden_layers"]), int(hf["hidden_size"]), int(hf["num_attention_heads"])
    marks = _marks(hf, layers)
    kwargs = _common_config({**hf, "intermediate_size": int(hf["intermediate_size"]) // 2, "head_dim": hidden // heads,
                             "max_position_embeddings": hf.get("max_position_embeddings", 8192)})
    kwargs.update(apply_layernorm_1p=True, add_qkv_bias=bool(hf.get("attention_bias", False)), add_dense_bias=True,
                  add_mlp_bias=True, sliding_window=int(hf["attention_window_size"]),
                  embedding_multiplier=embedding_scale(hidden),
                  output_logit_softcapping=float(hf["logits_soft_cap"]) if hf["logits_soft_cap"] else None)
    if any(marks):
        kwargs.update(experimental_attention_variant="rg_lru", linear_attention_freq=str(marks).replace(" ", ""),
                      lru_width=int(hf.get("lru_width") or hidden), lru_conv_width=int(hf.get("conv1d_width", 4)))
    return kwargs


def _recurrent_gemma_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.hybrid_override_pattern is not None or cfg.layer_mixers - {RG_LRU_MIXER, "attention"}:
        raise RegistryError("recurrent_gemma has Griffin's recurrent blocks and attention only "
                            "(--experimental-attention-variant rg_lru with --linear-attention-freq)")
    require_config(cfg, "recurrent_gemma", normalization="RMSNorm", activation="geglu_tanh", apply_layernorm_1p=True,
                   add_bias_linear=False, add_dense_bias=True, add_mlp_bias=True, qk_norm="none",
                   kv_channels=cfg.hidden_size // cfg.num_attention_heads, embedding_multiplier=embedding_scale(
                       cfg.hidden_size), full_attention_layers=(), post_norm=False, post_norm_only=False,
                   rope_scaling_type=None)
    marks = parse_layer_frequency(cfg.linear_attention_freq, cfg.num_layers, "--linear-attention-freq") \
        if cfg.linear_attention_freq is not None else [0] * cfg.num_layers
    out = {key: value for key, value in _common_hf_config(cfg).items() if key not in ("head_dim", "hidden_act")}
    return {**out, "intermediate_size": 2 * cfg.ffn_hidden_size, "hidden_activation": "gelu_pytorch_tanh",
            "block_types": _block_types(marks), "attention_window_size": cfg.sliding_window,
            "attention_bias": cfg.add_qkv_bias, "lru_width": cfg.lru_width_or_default,
            "conv1d_width": cfg.lru_conv_width, "logits_soft_cap": cfg.output_logit_softcapping or 0.0,
            "partial_rotary_factor": cfg.rotary_percent}


def _fused(ours: str, hf: List[str]) -> WeightRule:
    return _layer(ours, hf, "fuse_rows")


RECURRENT_GEMMA_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    _layer("input_layernorm.weight", ["temporal_pre_norm.weight"]),
    _layer("pre_mlp_layernorm.weight", ["channel_pre_norm.weight"]),
    *(_layer(f"self_attention.{name}", [f"temporal_block.{name}"]) for name in RG_LRU_TENSORS),
    *(_fused(f"self_attention.linear_qkv.{kind}", [f"temporal_block.{p}_proj.{kind}" for p in "qkv"])
      for kind in ("weight", "bias")),
    *(_layer(f"self_attention.linear_proj.{kind}", [f"temporal_block.o_proj.{kind}"]) for kind in ("weight", "bias")),
    *(_fused(f"mlp.linear_fc1.{kind}", [f"mlp_block.gate_proj.{kind}", f"mlp_block.up_proj.{kind}"])
      for kind in ("weight", "bias")),
    *(_layer(f"mlp.linear_fc2.{kind}", [f"mlp_block.down_proj.{kind}"]) for kind in ("weight", "bias")),
    WeightRule("decoder.final_layernorm.weight", ("model.final_norm.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)

RECURRENT_GEMMA = register(Family("recurrent_gemma", "recurrent_gemma", "RecurrentGemmaForCausalLM",
                                  _recurrent_gemma_config,
                                  _checked("recurrent_gemma", _recurrent_gemma_config, _recurrent_gemma_hf_config),
                                  RECURRENT_GEMMA_WEIGHTS,
                                  preserved_keys=("w_init_variance_scale", "embeddings_scale_by_sqrt_dim")),
                           "recurrent-gemma", "recurrentgemma")

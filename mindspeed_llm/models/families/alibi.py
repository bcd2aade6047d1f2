"""ALiBi families: Bloom and MPT, whose attention adds a per-head linear bias instead of rotating q/k.

* Bloom: ALiBi (``--position-embedding-type alibi``), a LayerNorm on the word
  embeddings (``--embed-layernorm``), the per-head interleaved fused
  ``query_key_value`` (``qkv_interleaved``), LayerNorms and linears with
  biases, Bloom's tanh GELU (``--gelu-tanh``; its constant 0.79788456 is
  sqrt(2 / pi) to 1e-9), tied embeddings, a 4 x hidden MLP.
* MPT: ALiBi, LayerNorms without bias (``--no-layernorm-bias``), no linear
  biases, fused ``Wqkv`` in our ``[Q; K; V]`` row order, exact GELU,
  ``clip_qkv`` (``--qkv-clip``), ``softmax_scale`` (``--softmax-scale``).
  transformers' MptModel always uses ALiBi with ``alibi_bias_max`` 8, no
  biases and a 4 x hidden MLP, whatever the config says; configs asking for
  anything else are refused (they would not load as written).
Each ``to_hf_config`` checks that mapping its result back gives the
architecture of the model being exported (``registry._checked``), so a model whose
flags the HF family cannot express is refused with the fields named.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, WeightRule, _checked_family, register


def _prefixed(prefix: str, rules: Sequence[Tuple[str, str, str]]) -> Tuple[WeightRule, ...]:
    """Layer rules ``(ours, HF suffix, transform)`` under ``decoder.layers.{i}.`` and ``prefix``."""
    return tuple(WeightRule("decoder.layers.{i}." + ours, (prefix + hf,), transform) for ours, hf, transform in rules)


# --------------------------------------------------------------------------- Bloom

BLOOM_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("transformer.word_embeddings.weight",), "vocab"),
    WeightRule("embedding.embedding_layernorm.weight", ("transformer.word_embeddings_layernorm.weight",)),
    WeightRule("embedding.embedding_layernorm.bias", ("transformer.word_embeddings_layernorm.bias",)),
    *_prefixed("transformer.h.{i}.", [
        ("input_layernorm.weight", "input_layernorm.weight", "copy"),
        ("input_layernorm.bias", "input_layernorm.bias", "copy"),
        ("self_attention.linear_qkv.weight", "self_attention.query_key_value.weight", "qkv_interleaved"),
        ("self_attention.linear_qkv.bias", "self_attention.query_key_value.bias", "qkv_interleaved"),
        ("self_attention.linear_proj.weight", "self_attention.dense.weight", "copy"),
        ("self_attention.linear_proj.bias", "self_attention.dense.bias", "copy"),
        ("pre_mlp_layernorm.weight", "post_attention_layernorm.weight", "copy"),
        ("pre_mlp_layernorm.bias", "post_attention_layernorm.bias", "copy"),
        ("mlp.linear_fc1.weight", "mlp.dense_h_to_4h.weight", "copy"),
        ("mlp.linear_fc1.bias", "mlp.dense_h_to_4h.bias", "copy"),
        ("mlp.linear_fc2.weight", "mlp.dense_4h_to_h.weight", "copy"),
        ("mlp.linear_fc2.bias", "mlp.dense_4h_to_h.bias", "copy"),
    ]),
    WeightRule("decoder.final_layernorm.weight", ("transformer.ln_f.weight",)),
    WeightRule("decoder.final_layernorm.bias", ("transformer.ln_f.bias",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)


def _alibi_model(hidden: int, heads: int, layers: int, vocab: int, max_positions: int) -> Dict[str, Any]:
    """The fields Bloom and MPT share: multi-head attention, a 4 x hidden GELU MLP, ALiBi, LayerNorm."""
    return dict(num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_query_groups=heads,
                kv_channels=hidden // heads, ffn_hidden_size=4 * hidden, vocab_size=vocab,
                max_position_embeddings=max_positions, normalization="LayerNorm", position_embedding_type="alibi",
                alibi_bias_max=8.0, activation="gelu", attention_dropout=0.0, hidden_dropout=0.0,
                make_vocab_size_divisible_by=1)


def _bloom_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Bloom: ALiBi, an embedding LayerNorm, biases everywhere, tanh GELU, tied."""
    if hf.get("apply_residual_connection_post_layernorm", False):
        raise RegistryError("bloom apply_residual_connection_post_layernorm=True is not supported")
    hidden = int(hf.get("hidden_size") or hf["n_embed"])
    heads = int(hf.get("n_head") or hf["num_attention_heads"])
    layers = int(hf.get("n_layer") or hf["num_hidden_layers"])
    return {**_alibi_model(hidden, heads, layers, int(hf["vocab_size"]), int(hf.get("seq_length", 2048))),
            "norm_epsilon": float(hf.get("layer_norm_epsilon", 1e-5)), "add_bias_linear": True,
            "activation": "gelu_tanh", "embed_layernorm": True,
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True),
            "init_method_std": float(hf.get("initializer_range", 0.02))}


def _bloom_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {"hidden_size": cfg.hidden_size, "n_head": cfg.num_attention_heads, "n_layer": cfg.num_layers,
            "vocab_size": cfg.vocab_size, "seq_length": cfg.max_position_embeddings,
            "layer_norm_epsilon": cfg.norm_epsilon, "apply_residual_connection_post_layernorm": False,
            "tie_word_embeddings": not cfg.untie_embeddings_and_output_weights, "hidden_dropout": 0.0,
            "attention_dropout": 0.0, "pretraining_tp": 1, "slow_but_exact": False,
            "initializer_range": cfg.init_method_std, "use_cache": True,
            "torch_dtype": str(cfg.params_dtype).replace("torch.", "")}


# --------------------------------------------------------------------------- MPT

MPT_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("transformer.wte.weight",), "vocab"),
    *_prefixed("transformer.blocks.{i}.", [
        ("input_layernorm.weight", "norm_1.weight", "copy"),
        ("self_attention.linear_qkv.weight", "attn.Wqkv.weight", "copy"),  # rows [q; k; v], as ours
        ("self_attention.linear_proj.weight", "attn.out_proj.weight", "copy"),
        ("pre_mlp_layernorm.weight", "norm_2.weight", "copy"),
        ("mlp.linear_fc1.weight", "ffn.up_proj.weight", "copy"),
        ("mlp.linear_fc2.weight", "ffn.down_proj.weight", "copy"),
    ]),
    WeightRule("decoder.final_layernorm.weight", ("transformer.norm_f.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)

# attn_config key -> the only value transformers' MptModel computes with (it ignores the key otherwise)
MPT_FIXED_ATTENTION = {"attn_type": "multihead_attention", "prefix_lm": False, "qk_ln": False,
                       "attn_uses_sequence_id": False, "alibi": True, "alibi_bias_max": 8,
                       # llm-foundry's later keys, which transformers' MptModel does not know
                       "rope": False, "qk_gn": False, "sliding_window_size": -1, "attn_logit_softcapping": None}
MPT_FIXED = {"no_bias": True, "expansion_ratio": 4, "logit_scale": None, "embedding_fraction": 1.0}
MPT_NORM_TYPES = ("low_precision_layernorm", "layernorm")


def _mpt_attention_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    attn = hf.get("attn_config") or {}
    if not isinstance(attn, dict):
        attn = attn.to_dict()
    for key, value in MPT_FIXED_ATTENTION.items():
        if key in attn and attn[key] != value:
            raise RegistryError(f"mpt attn_config.{key}={attn[key]!r} is not supported (transformers' MptModel "
                                f"computes with {value!r})")
    return attn


def _mpt_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """MPT: ALiBi, LayerNorm without bias, no linear biases, exact GELU, optional q/k/v clip and softmax scale."""
    for key, value in MPT_FIXED.items():
        if key in hf and hf[key] != value:
            raise RegistryError(f"mpt {key}={hf[key]!r} is not supported (transformers' MptModel computes with "
                                f"{value!r})")
    ffn_type = (hf.get("ffn_config") or {}).get("ffn_type", "mptmlp")
    if ffn_type != "mptmlp":
        raise RegistryError(f"mpt ffn_config.ffn_type={ffn_type!r} is not supported (transformers' MptModel "
                            "computes with 'mptmlp')")
    if hf.get("norm_type", MPT_NORM_TYPES[0]) not in MPT_NORM_TYPES:
        raise RegistryError(f"mpt norm_type={hf['norm_type']!r} is not supported (supported: {MPT_NORM_TYPES})")
    attn = _mpt_attention_config(hf)
    hidden = int(hf.get("d_model") or hf["hidden_size"])
    heads = int(hf.get("n_heads") or hf["num_attention_heads"])
    layers = int(hf.get("n_layers") or hf["num_hidden_layers"])
    clip, scale = attn.get("clip_qkv"), attn.get("softmax_scale")
    return {**_alibi_model(hidden, heads, layers, int(hf["vocab_size"]), int(hf.get("max_seq_len", 2048))),
            "norm_epsilon": float(hf.get("layer_norm_epsilon", 1e-5)), "layernorm_bias": False,
            "add_bias_linear": False, "qkv_clip": float(clip) if clip else None,
            "softmax_scale": float(scale) if scale is not None else None,
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True),
            "init_method_std": float(hf.get("initializer_range", 0.02))}


def _mpt_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    attn = {"attn_type": "multihead_attention", "attn_pdrop": 0, "attn_impl": "torch", "clip_qkv": cfg.qkv_clip,
            "softmax_scale": cfg.softmax_scale, "prefix_lm": False, "qk_ln": False, "attn_uses_sequence_id": False,
            "alibi": True, "alibi_bias_max": 8,  # transformers ignores any other value
            "dtype": str(cfg.params_dtype).replace("torch.", "")}  # as transformers saves the nested config
    return {"d_model": cfg.hidden_size, "n_heads": cfg.num_attention_heads, "n_layers": cfg.num_layers,
            "expansion_ratio": 4, "max_seq_len": cfg.max_position_embeddings, "vocab_size": cfg.vocab_size,
            "layer_norm_epsilon": cfg.norm_epsilon, "no_bias": True, "attn_config": attn,
            "logit_scale": None, "embedding_fraction": 1.0, "norm_type": "low_precision_layernorm",
            "resid_pdrop": 0.0, "emb_pdrop": 0.0, "tie_word_embeddings": not cfg.untie_embeddings_and_output_weights,
            "initializer_range": cfg.init_method_std, "use_cache": False,
            "torch_dtype": str(cfg.params_dtype).replace("torch.", "")}


BLOOM = register(_checked_family("bloom", "bloom", "BloomForCausalLM", _bloom_config, _bloom_hf_config, BLOOM_WEIGHTS))
MPT = register(_checked_family("mpt", "mpt", "MptForCausalLM", _mpt_config, _mpt_hf_config, MPT_WEIGHTS))

__all__: List[str] = ["BLOOM", "MPT"]

"""RWKV-4 (transformers' ``rwkv``) as registry data: each HF block is our two pattern letters, time mixing (``W``)
then channel mixing (``C``), each with its LayerNorm and residual (:mod:`core.transformer.rwkv`).

    ours                                                HF
    embedding.embedding_layernorm                       rwkv.blocks.0.pre_ln    (--embed-layernorm)
    decoder.layers.{2j}.input_layernorm                 rwkv.blocks.{j}.ln1
    decoder.layers.{2j}.self_attention.<name>           rwkv.blocks.{j}.attention.<name>
    decoder.layers.{2j+1}.input_layernorm               rwkv.blocks.{j}.ln2
    decoder.layers.{2j+1}.self_attention.<name>         rwkv.blocks.{j}.feed_forward.<name>
    decoder.final_layernorm / output_layer              rwkv.ln_out / head

No positions (the token shift and the decay order the tokens), LayerNorm with biases, ``intermediate_size``
(default 4 x hidden) the channel mixing's width, ``attention_hidden_size`` (default hidden) the time mixing's.
``rescale_every`` is transformers' inference-time halving of the hidden state every few blocks in fp16 (weights
divided to match): the same model up to LayerNorm's eps, kept in the config for the way back.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from core.transformer.config import RWKV_CHANNEL_MIX, RWKV_TIME_MIX, TransformerConfig
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, register, require_config)

TIME_MIX_TENSORS = ("time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance",
                    "key.weight", "value.weight", "receptance.weight", "output.weight")
CHANNEL_MIX_TENSORS = ("time_mix_key", "time_mix_receptance", "key.weight", "value.weight", "receptance.weight")


def _rwkv_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hidden, layers = int(hf["hidden_size"]), int(hf["num_hidden_layers"])
    if hf.get("tie_word_embeddings", False):
        raise RegistryError("rwkv tie_word_embeddings=True is not supported: RwkvForCausalLM's head is its own")
    size = hf.get("attention_hidden_size")
    return dict(num_layers=2 * layers, hidden_size=hidden, hybrid_override_pattern="WC" * layers,
                ffn_hidden_size=int(hf.get("intermediate_size") or 4 * hidden), num_attention_heads=1,
                vocab_size=int(hf["vocab_size"]), max_position_embeddings=int(hf.get("context_length", 1024)),
                normalization="LayerNorm", norm_epsilon=float(hf.get("layer_norm_epsilon", 1e-5)),
                position_embedding_type="none", embed_layernorm=True, add_bias_linear=False,
                untie_embeddings_and_output_weights=True, attention_dropout=0.0, hidden_dropout=0.0,
                init_method_std=float(hf.get("initializer_range", 0.02)), make_vocab_size_divisible_by=1,
                rwkv_attention_size=int(size) if size and int(size) != hidden else None)


def _rwkv_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    kinds = [cfg.layer_parts(i)[0] for i in range(cfg.num_layers)]
    if kinds != [RWKV_TIME_MIX, RWKV_CHANNEL_MIX] * (cfg.num_layers // 2) or cfg.num_layers % 2:
        raise RegistryError(f"rwkv needs --hybrid-override-pattern of 'WC' pairs (one HF block each); got "
                            f"{cfg.hybrid_override_pattern!r}")
    require_config(cfg, "rwkv", normalization="LayerNorm", layernorm_bias=True, embed_layernorm=True,
                   untie_embeddings_and_output_weights=True, position_embedding_type="none")
    return dict(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers // 2, vocab_size=cfg.vocab_size,
                context_length=cfg.max_position_embeddings, attention_hidden_size=cfg.rwkv_attention_size_or_default,
                intermediate_size=cfg.ffn_hidden_size, layer_norm_epsilon=cfg.norm_epsilon,
                tie_word_embeddings=False, initializer_range=cfg.init_method_std, use_cache=True,
                torch_dtype=str(cfg.params_dtype).replace("torch.", ""))


def _half(ours: str, hf: str, offset: int) -> WeightRule:
    """Our layer ``2j + offset`` <- HF block ``j``."""
    return WeightRule("decoder.layers.{i}." + ours, ("rwkv.blocks.{i}." + hf,), layer_stride=2, layer_offset=offset)


RWKV_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("rwkv.embeddings.weight",), "vocab"),
    WeightRule("embedding.embedding_layernorm.weight", ("rwkv.blocks.0.pre_ln.weight",)),
    WeightRule("embedding.embedding_layernorm.bias", ("rwkv.blocks.0.pre_ln.bias",)),
    *(_half(f"input_layernorm.{kind}", f"ln1.{kind}", 0) for kind in ("weight", "bias")),
    *(_half(f"self_attention.{name}", f"attention.{name}", 0) for name in TIME_MIX_TENSORS),
    *(_half(f"input_layernorm.{kind}", f"ln2.{kind}", 1) for kind in ("weight", "bias")),
    *(_half(f"self_attention.{name}", f"feed_forward.{name}", 1) for name in CHANNEL_MIX_TENSORS),
    WeightRule("decoder.final_layernorm.weight", ("rwkv.ln_out.weight",)),
    WeightRule("decoder.final_layernorm.bias", ("rwkv.ln_out.bias",)),
    WeightRule("output_layer.weight", ("head.weight",), "vocab"),
)

RWKV = register(Family("rwkv", "rwkv", "RwkvForCausalLM", _rwkv_config, _checked("rwkv", _rwkv_config, _rwkv_hf_config),
                       RWKV_WEIGHTS, preserved_keys=("rescale_every", "bos_token_id", "eos_token_id")), "rwkv4")

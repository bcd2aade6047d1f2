"""Dense multi-latent-attention families: MiniCPM3 (``minicpm3``) and Youtu (``youtu``).

Both are Llama layers (RMSNorm, SwiGLU MLP, tied embeddings by default) whose attention is DeepSeek's MLA
(``--multi-latent-attention``, ``core/transformer/mla.py``): ``q_lora_rank`` (null: a plain ``q_proj``),
``kv_lora_rank``, ``qk_nope_head_dim`` (our ``--qk-head-dim``), ``qk_rope_head_dim``
(``--qk-pos-emb-head-dim``) and ``v_head_dim``; ``attention_bias`` puts biases on the two down projections
(our ``--add-qkv-bias``) and on ``o_proj`` (``--add-dense-bias``). They differ in:

* MiniCPM3: half-rotation RoPE; the embeddings times ``scale_emb`` (``--embedding-multiplier``), each
  residual branch times ``scale_depth / sqrt(num_hidden_layers)`` (``--residual-multiplier``) and the final
  hidden state divided by ``hidden_size / dim_model_base`` before the output layer
  (``--output-multiplier-scale``). ``v_head_dim`` null means ``hidden_size / heads``. The published
  MiniCPM3-4B uses LongRoPE, which the registry refuses (RegistryError) until the decoder has it.
* Youtu: interleaved RoPE unless ``rope_interleave`` is false (``--rope-interleaved``), no multipliers.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    LLAMA_WEIGHTS, Family, RegistryError, WeightRule, _common_config, _common_hf_config, _layer, register)

_ATTENTION = "self_attention."
_LLAMA_ATTENTION = ("linear_qkv", "q_layernorm", "k_layernorm")  # Llama's q/k/v and Qwen3's q/k norms
# Llama's rules without its q/k/v, plus our MLA parameters -> the HF tensors of the layer
MLA_WEIGHTS: Tuple[WeightRule, ...] = tuple(
    rule for rule in LLAMA_WEIGHTS if not any(_ATTENTION + name in rule.ours for name in _LLAMA_ATTENTION)
) + tuple(_layer(_ATTENTION + ours, [f"self_attn.{hf}"]) for ours, hf in (
    ("linear_q_proj.weight", "q_proj.weight"),
    ("linear_q_down_proj.weight", "q_a_proj.weight"), ("linear_q_down_proj.bias", "q_a_proj.bias"),
    ("q_layernorm.weight", "q_a_layernorm.weight"), ("linear_q_up_proj.weight", "q_b_proj.weight"),
    ("linear_kv_down_proj.weight", "kv_a_proj_with_mqa.weight"),
    ("linear_kv_down_proj.bias", "kv_a_proj_with_mqa.bias"),
    ("kv_layernorm.weight", "kv_a_layernorm.weight"), ("linear_kv_up_proj.weight", "kv_b_proj.weight")))


HF_LATENT_NORM_EPS = 1e-6  # transformers' q_a_layernorm / kv_a_layernorm ignore rms_norm_eps


def _mla_config(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """The Llama fields plus MLA's ranks and head dims, and ``attention_bias`` on the down and o projections."""
    if int(hf.get("num_key_value_heads") or hf["num_attention_heads"]) != int(hf["num_attention_heads"]):
        raise RegistryError(f"{family} num_key_value_heads={hf['num_key_value_heads']} differs from the heads: "
                            "MLA gives every head its own key and value")
    if hf.get("mlp_bias", False):
        raise RegistryError(f"{family} mlp_bias=True is not supported")
    heads, hidden = int(hf["num_attention_heads"]), int(hf["hidden_size"])
    bias = bool(hf.get("attention_bias", False))
    q_lora_rank = hf.get("q_lora_rank")
    common = _common_config(hf)
    latent_eps = {} if common["norm_epsilon"] == HF_LATENT_NORM_EPS else {"mla_latent_norm_epsilon": HF_LATENT_NORM_EPS}
    return {**common, **latent_eps, "kv_channels": hidden // heads, "multi_latent_attention": True,
            "q_lora_rank": int(q_lora_rank) if q_lora_rank is not None else None,
            "kv_lora_rank": int(hf["kv_lora_rank"]), "qk_head_dim": int(hf["qk_nope_head_dim"]),
            "qk_pos_emb_head_dim": int(hf["qk_rope_head_dim"]),
            "v_head_dim": int(hf.get("v_head_dim") or hidden // heads),
            "add_qkv_bias": bias, "add_dense_bias": bias,
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}


def _mla_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    if not cfg.multi_latent_attention or cfg.add_bias_linear or cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError(f"{family} needs --multi-latent-attention with biases on the down and output "
                            "projections together (--add-qkv-bias with --add-dense-bias) or none")
    latent_eps = cfg.mla_latent_norm_epsilon if cfg.mla_latent_norm_epsilon is not None else cfg.norm_epsilon
    if latent_eps != HF_LATENT_NORM_EPS:
        raise RegistryError(f"{family} latent norms use eps {HF_LATENT_NORM_EPS}; set --mla-latent-norm-epsilon "
                            f"{HF_LATENT_NORM_EPS} (it is {latent_eps})")
    out = _common_hf_config(cfg)
    out.pop("head_dim")  # transformers sets it to qk_rope_head_dim
    return {**out, "q_lora_rank": cfg.q_lora_rank, "kv_lora_rank": cfg.kv_lora_rank,
            "qk_nope_head_dim": cfg.qk_head_dim, "qk_rope_head_dim": cfg.qk_pos_emb_head_dim,
            "v_head_dim": cfg.v_head_dim, "attention_bias": cfg.add_qkv_bias}


def _minicpm3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """MiniCPM3: MLA with half-rotation RoPE and MiniCPM's embedding, residual and logit scales."""
    layers, hidden = int(hf["num_hidden_layers"]), int(hf["hidden_size"])
    scale_depth = hf.get("scale_depth", 1.4)
    scale_depth = math.sqrt(layers) if scale_depth is None else float(scale_depth)
    base = hf.get("dim_model_base", 256)
    base = hidden if base is None else int(base)
    return {**_mla_config(hf, "minicpm3"), "embedding_multiplier": float(hf.get("scale_emb", 12)),
            "residual_multiplier": scale_depth / math.sqrt(layers), "output_multiplier_scale": base / hidden}


def _minicpm3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.rope_interleaved:
        raise RegistryError("minicpm3 rotates half-rotation RoPE pairs; drop --rope-interleaved")
    return {**_mla_hf_config(cfg, "minicpm3"), "mlp_bias": False, "scale_emb": cfg.embedding_multiplier or 1.0,
            "scale_depth": (cfg.residual_multiplier or 1.0) * math.sqrt(cfg.num_layers),
            "dim_model_base": round(cfg.hidden_size * (cfg.output_multiplier_scale or 1.0))}


def _youtu_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Youtu: MLA with interleaved RoPE unless ``rope_interleave`` is false."""
    return {**_mla_config(hf, "youtu"), "rope_interleaved": bool(hf.get("rope_interleave", True))}


def _youtu_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.embedding_multiplier or cfg.residual_multiplier or cfg.output_multiplier_scale:
        raise RegistryError("youtu has no embedding, residual or logit multipliers; use --model-type-hf minicpm3")
    return {**_mla_hf_config(cfg, "youtu"), "rope_interleave": cfg.rope_interleaved}


MINICPM3 = register(Family("minicpm3", "minicpm3", "MiniCPM3ForCausalLM", _minicpm3_config, _minicpm3_hf_config,
                           MLA_WEIGHTS))
YOUTU = register(Family("youtu", "youtu", "YoutuForCausalLM", _youtu_config, _youtu_hf_config, MLA_WEIGHTS))

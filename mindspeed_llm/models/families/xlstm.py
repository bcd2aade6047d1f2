"""xLSTM (transformers' ``xlstm``, NX-AI's xLSTM-7B) as registry data: every block an mLSTM layer
(:mod:`core.transformer.mlstm`) and a SwiGLU MLP, each behind an RMSNorm with a residual add, so one HF block is one
of our layers: ``--experimental-attention-variant mlstm`` with every layer marked by ``--linear-attention-freq``.

    ours (decoder.layers.{i}.*)                      HF (backbone.blocks.{i}.*)
    input_layernorm / pre_mlp_layernorm              norm_mlstm / norm_ffn
    self_attention.in_proj                           mlstm_layer.[q; k; v; ogate_preact]      (fuse rows)
    self_attention.gate_proj (weight, bias)          mlstm_layer.[igate_preact; fgate_preact]  (fuse rows)
    self_attention.norm_weight                       mlstm_layer.multihead_norm.weight
    self_attention.out_proj                          mlstm_layer.out_proj
    mlp.linear_fc1 / linear_fc2                      ffn.[proj_up_gate; proj_up] / ffn.proj_down
    embedding / decoder.final_layernorm / output     backbone.embeddings / backbone.out_norm / lm_head

Sizes: ``num_heads`` heads of ``int(hidden * qk_dim_factor) / heads`` (q, k: ``--linear-key-head-dim``) and
``int(hidden * v_dim_factor) / heads`` (v: ``--linear-value-head-dim``) channels, as the layer computes them (the
config's rounded ``qk_dim`` property sizes only its cache); the MLP ``hidden * ffn_proj_factor`` rounded up to
``ffn_round_up_to_multiple_of``. ``gate_soft_cap`` and ``eps`` are the mLSTM's (``--mlstm-gate-soft-cap``,
``--mlstm-eps``), ``output_logit_soft_cap`` caps the logits (``--output-logit-softcapping``), ``norm_eps`` every
norm's; an export writes the MLP width as its factor over the hidden size unless the original config's factor
and multiple give the same width (then those). transformers' model always applies ``out_norm`` and never ties
the head (``add_out_norm`` and ``tie_word_embeddings`` are kept for the way back); the kernel, mode and chunk keys
choose transformers' kernels, not the model (our chunk is ``--linear-chunk-size``).

Refused in one line: ``use_bias`` (its RMSNorms would carry biases, which the decoder's RMSNorm has not) and
``weight_mode`` ``fused`` (the same model saved as ``qkv_opreact`` / ``ifgate_preact``; the converter reads the
published ``single`` layout).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.families.linear_attention import config_marks
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, _dtype_name, register,
                                           require_config)

PREFIX = "backbone.blocks.{i}."
PRESERVED = ("add_out_norm", "tie_word_embeddings", "weight_mode", "mode", "chunk_size", "chunkwise_kernel",
             "sequence_kernel", "step_kernel", "return_last_states", "autocast_kernel_dtype", "inference_state_dtype",
             "norm_reduction_force_float32", "max_inference_chunksize")


def round_up(value: float, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple`` (xLSTM's ``round_up_to_next_multiple_of``)."""
    return int(((value + multiple - 1) // multiple) * multiple)


def _xlstm_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("use_bias", False):
        raise RegistryError("xlstm use_bias=True is not supported: its RMSNorms would carry biases, which the "
                            "decoder's RMSNorm has not")
    if hf.get("weight_mode", "single") != "single":
        raise RegistryError(f"xlstm weight_mode {hf['weight_mode']!r} is not supported: convert the 'single' layout "
                            "(q, k, v, ogate_preact, igate_preact, fgate_preact), the published one")
    hidden = int(hf.get("hidden_size") or hf["embedding_dim"])
    layers = int(hf.get("num_hidden_layers") or hf["num_blocks"])
    heads = int(hf.get("num_heads", 8))
    qk, v = int(hidden * float(hf.get("qk_dim_factor", 0.5))), int(hidden * float(hf.get("v_dim_factor", 1.0)))
    if qk % heads or v % heads:
        raise RegistryError(f"xlstm qk_dim ({qk}) and v_dim ({v}) must be divisible by num_heads ({heads})")
    ffn = round_up(hidden * float(hf.get("ffn_proj_factor", 2.667)), int(hf.get("ffn_round_up_to_multiple_of", 64)))
    kwargs = dict(num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn, num_attention_heads=heads,
                  vocab_size=int(hf["vocab_size"]),
                  max_position_embeddings=int(hf.get("max_position_embeddings", 4096)), normalization="RMSNorm",
                  norm_epsilon=float(hf.get("norm_eps", 1e-6)), position_embedding_type="none", add_bias_linear=False,
                  activation="swiglu", untie_embeddings_and_output_weights=True, attention_dropout=0.0,
                  hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)),
                  make_vocab_size_divisible_by=1, experimental_attention_variant="mlstm",
                  linear_attention_freq=f"[1]*{layers}", linear_num_key_heads=heads, linear_num_value_heads=heads,
                  linear_key_head_dim=qk // heads, linear_value_head_dim=v // heads,
                  mlstm_gate_soft_cap=float(hf.get("gate_soft_cap", 15.0)), mlstm_eps=float(hf.get("eps", 1e-6)),
                  output_logit_softcapping=float(hf.get("output_logit_soft_cap", 30.0)))
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _xlstm_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.experimental_attention_variant != "mlstm" or not all(config_marks(cfg)):
        raise RegistryError("xlstm has mLSTM layers only (--experimental-attention-variant mlstm with every layer "
                            "marked by --linear-attention-freq)")
    require_config(cfg, "xlstm", normalization="RMSNorm", activation="swiglu", add_bias_linear=False,
                   untie_embeddings_and_output_weights=True, position_embedding_type="none", apply_layernorm_1p=False,
                   embedding_multiplier=None, post_norm=False)
    if cfg.mlstm_gate_soft_cap is None or cfg.output_logit_softcapping is None:
        raise RegistryError("xlstm caps its gates and logits always (gate_soft_cap, output_logit_soft_cap): set "
                            "--mlstm-gate-soft-cap and --output-logit-softcapping")
    hidden, heads, ffn = cfg.hidden_size, cfg.linear_num_value_heads, cfg.ffn_hidden_size
    return dict(vocab_size=cfg.vocab_size, hidden_size=hidden, embedding_dim=hidden, num_hidden_layers=cfg.num_layers,
                num_blocks=cfg.num_layers, num_heads=heads, use_bias=False, norm_eps=cfg.norm_epsilon,
                qk_dim_factor=heads * cfg.linear_key_head_dim / hidden,
                v_dim_factor=heads * cfg.linear_value_head_dim / hidden,
                ffn_proj_factor=ffn / hidden, ffn_round_up_to_multiple_of=64 if ffn % 64 == 0 else ffn,
                gate_soft_cap=cfg.mlstm_gate_soft_cap, output_logit_soft_cap=cfg.output_logit_softcapping,
                eps=cfg.mlstm_eps, max_position_embeddings=cfg.max_position_embeddings,
                initializer_range=cfg.init_method_std, tie_word_embeddings=False, use_cache=True,
                torch_dtype=str(cfg.params_dtype).replace("torch.", ""))


def _block(ours: str, hf: Tuple[str, ...], transform: str = "copy") -> WeightRule:
    return WeightRule("decoder.layers.{i}." + ours, tuple(PREFIX + name for name in hf), transform)


XLSTM_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("backbone.embeddings.weight",), "vocab"),
    _block("input_layernorm.weight", ("norm_mlstm.weight",)),
    _block("self_attention.in_proj.weight", tuple(f"mlstm_layer.{p}.weight" for p in ("q", "k", "v", "ogate_preact")),
           "fuse_rows"),
    *(_block(f"self_attention.gate_proj.{kind}", (f"mlstm_layer.igate_preact.{kind}",
                                                  f"mlstm_layer.fgate_preact.{kind}"), "fuse_rows")
      for kind in ("weight", "bias")),
    _block("self_attention.norm_weight", ("mlstm_layer.multihead_norm.weight",)),
    _block("self_attention.out_proj.weight", ("mlstm_layer.out_proj.weight",)),
    _block("pre_mlp_layernorm.weight", ("norm_ffn.weight",)),
    _block("mlp.linear_fc1.weight", ("ffn.proj_up_gate.weight", "ffn.proj_up.weight"), "fuse_rows"),
    _block("mlp.linear_fc2.weight", ("ffn.proj_down.weight",)),
    WeightRule("decoder.final_layernorm.weight", ("backbone.out_norm.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)

XLSTM = register(Family("xlstm", "xlstm", "xLSTMForCausalLM", _xlstm_config,
                        _checked("xlstm", _xlstm_config, _xlstm_hf_config), XLSTM_WEIGHTS, preserved_keys=PRESERVED,
                        equivalent_keys=(("ffn_proj_factor", "ffn_round_up_to_multiple_of"),)))

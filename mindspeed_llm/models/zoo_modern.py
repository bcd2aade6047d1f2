"""Recent decoder families (2025): EXAONE 4, VaultGemma, GraniteSWA, HyperCLOVAX, Arcee, Apertus, BitNet,
NanoChat.

Each is a registry :class:`Family` built from the shared helpers of ``registry.py``; they differ from Llama
only through behaviour flags of :class:`TransformerConfig`:

* ``exaone4``: Olmo2's post-only norms (``--post-norm-only``), per-head q/k RMSNorm, sliding-window layers
  (``--full-attention-layers``) where, when a window is configured, only the sliding layers use RoPE
  (``--no-rope-layers`` = the full-attention layers);
* ``vaultgemma``: Gemma2 without the norms on the attention and MLP outputs;
* ``granite_swa``: Granite with sliding-window layers (``--full-attention-layers``), a learnable attention
  sink per head (``--softmax-type learnable``) and a RoPE base per layer (``layer_rope_theta``: one base on
  the full layers, another on the sliding ones as ``--local-rotary-base``, 0 for NoPE layers);
* ``hyperclovax``: Granite's multipliers plus Gemma2's sandwich norms (``use_post_norm``); its logits are
  multiplied by ``logits_scaling`` (Granite divides);
* ``arcee``: Llama with a non-gated ReLU-squared MLP (``--squared-relu``; HF ``up_proj``/``down_proj``);
* ``apertus``: Llama with per-head q/k norms and the non-gated xIELU MLP (``--xielu``); HF stores xIELU's
  fixed ``beta`` and ``eps`` as buffers, checked against the decoder's constants and written back;
* ``bitnet``: Llama with a gated ReLU-squared MLP (``--gated-mlp --squared-relu``) and RMSNorms before
  the attention output projection and before ``down_proj`` (``--attn-sub-norm``, ``--ffn-sub-norm``).
  Only unquantised checkpoints convert: a ``quantization_config`` (ternary weights in the forward) is
  refused;
* ``nanochat``: non-parametric RMSNorms everywhere (also on the embeddings and on q/k), a non-gated
  ReLU-squared MLP (``mlp.fc1``/``mlp.fc2``), untied, a final logit softcap. Its RoPE turns the other way
  (``rotate_half`` with flipped signs): the conversion negates the second half of every q/k head's rows
  (transform ``qk_rope_mirrored``), which gives bit-identical attention scores with the decoder's RoPE. Its
  q/k norms act after RoPE, ours before: RoPE keeps each head's norm, so they agree up to rounding.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import torch

from core.transformer.config import TransformerConfig
from core.transformer.mlp import XIELU_BETA, XIELU_EPS
from mindspeed_llm.models.registry import (
    GATED_ACTIVATIONS,
    LLAMA_WEIGHTS,
    OLMO2_WEIGHTS,
    ROPE_KEYS,
    TRANSFORMS,
    Family,
    RegistryError,
    TensorContext,
    WeightRule,
    _common_config,
    _common_hf_config,
    _fuse_rows_to_hf,
    _fuse_rows_to_ours,
    _gemma2_config,
    _gemma2_hf_config,
    _granite_config,
    _granite_hf_config,
    _layer,
    _layer_types,
    _llama_config,
    _llama_hf_config,
    _renamed,
    _rope_settings,
    plain_activation,
    plain_activation_to_hf,
    register,
)

# --------------------------------------------------------------------------- activations

# non-gated MLP activations: registry.plain_activation / plain_activation_to_hf


def _without_activation(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``hf`` with a placeholder gated activation, for the shared helpers (the family sets its own)."""
    return {**hf, "hidden_act": "silu", "hidden_activation": None}


# --------------------------------------------------------------------------- transforms


def _check_constant(tensor: torch.Tensor, value: float, what: str) -> None:
    if tensor.is_meta:  # shape checks read headers only
        return
    expected = torch.tensor(value, dtype=tensor.dtype)
    if tensor.numel() != 1 or not torch.equal(tensor.reshape(()), expected):
        raise RegistryError(f"xIELU {what} is {tensor.reshape(-1)[:1].tolist()}, the decoder's is {value}")


def _with_constant(value: float, what: str):
    """A transform pair: our parameter <-> [HF tensor, HF constant buffer ``what`` = ``value``]."""

    def to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
        _check_constant(tensors[1], value, what)
        return tensors[0]

    def to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
        return [tensor, torch.tensor(value, dtype=tensor.dtype)]

    return to_ours, to_hf


def _mirror_rotary_halves(qkv: torch.Tensor, cfg: TransformerConfig) -> torch.Tensor:
    """``[Q; K; V]`` rows (``[(np + 2 ng) hn, ...]``) with the second half of each q/k head negated.

    RoPE by ``-theta`` (NanoChat's ``rotate_half``) of a head equals, up to that sign flip, RoPE by
    ``theta`` of the flipped head; flipping q and k alike keeps every score. The map is its own inverse.
    """
    heads, groups, hn = cfg.num_attention_heads, cfg.num_query_groups, cfg.kv_channels
    out = qkv.clone()
    qk = out[:(heads + groups) * hn].view(heads + groups, hn, *qkv.shape[1:])  # [np + ng, hn, ...]
    qk[:, hn // 2:].neg_()
    return out


def _qk_rope_mirrored_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return _mirror_rotary_halves(_fuse_rows_to_ours(tensors, ctx), ctx.config)


def _qk_rope_mirrored_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return _fuse_rows_to_hf(_mirror_rotary_halves(tensor, ctx.config), ctx)


TRANSFORMS.update({
    # xIELU's alphas carry HF's fixed beta / eps buffers along (Apertus)
    "xielu_alpha_p": _with_constant(XIELU_BETA, "beta"),
    "xielu_alpha_n": _with_constant(XIELU_EPS, "eps"),
    # fused q/k/v rows with each q/k head's second half negated (NanoChat's RoPE turns the other way)
    "qk_rope_mirrored": (_qk_rope_mirrored_to_ours, _qk_rope_mirrored_to_hf),
})

# --------------------------------------------------------------------------- EXAONE 4


def _exaone4_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or as transformers derives them: every ``sliding_window_pattern``-th layer full."""
    if hf.get("layer_types"):
        return list(hf["layer_types"])
    layers = int(hf["num_hidden_layers"])
    if hf.get("sliding_window", 4096) is None:
        return ["full_attention"] * layers
    pattern = hf.get("sliding_window_pattern", 4)
    if not isinstance(pattern, int) or pattern < 1:
        raise RegistryError(f"exaone4 sliding_window_pattern {pattern!r} without layer_types is not supported")
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]


def _exaone4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """EXAONE 4: post-only norms, per-head q/k norms; with a window, full layers attend without RoPE."""
    types = _exaone4_layer_types(hf)
    window = hf.get("sliding_window", 4096)
    out = {**_common_config(hf), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)), "qk_layernorm": True,
           "post_norm_only": True}
    if window is None:
        return out
    full = tuple(i for i, kind in enumerate(types) if kind != "sliding_attention")
    return {**out, "sliding_window": int(window), "full_attention_layers": full, "no_rope_layers": full}


def _exaone4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear or cfg.add_qkv_bias or cfg.add_dense_bias or cfg.add_mlp_bias:
        raise RegistryError("exaone4 has no linear biases; the config sets one")
    if not (cfg.qk_layernorm and cfg.post_norm_only) or cfg.qk_layernorm_full_width or cfg.post_norm:
        raise RegistryError("exaone4 needs --qk-layernorm --post-norm-only (no --qk-layernorm-full-width, --post-norm)")
    full = tuple(i for i in range(cfg.num_layers) if cfg.layer_window(i) is None)
    expected_nope = full if cfg.sliding_window is not None else ()
    if cfg.no_rope_layers != expected_nope or cfg.sliding_window_pattern is not None:
        raise RegistryError(f"exaone4 skips RoPE exactly on the full-attention layers when a window is set "
                            f"(--no-rope-layers {list(expected_nope)}, --full-attention-layers)")
    # sliding_window_pattern is left as it was: transformers reads it only without layer_types
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "layer_types": _layer_types(cfg)}


_EXAONE4 = register(Family("exaone4", "exaone4", "Exaone4ForCausalLM", _exaone4_config, _exaone4_hf_config,
                           OLMO2_WEIGHTS))

# --------------------------------------------------------------------------- VaultGemma


def _vaultgemma_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """VaultGemma: Gemma2 without the norms on the attention and MLP outputs."""
    return {**_gemma2_config(hf), "post_norm": False}


def _vaultgemma_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.post_norm or cfg.post_norm_only:
        raise RegistryError("vaultgemma has no norms on the attention and MLP outputs; drop --post-norm")
    out = _gemma2_hf_config(cfg)
    out.pop("use_bidirectional_attention", None)
    return out


VAULTGEMMA_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"pre_mlp_layernorm.weight": "pre_feedforward_layernorm.weight"})
_VAULTGEMMA = register(Family("vaultgemma", "vaultgemma", "VaultGemmaForCausalLM", _vaultgemma_config,
                              _vaultgemma_hf_config, VAULTGEMMA_WEIGHTS))

# --------------------------------------------------------------------------- GraniteSWA


def _granite_swa_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or transformers' default: layers 0, 4, 8, ... attend fully."""
    layers = int(hf["num_hidden_layers"])
    return list(hf.get("layer_types") or ["full_attention" if i % 4 == 0 else "sliding_attention"
                                          for i in range(layers)])


def _granite_swa_rope(hf: Dict[str, Any], types: Sequence[str]) -> Dict[str, Any]:
    """Our rope fields from ``layer_rope_theta``: one base on full layers, one on sliding layers, 0 = NoPE."""
    rope = _rope_settings(hf)
    thetas = hf.get("layer_rope_theta") or [rope["rotary_base"]] * len(types)
    full = {float(t) for t, kind in zip(thetas, types) if t and kind != "sliding_attention"}
    sliding = {float(t) for t, kind in zip(thetas, types) if t and kind == "sliding_attention"}
    if len(full) > 1 or len(sliding) > 1:
        raise RegistryError(f"granite_swa layer_rope_theta {list(thetas)}: more than one base per layer type "
                            "is not supported")
    base = next(iter(full or sliding), rope["rotary_base"])
    out = {**rope, "rotary_base": base, "no_rope_layers": tuple(i for i, t in enumerate(thetas) if not t)}
    if sliding and sliding != {base}:
        if rope.get("rope_scaling_type") is not None:
            raise RegistryError("granite_swa with two layer_rope_theta bases and rope scaling is not supported")
        out["local_rotary_base"] = sliding.pop()
    return out


def _granite_swa_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GraniteSWA: Granite with sliding-window layers, attention sinks and per-layer RoPE bases."""
    types = _granite_swa_layer_types(hf)
    window = hf.get("sliding_window", 128)
    if window is None and "sliding_attention" in types:
        raise RegistryError("granite_swa sliding_attention layers without sliding_window are not supported")
    out = {**_granite_config({k: v for k, v in hf.items() if k != "layer_rope_theta"}),
           **_granite_swa_rope(hf, types), "softmax_type": "learnable",
           "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}
    if window is not None and "sliding_attention" in types:
        out.update(sliding_window=int(window),
                   full_attention_layers=tuple(i for i, kind in enumerate(types) if kind != "sliding_attention"))
    return out


def _granite_swa_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.softmax_type != "learnable" or cfg.sliding_window_pattern is not None:
        raise RegistryError("granite_swa needs --softmax-type learnable and its full layers as --full-attention-layers")
    types = _layer_types(cfg)
    if cfg.local_rotary_base is not None and cfg.rope_scaling_type is not None:
        raise RegistryError("granite_swa with --local-rotary-base and rope scaling is not supported")
    thetas = [0.0 if i in cfg.no_rope_layers else
              (cfg.local_rotary_base or cfg.rotary_base) if kind == "sliding_attention" else cfg.rotary_base
              for i, kind in enumerate(types)]
    return {**_granite_hf_config(cfg), "sliding_window": cfg.sliding_window or 128, "layer_types": types,
            "layer_rope_theta": thetas}


_GRANITE_SWA = register(Family("granite_swa", "granite_swa", "GraniteSWAForCausalLM", _granite_swa_config,
                               _granite_swa_hf_config,
                               LLAMA_WEIGHTS + (_layer("self_attention.softmax_offset", ["self_attn.sinks"]),)))

# --------------------------------------------------------------------------- HyperCLOVAX


def _hyperclovax_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """HyperCLOVAX: Granite with sandwich norms (``use_post_norm``) and logits times ``logits_scaling``."""
    head_dim = int(hf.get("head_dim") or int(hf["hidden_size"]) // int(hf["num_attention_heads"]))
    multiplier = hf.get("attention_multiplier")
    hf = {**hf, "attention_multiplier": head_dim ** -0.5 if multiplier is None else multiplier}
    return {**_granite_config(hf), "post_norm": bool(hf.get("use_post_norm", True)),
            "output_multiplier_scale": float(hf.get("logits_scaling", 1.0))}


def _hyperclovax_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.post_norm_only:
        raise RegistryError("hyperclovax has norms before attention and MLP; drop --post-norm-only")
    return {**_granite_hf_config(cfg), "logits_scaling": cfg.output_multiplier_scale or 1.0,
            "use_post_norm": cfg.post_norm}


HYPERCLOVAX_WEIGHTS = LLAMA_WEIGHTS + (
    _layer("post_self_attn_layernorm.weight", ["post_norm1.weight"]),
    _layer("post_mlp_layernorm.weight", ["post_norm2.weight"]),
)
_HYPERCLOVAX = register(Family("hyperclovax", "hyperclovax", "HyperCLOVAXForCausalLM", _hyperclovax_config,
                               _hyperclovax_hf_config, HYPERCLOVAX_WEIGHTS))

# --------------------------------------------------------------------------- Arcee

NON_GATED_MLP_WEIGHTS = {"mlp.linear_fc1.weight": "mlp.up_proj.weight", "mlp.linear_fc1.bias": "mlp.up_proj.bias"}
ARCEE_ACTIVATIONS = ("relu2", "relu", "gelu", "gelu_pytorch_tanh")


def _arcee_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Arcee (AFM): Llama with a non-gated MLP, ReLU squared by default."""
    return {**_llama_config(_without_activation(hf)),
            **plain_activation(hf, "arcee", default="relu2", supported=ARCEE_ACTIVATIONS)}


def _arcee_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _llama_hf_config(cfg)
    out.pop("pretraining_tp")
    return {**out, "hidden_act": plain_activation_to_hf(cfg, "arcee")}


_ARCEE = register(Family("arcee", "arcee", "ArceeForCausalLM", _arcee_config, _arcee_hf_config,
                         _renamed(LLAMA_WEIGHTS, NON_GATED_MLP_WEIGHTS)))

# --------------------------------------------------------------------------- Apertus

APERTUS_ROPE = {"rope_type": "llama3", "rope_theta": 12_000_000.0, "factor": 8.0,
                "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def _attention_bias(hf: Dict[str, Any]) -> Dict[str, bool]:
    """``attention_bias`` on q/k/v/o without MLP biases."""
    bias = bool(hf.get("attention_bias", False))
    return {"add_qkv_bias": bias, "add_dense_bias": bias}


def _attention_bias_to_hf(cfg: TransformerConfig, family: str) -> bool:
    if cfg.add_bias_linear or cfg.add_mlp_bias or cfg.add_qkv_bias != cfg.add_dense_bias:
        raise RegistryError(f"{family} has biases on q/k/v/o together (attention_bias) or none; "
                            "use --add-qkv-bias with --add-dense-bias, without --add-bias-linear/--add-mlp-bias")
    return cfg.add_qkv_bias


def _apertus_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Apertus: Llama with per-head q/k norms and the non-gated xIELU MLP (learnable alphas per layer)."""
    if not any(hf.get(key) for key in ROPE_KEYS):
        hf = {**hf, "rope_parameters": APERTUS_ROPE}
    return {**_common_config(_without_activation(hf)), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)),
            "qk_layernorm": True, **_attention_bias(hf),
            **plain_activation(hf, "apertus", default="xielu",
                               supported=("xielu", "relu2", "relu", "gelu", "gelu_pytorch_tanh"))}


def _apertus_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if not cfg.qk_layernorm or cfg.qk_layernorm_full_width:
        raise RegistryError("apertus needs --qk-layernorm (per head)")
    return {**_common_hf_config(cfg), "hidden_act": plain_activation_to_hf(cfg, "apertus"),
            "attention_bias": _attention_bias_to_hf(cfg, "apertus")}


APERTUS_WEIGHTS = _renamed(LLAMA_WEIGHTS, {**NON_GATED_MLP_WEIGHTS,
                                           "input_layernorm.weight": "attention_layernorm.weight",
                                           "pre_mlp_layernorm.weight": "feedforward_layernorm.weight"}, (
    _layer("mlp.xielu.alpha_p", ["mlp.act_fn.alpha_p", "mlp.act_fn.beta"], "xielu_alpha_p"),
    _layer("mlp.xielu.alpha_n", ["mlp.act_fn.alpha_n", "mlp.act_fn.eps"], "xielu_alpha_n"),
))
_APERTUS = register(Family("apertus", "apertus", "ApertusForCausalLM", _apertus_config, _apertus_hf_config,
                           APERTUS_WEIGHTS))

# --------------------------------------------------------------------------- BitNet


def _bitnet_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """BitNet b1.58 (unquantised): gated ReLU squared, RMSNorms before ``o_proj`` and ``down_proj``."""
    if hf.get("quantization_config"):
        raise RegistryError("bitnet quantization_config (ternary weights in the forward) is not modelled; "
                            "convert unquantised weights (config.json without quantization_config)")
    act = hf.get("hidden_act") or "relu2"
    activation = dict(activation="gated_squared_relu") if act == "relu2" else None
    if activation is None and act not in GATED_ACTIVATIONS:
        raise RegistryError(f"bitnet hidden_act {act!r} is not supported (supported: relu2, "
                            f"{', '.join(GATED_ACTIVATIONS)})")
    out = _common_config(hf if activation is None else _without_activation(hf))
    if out["kv_channels"] * out["num_attention_heads"] != out["hidden_size"]:
        raise RegistryError("bitnet head_dim x num_attention_heads must equal hidden_size (attn_sub_norm width)")
    return {**out, **(activation or {}), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)),
            "attn_sub_norm": True, "ffn_sub_norm": True, **_attention_bias(hf)}


def _bitnet_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if not (cfg.attn_sub_norm and cfg.ffn_sub_norm and cfg.gated_linear_unit):
        raise RegistryError("bitnet needs --attn-sub-norm --ffn-sub-norm and a gated MLP (--gated-mlp --squared-relu)")
    out = _common_hf_config(cfg)
    if cfg.activation not in GATED_ACTIVATIONS.values():  # act(gate) * up with other than an HF gated activation
        if cfg.activation != "gated_squared_relu":
            raise RegistryError("bitnet's --gated-mlp activation is ReLU squared; add --squared-relu")
        out["hidden_act"] = "relu2"
    out.pop("head_dim")
    return {**out, "attention_bias": _attention_bias_to_hf(cfg, "bitnet")}


BITNET_WEIGHTS = LLAMA_WEIGHTS + (
    _layer("self_attention.sub_layernorm.weight", ["self_attn.attn_sub_norm.weight"]),
    _layer("mlp.sub_layernorm.weight", ["mlp.ffn_sub_norm.weight"]),
)
_BITNET = register(Family("bitnet", "bitnet", "BitNetForCausalLM", _bitnet_config, _bitnet_hf_config,
                          BITNET_WEIGHTS))

# --------------------------------------------------------------------------- NanoChat


def _nanochat_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """NanoChat: weightless RMSNorms (embeddings, layers, q/k, final), ReLU squared, untied, softcapped."""
    if hf.get("attention_bias", False):
        raise RegistryError("nanochat attention_bias=True is not supported")
    out = {**_common_config(_without_activation(hf)),
           **plain_activation(hf, "nanochat", default="relu2",
                              supported=("relu2", "relu", "gelu", "gelu_pytorch_tanh")),
           "non_parametric_norm": True, "embed_layernorm": True, "qk_layernorm": True,
           "non_parametric_qk_norm": True, "output_logit_softcapping": hf.get("final_logit_softcapping", 15.0)}
    if out.get("rotary_percent", 1.0) != 1.0:
        raise RegistryError("nanochat partial_rotary_factor is not supported")
    return out


def _nanochat_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_all_biases(cfg, "nanochat")
    needed = (cfg.non_parametric_norm, cfg.embed_layernorm, cfg.qk_layernorm, cfg.non_parametric_qk_norm,
              cfg.normalization == "RMSNorm", cfg.kv_channels * cfg.num_attention_heads == cfg.hidden_size)
    if not all(needed) or cfg.rotary_percent != 1.0:
        raise RegistryError("nanochat needs --normalization RMSNorm --non-parametric-norm --embed-layernorm "
                            "--qk-layernorm --non-parametric-qk-norm, full rotary and head dim = hidden / heads")
    out = _common_hf_config(cfg)
    out.pop("head_dim")
    return {**out, "hidden_act": plain_activation_to_hf(cfg, "nanochat"), "attention_bias": False,
            "final_logit_softcapping": cfg.output_logit_softcapping}


def _reject_all_biases(cfg: TransformerConfig, family: str) -> None:
    if cfg.add_bias_linear or cfg.add_qkv_bias or cfg.add_dense_bias or cfg.add_mlp_bias:
        raise RegistryError(f"{family} has no linear biases; the config sets one")


NANOCHAT_WEIGHTS = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    _layer("self_attention.linear_qkv.weight",
           ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"], "qk_rope_mirrored"),
    _layer("self_attention.linear_proj.weight", ["self_attn.o_proj.weight"]),
    _layer("mlp.linear_fc1.weight", ["mlp.fc1.weight"]),
    _layer("mlp.linear_fc2.weight", ["mlp.fc2.weight"]),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)
_NANOCHAT = register(Family("nanochat", "nanochat", "NanoChatForCausalLM", _nanochat_config, _nanochat_hf_config,
                            NANOCHAT_WEIGHTS))

"""Families with Llama's layout and another MLP than SwiGLU: Jais2, Nemotron, Starcoder2, Arcee, Apertus,
BitNet and NanoChat.

Jais2, Nemotron and Starcoder2 also use LayerNorms with biases; each of their ``to_hf_config`` checks that
mapping its result back gives the architecture of the model being exported (``registry._checked``), so a
model whose flags the HF family cannot express is refused with the fields named.

* Jais2, Nemotron: Llama names with a non-gated ``up_proj``/``down_proj`` MLP
  (ReLU squared: ``--squared-relu``), LayerNorms with bias (Nemotron's scale
  ``1 + weight``: ``--apply-layernorm-1p``, half the head dim rotated by
  default), ``attention_bias``/``mlp_bias`` as biases by place.
* Starcoder2: LayerNorms with bias (``norm_epsilon``), ``use_bias`` on every
  linear, a non-gated ``c_fc``/``c_proj`` tanh-GELU MLP, an optional sliding
  window, tied embeddings.
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

import dataclasses
from typing import Any, Dict, List, Sequence

import torch

from core.transformer.config import TransformerConfig
from core.transformer.mlp import XIELU_BETA, XIELU_EPS
from mindspeed_llm.models.registry import (
    GATED_ACTIVATIONS,
    LLAMA_WEIGHTS,
    ROPE_KEYS,
    TRANSFORMS,
    Family,
    RegistryError,
    TensorContext,
    WeightRule,
    _bias_places,
    _checked_family,
    _common_config,
    _common_hf_config,
    _fuse_rows_to_hf,
    _fuse_rows_to_ours,
    _layer,
    _llama_config,
    _llama_hf_config,
    _renamed,
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
            "qk_norm": "per_head", **_attention_bias(hf),
            **plain_activation(hf, "apertus", default="xielu",
                               supported=("xielu", "relu2", "relu", "gelu", "gelu_pytorch_tanh"))}


def _apertus_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.qk_norm != "per_head":
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
           "non_parametric_norm": True, "embed_layernorm": True, "qk_norm": "non_parametric",
           "output_logit_softcapping": hf.get("final_logit_softcapping", 15.0)}
    if out.get("rotary_percent", 1.0) != 1.0:
        raise RegistryError("nanochat partial_rotary_factor is not supported")
    return out


def _nanochat_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_all_biases(cfg, "nanochat")
    needed = (cfg.non_parametric_norm, cfg.embed_layernorm, cfg.qk_norm == "non_parametric",
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

# --------------------------------------------------------------------------- Jais2, Nemotron, Starcoder2

PLAIN_MLP_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"mlp.linear_fc1.weight": "mlp.up_proj.weight",
                                             "mlp.linear_fc1.bias": "mlp.up_proj.bias"})
STARCODER2_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"mlp.linear_fc1.weight": "mlp.c_fc.weight",
                                              "mlp.linear_fc1.bias": "mlp.c_fc.bias",
                                              "mlp.linear_fc2.weight": "mlp.c_proj.weight",
                                              "mlp.linear_fc2.bias": "mlp.c_proj.bias"})


def _bias_flags(attention: bool, mlp: bool) -> Dict[str, bool]:
    """Biases by place from HF ``attention_bias`` (q/k/v and o) and ``mlp_bias``."""
    if attention and mlp:
        return dict(add_bias_linear=True, add_qkv_bias=False, add_dense_bias=False, add_mlp_bias=False)
    return dict(add_bias_linear=False, add_qkv_bias=attention, add_dense_bias=attention, add_mlp_bias=mlp)


def _layer_norm_hf_config(cfg: TransformerConfig, eps_key: str, family: str) -> Dict[str, Any]:
    """``_common_hf_config`` with a LayerNorm epsilon key and a non-gated activation."""
    out = _common_hf_config(cfg)
    del out["rms_norm_eps"]
    return {**out, eps_key: cfg.norm_epsilon, "hidden_act": plain_activation_to_hf(cfg, family)}


def _layer_norm_config(name: str, hf: Dict[str, Any], eps_key: str, default_act: str) -> Dict[str, Any]:
    """Llama fields with LayerNorm (with bias) and a non-gated MLP."""
    hf = {**hf, "hidden_act": hf.get("hidden_act") or default_act}
    kwargs = {**_common_config({**hf, "hidden_act": "silu"}), **plain_activation(hf, name, default=default_act)}
    return {**kwargs, "normalization": "LayerNorm", "norm_epsilon": float(hf.get(eps_key, 1e-5))}


def _jais2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Jais2: LayerNorm with bias, non-gated ReLU-squared MLP, biases by ``attention_bias``/``mlp_bias``."""
    return {**_layer_norm_config("jais2", hf, "layer_norm_eps", "relu2"),
            **_bias_flags(bool(hf.get("attention_bias", True)), bool(hf.get("mlp_bias", True)))}


def _jais2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    places = _bias_places(dataclasses.asdict(cfg))
    return {**_layer_norm_hf_config(cfg, "layer_norm_eps", "jais2"), "attention_bias": places["qkv"],
            "mlp_bias": places["mlp"]}


def _nemotron_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Nemotron: LayerNorm1P (scale 1 + weight), ReLU squared, half the head dim rotated by default."""
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    partial = rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 0.5))
    return {**_layer_norm_config("nemotron", {**hf, "partial_rotary_factor": partial}, "norm_eps", "relu2"),
            "apply_layernorm_1p": True,
            **_bias_flags(bool(hf.get("attention_bias", False)), bool(hf.get("mlp_bias", False)))}


def _nemotron_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    places = _bias_places(dataclasses.asdict(cfg))
    return {**_layer_norm_hf_config(cfg, "norm_eps", "nemotron"), "partial_rotary_factor": cfg.rotary_percent,
            "attention_bias": places["qkv"], "mlp_bias": places["mlp"]}


def _starcoder2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Starcoder2: LayerNorm with bias, ``use_bias`` on every linear, tanh-GELU MLP, optional window, tied."""
    use_bias = bool(hf.get("use_bias", True))
    return {**_layer_norm_config("starcoder2", hf, "norm_epsilon", "gelu_pytorch_tanh"),
            **_bias_flags(use_bias, use_bias), "sliding_window": hf.get("sliding_window"),
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}


def _starcoder2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_layer_norm_hf_config(cfg, "norm_epsilon", "starcoder2"),
            "use_bias": _bias_places(dataclasses.asdict(cfg))["qkv"],
            "sliding_window": cfg.sliding_window, "residual_dropout": 0.0, "embedding_dropout": 0.0}


JAIS2 = register(_checked_family("jais2", "jais2", "Jais2ForCausalLM", _jais2_config, _jais2_hf_config,
                                 PLAIN_MLP_WEIGHTS))
STARCODER2 = register(_checked_family("starcoder2", "starcoder2", "Starcoder2ForCausalLM", _starcoder2_config,
                                      _starcoder2_hf_config, STARCODER2_WEIGHTS))
NEMOTRON = register(_checked_family("nemotron", "nemotron", "NemotronForCausalLM", _nemotron_config,
                                    _nemotron_hf_config, PLAIN_MLP_WEIGHTS))

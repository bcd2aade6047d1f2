"""The GPT-NeoX lineage and the other parallel-residual families: GPT-NeoX, GPT-NeoX-Japanese, GPT-J, CodeGen,
Phi, Persimmon and Falcon.

They share LayerNorm with bias, a non-gated MLP and, most of them, fused q/k/v and a parallel residual:

    family             residual                         q/k/v (ours: [Q; K; V] rows)       RoPE
    gpt_neox           parallel, two norms (or seq.)    per-head [heads, 3, hd]            half, partial
    gpt_neox_japanese  sequential                       per-head [heads, 3, hd]            half, partial
    gptj               parallel, one norm               q_proj, k_proj, v_proj             interleaved, rotary_dim
    codegen            parallel, one norm               mp_num=4 blocks of [q, v, k]       interleaved, rotary_dim
    phi                parallel, one norm               q_proj, k_proj, v_proj (GQA)       half, partial
    persimmon          sequential                       per-head [heads, 3, hd]            half, partial
    falcon             parallel, one or two norms;      [Q; K; V] (multi_query), per-head  half, full
                       sequential (parallel_attn=False) or per-KV-group (new architecture)

Biases by place: GPT-NeoX, Phi and Persimmon have them on every linear (GPT-NeoX's ``attention_bias=False``
keeps the MLP's: ``--add-mlp-bias``); GPT-J and CodeGen only on the MLP (``--add-mlp-bias``) and the
output layer (``--add-output-layer-bias``), as Phi; GPT-NeoX-Japanese on the last layer's attention output
projection only (``--dense-bias-layers``); Falcon on every linear or none (``bias``). Falcon's ALiBi
(``alibi=True``) is refused here. Every family is registered under its HF ``model_type`` (no MindSpeed-LLM
``--model-type-hf`` alias for them is known here).
"""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    Family,
    RegistryError,
    WeightRule,
    _dtype_name,
    _rope_settings,
    _rope_to_hf,
    plain_activation,
    plain_activation_to_hf,
    register,
)

# the non-gated activations these families use (registry.PLAIN_ACTIVATIONS names); GELU's tanh form is written
# back as gelu_new
PARALLEL_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "relu2")


def _base_config(hf: Dict[str, Any], *, layers: int, hidden: int, heads: int, ffn: int, positions: int,
                 eps: float) -> Dict[str, Any]:
    """The fields these families share: LayerNorm with bias, RoPE, no bias (each family adds its own), fp32
    dropout-free conversion defaults."""
    kwargs: Dict[str, Any] = dict(
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_query_groups=heads,
        kv_channels=hidden // heads, ffn_hidden_size=ffn, vocab_size=int(hf["vocab_size"]),
        max_position_embeddings=positions, normalization="LayerNorm", norm_epsilon=eps,
        position_embedding_type="rope", add_bias_linear=False, add_qkv_bias=False, activation="gelu",
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", False), attention_dropout=0.0,
        hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)), make_vocab_size_divisible_by=1)
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _unmapped_settings(cfg: TransformerConfig) -> Dict[str, Any]:
    """Decoder behaviours none of these families has (each must be off to write an HF config)."""
    return {"sliding_window": cfg.sliding_window, "post_norm": cfg.output_norm, "embed_layernorm": cfg.embed_layernorm,
            "input_embeds_norm": cfg.input_embeds_norm, "softcapping": cfg.attn_logit_softcapping
            or cfg.output_logit_softcapping, "attention_scale": cfg.attention_scale, "qkv_clip": cfg.qkv_clip,
            "multipliers": cfg.embedding_multiplier or cfg.residual_multiplier or cfg.output_multiplier_scale,
            "local_rotary_base": cfg.local_rotary_base}


def _base_hf_config(cfg: TransformerConfig, family: str, qk_norms: bool = False) -> Dict[str, Any]:
    """Shared HF keys; every family here has multi-head attention of ``hidden / heads`` channels (Phi: GQA);
    ``qk_norms``: the family may have per-head q/k norms (Phi, Persimmon)."""
    if cfg.qk_norm != "none" and not qk_norms:
        raise RegistryError(f"{family} has no q/k norms; the config sets --qk-layernorm")
    if cfg.normalization != "LayerNorm" or not cfg.layernorm_bias or cfg.non_parametric_norm:
        raise RegistryError(f"{family} needs --normalization LayerNorm with weight and bias")
    if cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size:
        raise RegistryError(f"{family} needs --kv-channels = hidden size / heads ({cfg.kv_channels} given)")
    if cfg.position_embedding_type != "rope" or cfg.no_rope_layers:
        raise RegistryError(f"{family} needs --position-embedding-type rope on every layer")
    extra = [name for name, value in _unmapped_settings(cfg).items() if value]
    if extra:
        raise RegistryError(f"{family} has no equivalent of the config's {', '.join(extra)}")
    return dict(vocab_size=cfg.vocab_size, tie_word_embeddings=not cfg.untie_embeddings_and_output_weights,
                initializer_range=cfg.init_method_std, use_cache=True,
                torch_dtype=str(cfg.params_dtype).replace("torch.", ""))


def _family_rope(flat: Dict[str, Any], family: str) -> Dict[str, Any]:
    """``_rope_settings`` with the family named in its error."""
    try:
        return _rope_settings(flat)
    except RegistryError as error:
        raise RegistryError(f"{family}: {error}") from None


def _neox_rope(hf: Dict[str, Any], default_partial: float, family: str) -> Dict[str, Any]:
    """RoPE of the GPT-NeoX style configs: ``rope_parameters`` (5.x) or ``rotary_emb_base``/``rotary_pct``
    (Hub checkpoints), with the family's default share of rotated dims."""
    params = dict(hf.get("rope_parameters") or {})
    theta = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    partial = params.get("partial_rotary_factor",
                         hf.get("partial_rotary_factor", hf.get("rotary_pct", default_partial)))
    return _family_rope({"rope_scaling": hf.get("rope_scaling"),
                         "rope_parameters": {**params, "rope_theta": theta, "partial_rotary_factor": partial}}, family)


def _neox_rope_to_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    """5.x ``rope_parameters`` (the partial factor always written: the families' defaults differ)."""
    out = _rope_to_hf(cfg)
    params = dict(out.pop("rope_scaling") or {"rope_type": "default"})
    params.update(rope_theta=out.pop("rope_theta"), partial_rotary_factor=cfg.rotary_percent)
    out.pop("partial_rotary_factor", None)
    return {**out, "rope_parameters": params}


def _check_rotary(cfg_kwargs: Dict[str, Any], family: str, rotated: int) -> None:
    """HF rotates ``int(head_dim * factor)`` dims; ours the same, which must be even."""
    head_dim = cfg_kwargs["kv_channels"]
    if rotated % 2 or not 0 < rotated <= head_dim:
        raise RegistryError(f"{family}: {rotated} rotated dims of head dim {head_dim} (must be even and > 0)")


# --------------------------------------------------------------------------- weight maps


def _rule(ours: str, hf: Sequence[str], transform: str = "copy", layer: str = "") -> WeightRule:
    """A rule; with ``layer`` (the HF layer prefix, ``{i}`` = layer) both names are per layer."""
    if not layer:
        return WeightRule(ours, tuple(hf), transform)
    return WeightRule("decoder.layers.{i}." + ours, tuple(layer + name for name in hf), transform)


def _with_bias(ours: str, hf: Sequence[str], transform: str = "copy", layer: str = "") -> Tuple[WeightRule, ...]:
    """Rules of a weight and its bias (``ours``/``hf`` without the ``.weight`` suffix)."""
    return tuple(_rule(f"{ours}.{kind}", [f"{name}.{kind}" for name in hf], transform, layer)
                 for kind in ("weight", "bias"))


def _stack(embedding: str, final_norm: str, output: str, layer: str, per_layer: Dict[str, Sequence[str]],
           qkv: Tuple[Sequence[str], str]) -> Tuple[WeightRule, ...]:
    """A full map: embeddings, per-layer norms/linears (``per_layer``: ours -> HF, weight and bias), fused q/k/v
    (HF names and transform), final norm, output layer (weight and bias)."""
    rules = [_rule("embedding.word_embeddings.weight", [embedding], "vocab")]
    for ours, hf in per_layer.items():
        rules.extend(_with_bias(ours, hf, layer=layer))
    rules.extend(_with_bias("self_attention.linear_qkv", qkv[0], qkv[1], layer=layer))
    rules.extend(_with_bias("decoder.final_layernorm", [final_norm]))
    rules.extend(_with_bias("output_layer", [output], "vocab"))
    return tuple(rules)


NEOX_LAYER = {"input_layernorm": ["input_layernorm"], "pre_mlp_layernorm": ["post_attention_layernorm"],
              "self_attention.linear_proj": ["attention.dense"], "mlp.linear_fc1": ["mlp.dense_h_to_4h"],
              "mlp.linear_fc2": ["mlp.dense_4h_to_h"]}
GPT_NEOX_WEIGHTS = _stack("gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm", "embed_out",
                          "gpt_neox.layers.{i}.", NEOX_LAYER, (["attention.query_key_value"], "qkv_interleaved"))
# the last layer's attention output bias is a tensor of its own (``dense_bias``)
GPT_NEOX_JAPANESE_WEIGHTS = _stack(
    "gpt_neox_japanese.embed_in.weight", "gpt_neox_japanese.final_layer_norm", "embed_out",
    "gpt_neox_japanese.layers.{i}.", {k: v for k, v in NEOX_LAYER.items() if k != "self_attention.linear_proj"},
    (["attention.query_key_value"], "qkv_interleaved")) + (
    _rule("self_attention.linear_proj.weight", ["attention.dense.weight"], layer="gpt_neox_japanese.layers.{i}."),
    _rule("self_attention.linear_proj.bias", ["attention.dense_bias"], layer="gpt_neox_japanese.layers.{i}."))
GPTJ_LAYER = {"input_layernorm": ["ln_1"], "self_attention.linear_proj": ["attn.out_proj"],
              "mlp.linear_fc1": ["mlp.fc_in"], "mlp.linear_fc2": ["mlp.fc_out"]}
GPTJ_WEIGHTS = _stack("transformer.wte.weight", "transformer.ln_f", "lm_head", "transformer.h.{i}.", GPTJ_LAYER,
                      (["attn.q_proj", "attn.k_proj", "attn.v_proj"], "fuse_rows"))
CODEGEN_WEIGHTS = _stack("transformer.wte.weight", "transformer.ln_f", "lm_head", "transformer.h.{i}.", GPTJ_LAYER,
                         (["attn.qkv_proj"], "qkv_codegen"))
PHI_LAYER = {"input_layernorm": ["input_layernorm"], "self_attention.linear_proj": ["self_attn.dense"],
             "mlp.linear_fc1": ["mlp.fc1"], "mlp.linear_fc2": ["mlp.fc2"],
             "self_attention.q_layernorm": ["self_attn.q_layernorm"],
             "self_attention.k_layernorm": ["self_attn.k_layernorm"]}
PHI_WEIGHTS = _stack("model.embed_tokens.weight", "model.final_layernorm", "lm_head", "model.layers.{i}.", PHI_LAYER,
                     (["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "fuse_rows"))
PERSIMMON_LAYER = {"input_layernorm": ["input_layernorm"], "pre_mlp_layernorm": ["post_attention_layernorm"],
                   "self_attention.linear_proj": ["self_attn.dense"], "mlp.linear_fc1": ["mlp.dense_h_to_4h"],
                   "mlp.linear_fc2": ["mlp.dense_4h_to_h"], "self_attention.q_layernorm": ["self_attn.q_layernorm"],
                   "self_attention.k_layernorm": ["self_attn.k_layernorm"]}
PERSIMMON_WEIGHTS = _stack("model.embed_tokens.weight", "model.final_layernorm", "lm_head", "model.layers.{i}.",
                           PERSIMMON_LAYER, (["self_attn.query_key_value"], "qkv_interleaved"))


def _falcon_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Falcon names its norms by the layout: ``ln_attn``/``ln_mlp`` (two norms in parallel),
    ``input_layernorm`` (one), ``input_layernorm``/``post_attention_layernorm`` (sequential)."""
    norms = {"input_layernorm": ["input_layernorm"]}
    if cfg.parallel_residual and not cfg.parallel_residual_shared_norm:
        norms = {"input_layernorm": ["ln_attn"], "pre_mlp_layernorm": ["ln_mlp"]}
    elif not cfg.parallel_residual:
        norms["pre_mlp_layernorm"] = ["post_attention_layernorm"]
    layer = {**norms, "self_attention.linear_proj": ["self_attention.dense"],
             "mlp.linear_fc1": ["mlp.dense_h_to_4h"], "mlp.linear_fc2": ["mlp.dense_4h_to_h"]}
    return _stack("transformer.word_embeddings.weight", "transformer.ln_f", "lm_head", "transformer.h.{i}.", layer,
                  (["self_attention.query_key_value"], "qkv_interleaved"))


# --------------------------------------------------------------------------- GPT-NeoX, GPT-NeoX-Japanese


def _gpt_neox_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GPT-NeoX (Pythia, GPT-NeoX-20B): parallel residual with two norms (or sequential), partial half-rotation
    RoPE (25% by default), per-head fused q/k/v; ``attention_bias=False`` keeps the MLP biases."""
    kwargs = _base_config(hf, layers=int(hf["num_hidden_layers"]), hidden=int(hf["hidden_size"]),
                          heads=int(hf["num_attention_heads"]), ffn=int(hf["intermediate_size"]),
                          positions=int(hf.get("max_position_embeddings", 2048)),
                          eps=float(hf.get("layer_norm_eps", 1e-5)))
    if hf.get("attention_bias", True):
        kwargs["add_bias_linear"] = True
    else:
        kwargs["add_mlp_bias"] = True
    kwargs.update(plain_activation(hf, "gpt_neox", "hidden_act", "gelu", PARALLEL_ACTIVATIONS))
    kwargs.update(_neox_rope(hf, 0.25, "gpt_neox"), parallel_residual=bool(hf.get("use_parallel_residual", True)))
    _check_rotary(kwargs, "gpt_neox", int(kwargs["kv_channels"] * kwargs.get("rotary_percent", 1.0)))
    return kwargs


def _gpt_neox_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _base_hf_config(cfg, "gpt_neox")
    if cfg.add_qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers or cfg.add_output_layer_bias:
        raise RegistryError("gpt_neox has biases on all linears or on the MLP only (--add-bias-linear or "
                            "--add-mlp-bias)")
    if not (cfg.add_bias_linear or cfg.add_mlp_bias) or cfg.parallel_residual_shared_norm or cfg.rope_interleaved:
        raise RegistryError("gpt_neox needs MLP biases, two norms per layer and half-rotation RoPE")
    return {**out, **_neox_rope_to_hf(cfg), "hidden_size": cfg.hidden_size, "intermediate_size": cfg.ffn_hidden_size,
            "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_attention_heads,
            "max_position_embeddings": cfg.max_position_embeddings, "layer_norm_eps": cfg.norm_epsilon,
            "hidden_act": plain_activation_to_hf(cfg, "gpt_neox", "gelu_new"), "attention_bias": cfg.add_bias_linear,
            "use_parallel_residual": cfg.parallel_residual}


def _gpt_neox_japanese_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GPT-NeoX-Japanese: sequential pre-norm layers without linear biases but for the last layer's attention
    output projection (``dense_bias``); the MLP is ``intermediate_multiple_size`` x hidden wide; tied by default."""
    hidden = int(hf["hidden_size"])
    layers = int(hf["num_hidden_layers"])
    kwargs = _base_config(hf, layers=layers, hidden=hidden, heads=int(hf["num_attention_heads"]),
                          ffn=int(hidden * hf.get("intermediate_multiple_size", 4)),
                          positions=int(hf.get("max_position_embeddings", 2048)),
                          eps=float(hf.get("layer_norm_eps", 1e-5)))
    kwargs.update(plain_activation(hf, "gpt_neox_japanese", "hidden_act", "gelu", PARALLEL_ACTIVATIONS))
    kwargs.update(_neox_rope(hf, 1.0, "gpt_neox_japanese"), dense_bias_layers=(layers - 1,),
                  untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", True))
    _check_rotary(kwargs, "gpt_neox_japanese", int(kwargs["kv_channels"] * kwargs.get("rotary_percent", 1.0)))
    return kwargs


def _gpt_neox_japanese_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _base_hf_config(cfg, "gpt_neox_japanese")
    if (cfg.add_bias_linear or cfg.add_qkv_bias or cfg.add_dense_bias or cfg.add_mlp_bias or cfg.add_output_layer_bias
            or cfg.dense_bias_layers != (cfg.num_layers - 1,) or cfg.parallel_residual or cfg.rope_interleaved):
        raise RegistryError("gpt_neox_japanese needs --dense-bias-layers <last layer> and no other bias, "
                            "sequential layers and half-rotation RoPE")
    if cfg.ffn_hidden_size % cfg.hidden_size:
        raise RegistryError(f"gpt_neox_japanese needs --ffn-hidden-size a multiple of --hidden-size "
                            f"({cfg.ffn_hidden_size} given)")
    return {**out, **_neox_rope_to_hf(cfg), "hidden_size": cfg.hidden_size,
            "intermediate_multiple_size": cfg.ffn_hidden_size // cfg.hidden_size,
            "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_attention_heads,
            "max_position_embeddings": cfg.max_position_embeddings, "layer_norm_eps": cfg.norm_epsilon,
            "hidden_act": plain_activation_to_hf(cfg, "gpt_neox_japanese", "gelu_new")}


# --------------------------------------------------------------------------- GPT-J, CodeGen


def _gptj_config(hf: Dict[str, Any], family: str = "gptj") -> Dict[str, Any]:
    """GPT-J: one norm feeding attention and MLP in parallel, interleaved RoPE on the first ``rotary_dim`` dims
    (base 10000), biases on the MLP and the untied output layer only."""
    hidden, heads = int(hf.get("n_embd", hf.get("hidden_size"))), int(hf.get("n_head", hf.get("num_attention_heads")))
    kwargs = _base_config(hf, layers=int(hf.get("n_layer", hf.get("num_hidden_layers"))), hidden=hidden, heads=heads,
                          ffn=int(hf.get("n_inner") or 4 * hidden), positions=int(hf.get("n_positions", 2048)),
                          eps=float(hf.get("layer_norm_epsilon", 1e-5)))
    if hf.get("tie_word_embeddings", False):
        raise RegistryError(f"{family} tie_word_embeddings=True is not supported (its lm_head has a bias)")
    rotary_dim = hf.get("rotary_dim")
    if rotary_dim is None:
        raise RegistryError(f"{family} rotary_dim=None is not supported (transformers rotates hidden_size dims)")
    _check_rotary(kwargs, family, int(rotary_dim))
    percent = int(rotary_dim) / kwargs["kv_channels"]
    if int(kwargs["kv_channels"] * percent) != int(rotary_dim):
        raise RegistryError(f"{family} rotary_dim={rotary_dim} is not representable as --rotary-percent")
    kwargs.update(plain_activation(hf, family, "activation_function", "gelu_new", PARALLEL_ACTIVATIONS))
    kwargs.update(rotary_base=10000.0, rotary_percent=percent, rope_interleaved=True, add_mlp_bias=True,
                  add_output_layer_bias=True, parallel_residual=True, parallel_residual_shared_norm=True)
    return kwargs


def _gptj_hf_config(cfg: TransformerConfig, family: str = "gptj") -> Dict[str, Any]:
    out = _base_hf_config(cfg, family)
    if (cfg.add_bias_linear or cfg.add_qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers
            or not (cfg.add_mlp_bias and cfg.add_output_layer_bias)):
        raise RegistryError(f"{family} needs --add-mlp-bias --add-output-layer-bias and no other bias")
    if (not (cfg.parallel_residual_shared_norm and cfg.rope_interleaved) or cfg.rotary_base != 10000.0
            or cfg.rope_scaling_type is not None):
        raise RegistryError(f"{family} needs --parallel-residual --parallel-residual-shared-norm --rope-interleaved "
                            "and --rotary-base 10000 without --rope-scaling-type")
    return {**out, "n_embd": cfg.hidden_size, "n_layer": cfg.num_layers, "n_head": cfg.num_attention_heads,
            "n_inner": cfg.ffn_hidden_size, "n_positions": cfg.max_position_embeddings, "rotary_dim": cfg.rotary_dim,
            "layer_norm_epsilon": cfg.norm_epsilon,
            "activation_function": plain_activation_to_hf(cfg, family, "gelu_new")}


def _codegen_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """CodeGen: GPT-J's layer with q/v/k fused in 4 blocks (``qkv_codegen``)."""
    kwargs = _gptj_config(hf, "codegen")
    if kwargs["hidden_size"] % 4:
        raise RegistryError(f"codegen n_embd={kwargs['hidden_size']} is not a multiple of its mp_num (4)")
    return kwargs


def _codegen_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return _gptj_hf_config(cfg, "codegen")  # n_ctx is unused by the model: the original's is kept


# --------------------------------------------------------------------------- Phi, Persimmon


def _llama_style_config(hf: Dict[str, Any], family: str, default_partial: float) -> Dict[str, Any]:
    """Phi's and Persimmon's shared keys: LayerNorm with bias, partial half-rotation RoPE, per-head LayerNorm
    q/k norms with bias (``qk_layernorm``), biases on every linear."""
    heads = int(hf["num_attention_heads"])
    if hf.get("head_dim") and int(hf["head_dim"]) * heads != int(hf["hidden_size"]):
        raise RegistryError(f"{family} head_dim={hf['head_dim']} other than hidden_size / num_attention_heads is not "
                            "supported (its q/k norms are hidden_size / heads wide)")
    kwargs = _base_config(hf, layers=int(hf["num_hidden_layers"]), hidden=int(hf["hidden_size"]), heads=heads,
                          ffn=int(hf["intermediate_size"]), positions=int(hf.get("max_position_embeddings", 2048)),
                          eps=float(hf.get("layer_norm_eps", 1e-5)))
    flat = {"rope_theta": hf.get("rope_theta", 10000.0), "rope_scaling": hf.get("rope_scaling"),
            "rope_parameters": hf.get("rope_parameters")}
    rope = _family_rope(flat, family)
    rope.setdefault("rotary_percent", float(hf.get("partial_rotary_factor", default_partial)))
    kwargs.update(rope, add_bias_linear=True, qk_norm="per_head" if hf.get("qk_layernorm", False) else "none")
    _check_rotary(kwargs, family, int(kwargs["kv_channels"] * kwargs["rotary_percent"]))
    return kwargs


def _llama_style_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    out = _base_hf_config(cfg, family, qk_norms=True)
    if not cfg.add_bias_linear or cfg.rope_interleaved or cfg.qk_norm not in ("none", "per_head") \
            or cfg.apply_layernorm_1p:
        raise RegistryError(f"{family} needs --add-bias-linear, half-rotation RoPE and plain per-head q/k norms")
    rope = _rope_to_hf(cfg)
    rope["partial_rotary_factor"] = cfg.rotary_percent
    return {**out, **rope, "hidden_size": cfg.hidden_size, "intermediate_size": cfg.ffn_hidden_size,
            "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_attention_heads,
            "max_position_embeddings": cfg.max_position_embeddings, "layer_norm_eps": cfg.norm_epsilon,
            "qk_layernorm": cfg.qk_norm == "per_head"}


def _phi_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Phi (1, 1.5, 2): one norm feeding attention and MLP in parallel, biases everywhere including the untied
    output layer, optional grouped-query attention."""
    if hf.get("tie_word_embeddings", False):
        raise RegistryError("phi tie_word_embeddings=True is not supported (its lm_head has a bias)")
    kwargs = _llama_style_config(hf, "phi", 0.5)
    kwargs.update(plain_activation(hf, "phi", "hidden_act", "gelu_new", PARALLEL_ACTIVATIONS),
                  num_query_groups=int(hf.get("num_key_value_heads") or kwargs["num_attention_heads"]),
                  add_output_layer_bias=True, parallel_residual=True, parallel_residual_shared_norm=True)
    return kwargs


def _phi_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if not (cfg.add_output_layer_bias and cfg.parallel_residual_shared_norm):
        raise RegistryError("phi needs --add-output-layer-bias --parallel-residual --parallel-residual-shared-norm")
    return {**_llama_style_hf_config(cfg, "phi"), "num_key_value_heads": cfg.num_query_groups,
            "hidden_act": plain_activation_to_hf(cfg, "phi", "gelu_new")}


def _persimmon_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Persimmon: sequential layers, ReLU-squared MLP, per-head fused q/k/v, q/k LayerNorms (on by default)."""
    kwargs = _llama_style_config({**hf, "qk_layernorm": hf.get("qk_layernorm", True)}, "persimmon", 0.5)
    kwargs.update(plain_activation(hf, "persimmon", "hidden_act", "relu2", PARALLEL_ACTIVATIONS))
    return kwargs


def _persimmon_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.parallel_residual or cfg.add_output_layer_bias:
        raise RegistryError("persimmon has sequential layers and no output layer bias")
    return {**_llama_style_hf_config(cfg, "persimmon"),
            "hidden_act": plain_activation_to_hf(cfg, "persimmon", "gelu_new")}


# --------------------------------------------------------------------------- Falcon


def _falcon_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Falcon: the original layout (``multi_query``: one K/V head, or per-head fused q/k/v; one norm in parallel,
    or sequential with ``parallel_attn=False`` as Falcon-RW) and the new decoder architecture (per-KV-group fused
    q/k/v, one or two norms in parallel); biases on every linear or none."""
    if hf.get("alibi", False):
        raise RegistryError("falcon alibi=True is not supported (ALiBi positions; use a RoPE Falcon)")
    hidden = int(hf.get("hidden_size", hf.get("n_embed", 4544)))
    heads = int(hf.get("num_attention_heads", hf.get("n_head", 71)))
    kwargs = _base_config(hf, layers=int(hf.get("num_hidden_layers", hf.get("n_layer", 32))), hidden=hidden,
                          heads=heads, ffn=int(hf.get("ffn_hidden_size") or 4 * hidden),
                          positions=int(hf.get("max_position_embeddings", 2048)),
                          eps=float(hf.get("layer_norm_epsilon", 1e-5)))
    kwargs["untie_embeddings_and_output_weights"] = not hf.get("tie_word_embeddings", True)
    kv_heads = int(hf.get("num_kv_heads") or hf.get("n_head_kv") or heads)
    parallel, norms = bool(hf.get("parallel_attn", True)), hf.get("num_ln_in_parallel_attn")
    if hf.get("new_decoder_architecture", False):
        if not parallel:
            raise RegistryError("falcon new_decoder_architecture=True with parallel_attn=False is not supported "
                                "(transformers cannot run it)")
        kwargs.update(num_query_groups=kv_heads, parallel_residual=True,
                      parallel_residual_shared_norm=(norms or 2) == 1)
    else:
        if norms not in (None, 1):
            raise RegistryError(f"falcon num_ln_in_parallel_attn={norms} needs new_decoder_architecture=True")
        multi_query = bool(hf.get("multi_query", True))
        if not multi_query and kv_heads != heads:
            raise RegistryError(f"falcon num_kv_heads={kv_heads} needs new_decoder_architecture=True")
        kwargs.update(num_query_groups=1 if multi_query else heads, parallel_residual=parallel,
                      parallel_residual_shared_norm=parallel)
    kwargs.update(plain_activation(hf, "falcon", "activation", "gelu", PARALLEL_ACTIVATIONS),
                  add_bias_linear=bool(hf.get("bias", False)))
    flat = {"rope_theta": hf.get("rope_theta", 10000.0), "rope_scaling": hf.get("rope_scaling"),
            "rope_parameters": hf.get("rope_parameters")}
    rope = _family_rope(flat, "falcon")
    if rope.get("rotary_percent", 1.0) != 1.0:
        raise RegistryError("falcon partial_rotary_factor is not supported (Falcon rotates the whole head)")
    kwargs.update(rope)
    return kwargs


def _falcon_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _base_hf_config(cfg, "falcon")
    if cfg.add_qkv_bias or cfg.add_dense_bias or cfg.add_mlp_bias or cfg.add_output_layer_bias or cfg.dense_bias_layers:
        raise RegistryError("falcon has biases on every linear (--add-bias-linear) or none")
    if cfg.rope_interleaved or cfg.rotary_percent != 1.0:
        raise RegistryError("falcon needs half-rotation RoPE on the whole head")
    heads, groups = cfg.num_attention_heads, cfg.num_query_groups
    layout: Dict[str, Any]
    if cfg.parallel_residual and (groups not in (1, heads) or not cfg.parallel_residual_shared_norm):
        layout = dict(new_decoder_architecture=True, multi_query=True, parallel_attn=True, num_kv_heads=groups,
                      num_ln_in_parallel_attn=1 if cfg.parallel_residual_shared_norm else 2)
    elif cfg.parallel_residual or groups in (1, heads):
        if groups == 1 and heads == 1:
            raise RegistryError("falcon with one attention head is ambiguous (multi_query or not)")
        # transformers ignores num_kv_heads here; heads is FalconConfig's default
        layout = dict(new_decoder_architecture=False, multi_query=groups == 1, parallel_attn=cfg.parallel_residual,
                      num_kv_heads=heads, num_ln_in_parallel_attn=None)
    else:
        raise RegistryError("falcon sequential layers (parallel_attn=False) need one or all KV heads")
    rope = _rope_to_hf(cfg)
    return {**out, **layout, "rope_theta": rope["rope_theta"], "rope_scaling": rope["rope_scaling"],
            "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_layers, "num_attention_heads": heads,
            "ffn_hidden_size": cfg.ffn_hidden_size, "max_position_embeddings": cfg.max_position_embeddings,
            "layer_norm_epsilon": cfg.norm_epsilon, "activation": plain_activation_to_hf(cfg, "falcon", "gelu_new"),
            "bias": cfg.add_bias_linear, "alibi": False}


register(Family("gpt_neox", "gpt_neox", "GPTNeoXForCausalLM", _gpt_neox_config, _gpt_neox_hf_config,
                GPT_NEOX_WEIGHTS))
register(Family("gpt_neox_japanese", "gpt_neox_japanese", "GPTNeoXJapaneseForCausalLM", _gpt_neox_japanese_config,
                _gpt_neox_japanese_hf_config, GPT_NEOX_JAPANESE_WEIGHTS))
register(Family("gptj", "gptj", "GPTJForCausalLM", _gptj_config, _gptj_hf_config, GPTJ_WEIGHTS))
register(Family("codegen", "codegen", "CodeGenForCausalLM", _codegen_config, _codegen_hf_config, CODEGEN_WEIGHTS))
register(Family("phi", "phi", "PhiForCausalLM", _phi_config, _phi_hf_config, PHI_WEIGHTS))
register(Family("persimmon", "persimmon", "PersimmonForCausalLM", _persimmon_config, _persimmon_hf_config,
                PERSIMMON_WEIGHTS))
register(Family("falcon", "falcon", "FalconForCausalLM", _falcon_config, _falcon_hf_config,
                weights_for=_falcon_weights))

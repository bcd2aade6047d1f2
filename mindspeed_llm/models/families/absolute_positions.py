"""Families with absolute position embeddings: GPT-2, GPTBigCode, GPT-Neo, OPT, BioGpt, XGLM and CTRL.

All seven are pre-norm LayerNorm decoders with a non-gated MLP and absolute
positions added to the word embeddings:

* GPT-2 (``gpt2``): learned positions (``--position-embedding-type
  learned_absolute``), GELU-tanh, biases everywhere, Conv1D weights stored
  ``[in, out]`` (the ``conv1d`` transform); ``c_attn`` columns are ``[q; k; v]``.
* GPTBigCode (``gpt_bigcode``, StarCoder/SantaCoder): GPT-2 with ``nn.Linear``
  weights and one fused ``c_attn`` whose rows are ``[q; k; v]`` with one KV head
  (``multi_query``) or per head ``[q, k, v]`` (both are the per-group interleaved
  layout, ``qkv_interleaved``, with 1 or ``heads`` groups).
* GPT-Neo (``gpt_neo``): unscaled attention (``--softmax-scale 1.0``), q/k/v
  without bias and ``out_proj`` and the MLP with bias (``--add-dense-bias
  --add-mlp-bias``), ``attention_layers`` local (window ``window_size``) or global
  (``--sliding-window`` with ``--full-attention-layers``).
* OPT (``opt``): ReLU, learned positions whose table has 2 leading rows
  (``--position-embedding-offset 2``); positions come from the attention mask,
  which is all ones without padding, so they are ``0..s-1``.
* BioGpt (``biogpt``): OPT's positions, GELU, word embeddings times
  sqrt(hidden) (``--input-embeds-norm``); its LayerNorms use torch's default eps
  1e-5 whatever ``layer_norm_eps`` says (transformers ignores that key).
* XGLM (``xglm``): fixed sinusoidal positions with offset 2
  (``--position-embedding-type sinusoidal``), GELU, embeddings times sqrt(d_model).
* CTRL (``ctrl``): sinusoidal positions at tensor2tensor's frequencies (``--sinusoidal-t2t-frequencies``, no
  offset) added to the word embeddings times sqrt(n_embd), ReLU, LayerNorms of eps 1e-6 (transformers hard-codes it
  in the layers: ``layer_norm_epsilon`` must say so), ``lm_head`` tied with a bias of its own
  (``--add-output-layer-bias``); tensors ``transformer.w``, ``transformer.h.{i}.multi_head_attention.W{q,k,v}`` /
  ``dense``, ``layernorm1`` / ``layernorm2``, ``ffn.0`` / ``ffn.2``, ``transformer.layernorm``.

The HF configs written back keep the source's dropout keys (and BioGpt's unused ``layer_norm_eps``).
Each tied family ties ``lm_head`` (BioGpt: ``output_projection``) to the word embeddings by default.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _dtype_name, plain_activation,
                                           plain_activation_to_hf, register, require_config)

# the non-gated activations these families use (registry.PLAIN_ACTIVATIONS names)
LEARNED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu")
FAIRSEQ_POSITION_OFFSET = 2  # OPT, BioGpt and XGLM keep two leading rows in their position tables


def _refuse(hf: Dict[str, Any], name: str, **unsupported: Any) -> None:
    """RegistryError when ``hf[key]`` has the unsupported value (``key=value``)."""
    for key, value in unsupported.items():
        if key in hf and hf[key] == value:
            raise RegistryError(f"{name} {key}={value} is not supported")


def _absolute_config(hf: Dict[str, Any], *, layers: int, hidden: int, heads: int, ffn: int, positions: int,
                     eps: float, init_std: float, tied_default: bool = True) -> Dict[str, Any]:
    """The fields these families share: LayerNorm pre-norm, biases everywhere, learned positions, no dropout."""
    kwargs: Dict[str, Any] = dict(
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_query_groups=heads,
        kv_channels=hidden // heads, ffn_hidden_size=ffn, vocab_size=int(hf["vocab_size"]),
        max_position_embeddings=positions, normalization="LayerNorm", norm_epsilon=eps,
        position_embedding_type="learned_absolute", add_bias_linear=True, activation="gelu",
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", tied_default),
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=init_std, make_vocab_size_divisible_by=1)
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _expect(cfg: TransformerConfig, name: str, **expected: Any) -> None:
    """:func:`require_config`, and a head dim of hidden / heads (these HF configs have no head dim key)."""
    require_config(cfg, name, **expected)
    if cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size:
        raise RegistryError(f"{name} cannot express kv_channels={cfg.kv_channels} (needs hidden_size / heads)")


# Fields every family here needs as is (a decoder feature the HF model lacks).
PLAIN = dict(normalization="LayerNorm", layernorm_bias=True, qk_norm="none", post_norm=False, post_norm_only=False,
             parallel_residual=False,
             apply_layernorm_1p=False, embed_layernorm=False, embedding_multiplier=None, residual_multiplier=None,
             output_multiplier_scale=None, attn_logit_softcapping=None, output_logit_softcapping=None,
             query_pre_attn_scalar=None, qkv_clip=None, add_output_layer_bias=False, non_parametric_norm=False,
             sliding_window=None)


def _base_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return dict(vocab_size=cfg.vocab_size, tie_word_embeddings=not cfg.untie_embeddings_and_output_weights,
                torch_dtype=str(cfg.params_dtype).replace("torch.", ""), use_cache=True)


def _rules(prefix: str, layer: str, names: Sequence[Tuple[str, str, str]], *top: WeightRule) -> Tuple[WeightRule, ...]:
    """Layer rules ``(ours, HF suffix, transform)`` under ``prefix + layer`` (``{i}`` = layer), plus ``top``."""
    out = [WeightRule("decoder.layers.{i}." + ours, (prefix + layer + hf,), transform) for ours, hf, transform in names]
    return tuple(top) + tuple(out)


def _with_biases(names: Sequence[Tuple[str, str, str]]) -> List[Tuple[str, str, str]]:
    """Each ``.weight`` rule and its ``.bias`` twin (a bias rule of a Conv1D weight is a copy)."""
    out = []
    for ours, hf, transform in names:
        out.append((ours + ".weight", hf + ".weight", transform))
        out.append((ours + ".bias", hf + ".bias", "copy" if transform == "conv1d" else transform))
    return out


# --------------------------------------------------------------------------- GPT-2 and GPTBigCode


def _gpt2_shape(hf: Dict[str, Any], name: str) -> Dict[str, Any]:
    _refuse(hf, name, add_cross_attention=True, scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True)
    hidden = int(hf["n_embd"])
    kwargs = _absolute_config(hf, layers=int(hf["n_layer"]), hidden=hidden, heads=int(hf["n_head"]),
                              ffn=int(hf.get("n_inner") or 4 * hidden), positions=int(hf["n_positions"]),
                              eps=float(hf.get("layer_norm_epsilon", 1e-5)),
                              init_std=float(hf.get("initializer_range", 0.02)))
    if not hf.get("scale_attn_weights", True):
        kwargs["softmax_scale"] = 1.0
    return kwargs


def _gpt2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_gpt2_shape(hf, "gpt2"),
            **plain_activation(hf, "gpt2", "activation_function", "gelu_new", LEARNED_ACTIVATIONS)}


def _gpt2_hf_shape(cfg: TransformerConfig, name: str, tanh_name: str) -> Dict[str, Any]:
    if cfg.softmax_scale not in (None, 1.0):
        raise RegistryError(f"{name} cannot express softmax_scale={cfg.softmax_scale} (scale_attn_weights: 1/sqrt(hd) "
                            "or 1.0)")
    _expect(cfg, name, **PLAIN, add_bias_linear=True, position_embedding_type="learned_absolute",
            position_embedding_offset=0)
    return {**_base_hf(cfg), "n_embd": cfg.hidden_size, "n_layer": cfg.num_layers, "n_head": cfg.num_attention_heads,
            "n_inner": cfg.ffn_hidden_size, "n_positions": cfg.max_position_embeddings,
            "layer_norm_epsilon": cfg.norm_epsilon, "initializer_range": cfg.init_method_std,
            "activation_function": plain_activation_to_hf(cfg, name, tanh_name),
            "scale_attn_weights": cfg.softmax_scale is None,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "add_cross_attention": False}


def _gpt2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _expect(cfg, "gpt2", num_query_groups=cfg.num_attention_heads)
    return _gpt2_hf_shape(cfg, "gpt2", "gelu_new")


def _gpt_bigcode_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    kwargs = {**_gpt2_shape(hf, "gpt_bigcode"),
              **plain_activation(hf, "gpt_bigcode", "activation_function", "gelu_pytorch_tanh", LEARNED_ACTIVATIONS)}
    if hf.get("multi_query", True):
        kwargs["num_query_groups"] = 1
    return kwargs


def _gpt_bigcode_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.num_query_groups not in (1, cfg.num_attention_heads):
        raise RegistryError(f"gpt_bigcode has 1 KV head (multi_query) or one per head, not num_query_groups="
                            f"{cfg.num_query_groups}")
    return {**_gpt2_hf_shape(cfg, "gpt_bigcode", "gelu_pytorch_tanh"), "multi_query": cfg.num_query_groups == 1,
            "attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True}


GPT2_LAYER = _with_biases([("input_layernorm", "ln_1", "copy"), ("self_attention.linear_qkv", "attn.c_attn", "conv1d"),
                           ("self_attention.linear_proj", "attn.c_proj", "conv1d"),
                           ("pre_mlp_layernorm", "ln_2", "copy"), ("mlp.linear_fc1", "mlp.c_fc", "conv1d"),
                           ("mlp.linear_fc2", "mlp.c_proj", "conv1d")])
GPT2_TOP = (WeightRule("embedding.word_embeddings.weight", ("transformer.wte.weight",), "vocab"),
            WeightRule("embedding.position_embeddings.weight", ("transformer.wpe.weight",)),
            WeightRule("decoder.final_layernorm.weight", ("transformer.ln_f.weight",)),
            WeightRule("decoder.final_layernorm.bias", ("transformer.ln_f.bias",)),
            WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"))
GPT2_WEIGHTS = _rules("transformer.h.", "{i}.", GPT2_LAYER, *GPT2_TOP)
# nn.Linear weights; c_attn rows per KV group [q heads, k, v] (1 group: multi_query; heads groups: per head)
GPT_BIGCODE_WEIGHTS = _rules("transformer.h.", "{i}.", [
    (ours, hf, "qkv_interleaved" if hf.startswith("attn.c_attn") else "copy") for ours, hf, _ in GPT2_LAYER], *GPT2_TOP)


# --------------------------------------------------------------------------- GPT-Neo


def _gpt_neo_layer_types(hf: Dict[str, Any]) -> List[str]:
    types = hf.get("attention_layers")
    if not types:
        spec = hf.get("attention_types") or [[["global", "local"], 12]]
        types = [kind for kinds, repeat in spec for _ in range(int(repeat)) for kind in kinds]
    unknown = sorted(set(types) - {"global", "local"})
    if unknown:
        raise RegistryError(f"gpt_neo attention type(s) {unknown} are not supported (global, local)")
    return list(types)


def _gpt_neo_attention_types(types: List[str]) -> List[Any]:
    """``attention_types`` in its compact form: the shortest repeating pattern and its count."""
    for period in range(1, len(types) + 1):
        if len(types) % period == 0 and types == types[:period] * (len(types) // period):
            return [[types[:period], len(types) // period]]
    return [[types, 1]]


def _gpt_neo_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hidden, layers = int(hf["hidden_size"]), int(hf["num_layers"])
    types = _gpt_neo_layer_types(hf)
    if len(types) != layers:
        raise RegistryError(f"gpt_neo attention_types give {len(types)} layers, num_layers is {layers}")
    kwargs = _absolute_config(hf, layers=layers, hidden=hidden, heads=int(hf["num_heads"]),
                              ffn=int(hf.get("intermediate_size") or 4 * hidden),
                              positions=int(hf["max_position_embeddings"]),
                              eps=float(hf.get("layer_norm_epsilon", 1e-5)),
                              init_std=float(hf.get("initializer_range", 0.02)))
    local = "local" in types
    return {**kwargs, **plain_activation(hf, "gpt_neo", "activation_function", "gelu_new", LEARNED_ACTIVATIONS),
            "add_bias_linear": False,
            "add_dense_bias": True, "add_mlp_bias": True, "softmax_scale": 1.0,
            "sliding_window": int(hf.get("window_size", 256)) if local else None,
            "full_attention_layers": tuple(i for i, kind in enumerate(types) if kind == "global") if local else ()}


def _gpt_neo_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    plain = {k: v for k, v in PLAIN.items() if k != "sliding_window"}
    _expect(cfg, "gpt_neo", **plain, add_bias_linear=False, add_qkv_bias=False, add_dense_bias=True,
            add_mlp_bias=True, softmax_scale=1.0, position_embedding_type="learned_absolute",
            position_embedding_offset=0, num_query_groups=cfg.num_attention_heads, sliding_window_pattern=None)
    types = ["local" if cfg.layer_window(i) is not None else "global" for i in range(cfg.num_layers)]
    return {**_base_hf(cfg), "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers,
            "num_heads": cfg.num_attention_heads, "intermediate_size": cfg.ffn_hidden_size,
            "max_position_embeddings": cfg.max_position_embeddings, "layer_norm_epsilon": cfg.norm_epsilon,
            "initializer_range": cfg.init_method_std,
            "activation_function": plain_activation_to_hf(cfg, "gpt_neo", "gelu_new"),
            "attention_types": _gpt_neo_attention_types(types), "attention_layers": types,
            **({"window_size": cfg.sliding_window} if cfg.sliding_window is not None else {})}


GPT_NEO_WEIGHTS = _rules("transformer.h.", "{i}.", [
    ("input_layernorm.weight", "ln_1.weight", "copy"), ("input_layernorm.bias", "ln_1.bias", "copy"),
    ("self_attention.linear_proj.weight", "attn.attention.out_proj.weight", "copy"),
    ("self_attention.linear_proj.bias", "attn.attention.out_proj.bias", "copy"),
    ("pre_mlp_layernorm.weight", "ln_2.weight", "copy"), ("pre_mlp_layernorm.bias", "ln_2.bias", "copy"),
    *_with_biases([("mlp.linear_fc1", "mlp.c_fc", "copy"), ("mlp.linear_fc2", "mlp.c_proj", "copy")])],
    *GPT2_TOP, WeightRule("decoder.layers.{i}.self_attention.linear_qkv.weight",
                          tuple(f"transformer.h.{{i}}.attn.attention.{p}_proj.weight" for p in "qkv"), "fuse_rows"))


# --------------------------------------------------------------------------- OPT, BioGpt, XGLM (fairseq layout)


def _fairseq_layer(prefix: str) -> Tuple[WeightRule, ...]:
    """fairseq decoder layers: q/k/v/out_proj, self_attn_layer_norm, fc1, fc2, final_layer_norm, all with biases."""
    names = _with_biases([("input_layernorm", "self_attn_layer_norm", "copy"),
                          ("self_attention.linear_proj", "self_attn.out_proj", "copy"),
                          ("pre_mlp_layernorm", "final_layer_norm", "copy"), ("mlp.linear_fc1", "fc1", "copy"),
                          ("mlp.linear_fc2", "fc2", "copy")])
    qkv = tuple(WeightRule(f"decoder.layers.{{i}}.self_attention.linear_qkv.{kind}",
                           tuple(f"{prefix}layers.{{i}}.self_attn.{p}_proj.{kind}" for p in "qkv"), "fuse_rows")
                for kind in ("weight", "bias"))
    return _rules(prefix + "layers.", "{i}.", names, *qkv)


def _fairseq_top(prefix: str, final_norm: str, output: str, positions: bool = True) -> Tuple[WeightRule, ...]:
    rules = [WeightRule("embedding.word_embeddings.weight", (prefix + "embed_tokens.weight",), "vocab"),
             WeightRule("decoder.final_layernorm.weight", (prefix + final_norm + ".weight",)),
             WeightRule("decoder.final_layernorm.bias", (prefix + final_norm + ".bias",)),
             WeightRule("output_layer.weight", (output,), "vocab")]
    if positions:
        rules.append(WeightRule("embedding.position_embeddings.weight", (prefix + "embed_positions.weight",)))
    return tuple(rules)


def _opt_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    _refuse(hf, "opt", do_layer_norm_before=False, _remove_final_layer_norm=True)
    hidden = int(hf["hidden_size"])
    proj = hf.get("word_embed_proj_dim")
    if proj is not None and int(proj) != hidden:
        raise RegistryError(f"opt word_embed_proj_dim={proj} != hidden_size={hidden} (project_in/out) is not supported")
    kwargs = _absolute_config(hf, layers=int(hf["num_hidden_layers"]), hidden=hidden,
                              heads=int(hf["num_attention_heads"]), ffn=int(hf["ffn_dim"]),
                              positions=int(hf["max_position_embeddings"]), eps=1e-5,
                              init_std=float(hf.get("init_std", 0.02)))
    return {**kwargs, **plain_activation(hf, "opt", "activation_function", "relu", LEARNED_ACTIVATIONS),
            "position_embedding_offset": FAIRSEQ_POSITION_OFFSET, "add_bias_linear": bool(hf.get("enable_bias", True)),
            "non_parametric_norm": not hf.get("layer_norm_elementwise_affine", True)}


def _opt_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    plain = {k: v for k, v in PLAIN.items() if k != "non_parametric_norm"}
    _expect(cfg, "opt", **plain, add_qkv_bias=False, add_dense_bias=False, add_mlp_bias=False, norm_epsilon=1e-5,
            position_embedding_type="learned_absolute", position_embedding_offset=FAIRSEQ_POSITION_OFFSET,
            num_query_groups=cfg.num_attention_heads, softmax_scale=None)
    return {**_base_hf(cfg), "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_layers,
            "num_attention_heads": cfg.num_attention_heads, "ffn_dim": cfg.ffn_hidden_size,
            "max_position_embeddings": cfg.max_position_embeddings, "init_std": cfg.init_method_std,
            "activation_function": plain_activation_to_hf(cfg, "opt", "gelu_new"), "do_layer_norm_before": True,
            "_remove_final_layer_norm": False, "word_embed_proj_dim": cfg.hidden_size,
            "enable_bias": cfg.add_bias_linear, "layer_norm_elementwise_affine": not cfg.non_parametric_norm}


def _biogpt_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    kwargs = _absolute_config(hf, layers=int(hf["num_hidden_layers"]), hidden=int(hf["hidden_size"]),
                              heads=int(hf["num_attention_heads"]), ffn=int(hf["intermediate_size"]),
                              positions=int(hf["max_position_embeddings"]), eps=1e-5,  # nn.LayerNorm's default
                              init_std=float(hf.get("initializer_range", 0.02)))
    return {**kwargs, **plain_activation(hf, "biogpt", "hidden_act", "gelu", LEARNED_ACTIVATIONS),
            "position_embedding_offset": FAIRSEQ_POSITION_OFFSET,
            "input_embeds_norm": bool(hf.get("scale_embedding", True))}


def _biogpt_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _expect(cfg, "biogpt", **PLAIN, add_bias_linear=True, norm_epsilon=1e-5, position_embedding_type="learned_absolute",
            position_embedding_offset=FAIRSEQ_POSITION_OFFSET, num_query_groups=cfg.num_attention_heads,
            softmax_scale=None)
    return {**_base_hf(cfg), "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_layers,
            "num_attention_heads": cfg.num_attention_heads, "intermediate_size": cfg.ffn_hidden_size,
            "max_position_embeddings": cfg.max_position_embeddings, "initializer_range": cfg.init_method_std,
            "hidden_act": plain_activation_to_hf(cfg, "biogpt", "gelu_new"), "scale_embedding": cfg.input_embeds_norm}


def _xglm_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    _refuse(hf, "xglm", add_cross_attention=True)
    pad = hf.get("pad_token_id", 1)
    if pad is not None and int(pad) >= FAIRSEQ_POSITION_OFFSET:  # XGLM zeroes the table row padding_idx
        raise RegistryError(f"xglm pad_token_id={pad} zeroes sinusoidal position row {pad} (position "
                            f"{int(pad) - FAIRSEQ_POSITION_OFFSET}); only pad ids below {FAIRSEQ_POSITION_OFFSET} "
                            "are supported")
    kwargs = _absolute_config(hf, layers=int(hf["num_layers"]), hidden=int(hf["d_model"]),
                              heads=int(hf["attention_heads"]), ffn=int(hf["ffn_dim"]),
                              positions=int(hf["max_position_embeddings"]), eps=1e-5,  # nn.LayerNorm's default
                              init_std=float(hf.get("init_std", 0.02)))
    return {**kwargs, **plain_activation(hf, "xglm", "activation_function", "gelu", LEARNED_ACTIVATIONS),
            "position_embedding_type": "sinusoidal", "position_embedding_offset": FAIRSEQ_POSITION_OFFSET,
            "input_embeds_norm": bool(hf.get("scale_embedding", True))}


def _xglm_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _expect(cfg, "xglm", **PLAIN, add_bias_linear=True, norm_epsilon=1e-5, position_embedding_type="sinusoidal",
            position_embedding_offset=FAIRSEQ_POSITION_OFFSET, num_query_groups=cfg.num_attention_heads,
            softmax_scale=None)
    return {**_base_hf(cfg), "d_model": cfg.hidden_size, "num_layers": cfg.num_layers,
            "attention_heads": cfg.num_attention_heads, "ffn_dim": cfg.ffn_hidden_size,
            "max_position_embeddings": cfg.max_position_embeddings, "init_std": cfg.init_method_std,
            "activation_function": plain_activation_to_hf(cfg, "xglm", "gelu_new"),
            "scale_embedding": cfg.input_embeds_norm,
            "add_cross_attention": False}


CTRL_EPS = 1e-6  # transformers' CTRL layers' LayerNorm eps, whatever layer_norm_epsilon says


def _ctrl_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    eps = float(hf.get("layer_norm_epsilon", CTRL_EPS))
    if eps != CTRL_EPS:
        raise RegistryError(f"ctrl layer_norm_epsilon={eps} is not supported: transformers' CTRL layers use "
                            f"{CTRL_EPS} and only its final norm reads the key")
    hidden = int(hf["n_embd"])
    kwargs = _absolute_config(hf, layers=int(hf["n_layer"]), hidden=hidden, heads=int(hf["n_head"]),
                              ffn=int(hf["dff"]), positions=int(hf["n_positions"]), eps=CTRL_EPS,
                              init_std=float(hf.get("initializer_range", 0.02)))
    return {**kwargs, "activation": "relu", "position_embedding_type": "sinusoidal",
            "sinusoidal_t2t_frequencies": True, "input_embeds_norm": True, "add_output_layer_bias": True}


def _ctrl_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _expect(cfg, "ctrl", **{**PLAIN, "add_output_layer_bias": True}, add_bias_linear=True, norm_epsilon=CTRL_EPS,
            position_embedding_type="sinusoidal", sinusoidal_t2t_frequencies=True, position_embedding_offset=0,
            input_embeds_norm=True, activation="relu", num_query_groups=cfg.num_attention_heads, softmax_scale=None)
    return {**_base_hf(cfg), "n_embd": cfg.hidden_size, "n_layer": cfg.num_layers, "n_head": cfg.num_attention_heads,
            "dff": cfg.ffn_hidden_size, "n_positions": cfg.max_position_embeddings,
            "initializer_range": cfg.init_method_std, "layer_norm_epsilon": CTRL_EPS}


CTRL_WEIGHTS = _rules("transformer.h.", "{i}.", _with_biases([
    ("input_layernorm", "layernorm1", "copy"), ("self_attention.linear_proj", "multi_head_attention.dense", "copy"),
    ("pre_mlp_layernorm", "layernorm2", "copy"), ("mlp.linear_fc1", "ffn.0", "copy"),
    ("mlp.linear_fc2", "ffn.2", "copy")]),
    *(WeightRule(f"decoder.layers.{{i}}.self_attention.linear_qkv.{kind}",
                 tuple(f"transformer.h.{{i}}.multi_head_attention.W{p}.{kind}" for p in "qkv"), "fuse_rows")
      for kind in ("weight", "bias")),
    WeightRule("embedding.word_embeddings.weight", ("transformer.w.weight",), "vocab"),
    WeightRule("output_layer_bias", ("lm_head.bias",), "vocab"),  # tied: the bias beside the shared embeddings
    WeightRule("output_layer.bias", ("lm_head.bias",), "vocab"),  # untied: the output layer's own
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
    WeightRule("decoder.final_layernorm.weight", ("transformer.layernorm.weight",)),
    WeightRule("decoder.final_layernorm.bias", ("transformer.layernorm.bias",)))
OPT_WEIGHTS = _fairseq_layer("model.decoder.") + _fairseq_top("model.decoder.", "final_layer_norm", "lm_head.weight")
BIOGPT_WEIGHTS = _fairseq_layer("biogpt.") + _fairseq_top("biogpt.", "layer_norm", "output_projection.weight")
XGLM_WEIGHTS = _fairseq_layer("model.") + _fairseq_top("model.", "layer_norm", "lm_head.weight", positions=False)


GPT2 = register(Family("gpt2", "gpt2", "GPT2LMHeadModel", _gpt2_config, _gpt2_hf_config, GPT2_WEIGHTS))
GPT_BIGCODE = register(Family("gpt_bigcode", "gpt_bigcode", "GPTBigCodeForCausalLM", _gpt_bigcode_config,
                              _gpt_bigcode_hf_config, GPT_BIGCODE_WEIGHTS))
GPT_NEO = register(Family("gpt_neo", "gpt_neo", "GPTNeoForCausalLM", _gpt_neo_config, _gpt_neo_hf_config,
                          GPT_NEO_WEIGHTS))
OPT = register(Family("opt", "opt", "OPTForCausalLM", _opt_config, _opt_hf_config, OPT_WEIGHTS))
BIOGPT = register(Family("biogpt", "biogpt", "BioGptForCausalLM", _biogpt_config, _biogpt_hf_config, BIOGPT_WEIGHTS))
XGLM = register(Family("xglm", "xglm", "XGLMForCausalLM", _xglm_config, _xglm_hf_config, XGLM_WEIGHTS))
CTRL = register(Family("ctrl", "ctrl", "CTRLLMHeadModel", _ctrl_config, _ctrl_hf_config, CTRL_WEIGHTS))

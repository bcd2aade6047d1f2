"""Short-convolution hybrids as registry data: LFM2 and LFM2-MoE (Liquid AI).

LFM2 interleaves two kinds of layers (HF ``layer_types``, or the older ``full_attn_idxs``):
``conv`` layers, whose token mixer is the gated short convolution
(:mod:`core.transformer.short_conv`), and ``full_attention`` layers, Llama attention with
per-head q/k RMS norms before RoPE (``--qk-layernorm``). Every layer has the SwiGLU MLP and
pre-norms; the final norm is HF's ``embedding_norm`` (applied after the last layer, despite its
name). Our config places the conv layers with ``--experimental-attention-variant short_conv``
and ``--linear-attention-freq`` as a list of 1 (conv) and 0 (attention) per layer; a model with
no conv layer is a plain GPT model. ``conv_L_cache`` is ``--short-conv-kernel-size`` and
``conv_bias`` (biases on the conv's in_proj, conv and out_proj) ``--short-conv-bias``.

The MLP width is HF's ``intermediate_size`` (``block_ff_dim``) as ``Lfm2MLP`` adjusts it:
with ``block_auto_adjust_ff_dim`` it takes 2/3 of it, times ``block_ffn_dim_multiplier``
rounded up to ``block_multiple_of``; the export writes the adjusted width with the adjustment
off.

    ours                                                HF (model.layers.{i}.)
    decoder.layers.{i}.input_layernorm.weight           operator_norm.weight
    decoder.layers.{i}.self_attention.in_proj.*         conv.in_proj.*          (conv layers)
    decoder.layers.{i}.self_attention.conv.*            conv.conv.*             [h, 1, L_cache]
    decoder.layers.{i}.self_attention.out_proj.*        conv.out_proj.*
    decoder.layers.{i}.self_attention.linear_qkv        cat(self_attn.q_proj, k_proj, v_proj)  (attention layers)
    decoder.layers.{i}.self_attention.linear_proj       self_attn.out_proj
    decoder.layers.{i}.self_attention.{q,k}_layernorm   self_attn.{q,k}_layernorm
    decoder.layers.{i}.pre_mlp_layernorm.weight         ffn_norm.weight
    decoder.layers.{i}.mlp.linear_fc1.weight            cat(feed_forward.w1, feed_forward.w3) rows  (gate, up)
    decoder.layers.{i}.mlp.linear_fc2.weight            feed_forward.w2
    decoder.final_layernorm.weight                      model.embedding_norm.weight

LFM2-MoE (``lfm2_moe``) keeps LFM2's layers and puts a mixture of experts in every layer after the
first ``num_dense_layers`` (``--first-k-dense-replace``; the dense ones have LFM2's MLP of
``intermediate_size``, not adjusted). Its router is sigmoid-scored, chooses by score + ``expert_bias``
(``use_expert_bias``: ``--moe-router-enable-expert-bias``) and weighs by the unbiased scores,
renormalised (``norm_topk_prob``) and times ``routed_scaling_factor``
(``--moe-router-topk-scaling-factor``); experts of ``moe_intermediate_size``, no shared expert.
HF renormalises by the sum + 1e-6 where ours adds 1e-20: the weights differ by the factor
sum / (sum + 1e-6), about 1e-6 relative for chosen sigmoid scores summing near 1, inside the fp32
logit tolerance but not bit-equal. Checkpoints keep one tensor per expert:

    decoder.layers.{i}.mlp.router.weight                feed_forward.gate.weight
    decoder.layers.{i}.mlp.router.expert_bias           feed_forward.expert_bias
    decoder.layers.{i}.mlp.experts.linear_fc1.weight    feed_forward.experts.{e}.w1 / w3 (stacked gate, up)
    decoder.layers.{i}.mlp.experts.linear_fc2.weight    feed_forward.experts.{e}.w2 (stacked)

LFM3 (``lfm3``) has three layer kinds: ``conv`` (LFM2's), ``sliding_attention`` and ``full_attention``
(``--sliding-window`` with ``--full-attention-layers``). Each kind of attention has its RoPE
(``rope_parameters`` per kind, as Gemma4: the sliding layers default RoPE of ``--local-rotary-base``, the full
ones by default proportional RoPE over half the head, ``--rope-scaling-type proportional --rotary-percent 0.5``).
Its attention scales each head's output by ``sigmoid(g_proj x)``, one gate per head
(``--attention-output-gate --attention-output-gate-per-head``: ``g_proj`` is a last segment of the fused QKV
projection with one row per head, split over TP with the heads); ``use_sandwich_norm`` norms the mixer and MLP
outputs before their residual adds (``--post-norm``). Checkpoints store the gate as ``self_attn.gate_proj``
(transformers renames it ``g_proj`` on load); both spellings are read, the stored one written. The MLP is
``intermediate_size`` wide (no adjustment).

    decoder.layers.{i}.self_attention.linear_qkv        cat(self_attn.q_proj, k_proj, v_proj, gate_proj)
    decoder.layers.{i}.self_attention.linear_proj       self_attn.o_proj
    decoder.layers.{i}.self_attention.{q,k}_layernorm   self_attn.{q,k}_norm
    decoder.layers.{i}.post_self_attn_layernorm         post_operator_norm      (use_sandwich_norm)
    decoder.layers.{i}.post_mlp_layernorm               post_ffn_norm           (use_sandwich_norm)

(the rest as LFM2's). ``attention_bias`` is refused: a bias on the fused projection would need one on the gate,
which LFM3 does not have.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import SHORT_CONV_MIXER, TransformerConfig
from mindspeed_llm.models.registry import (
    ROPE_KEYS, Family, RegistryError, WeightRule, _checked, _checked_family, _common_config, _common_hf_config, _layer,
    _renamed, _window_layers, register, require_config,
)
from mindspeed_llm.models.families.gemma_like import per_kind_rope, per_kind_rope_hf
from mindspeed_llm.models.families.moe_common import per_expert_weights
from mindspeed_llm.models.families.moe_sigmoid import scaling_factor, scaling_factor_hf, sigmoid_router

CONV, ATTENTION = "conv", "full_attention"  # HF's layer_types
LFM2_ROPE_THETA = 1_000_000.0  # Lfm2Config.default_theta

LFM2_WEIGHTS = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    _layer("input_layernorm.weight", ["operator_norm.weight"]),
    *(_layer(f"self_attention.{name}", [f"conv.{name}"])
      for name in ("in_proj.weight", "in_proj.bias", "conv.weight", "conv.bias", "out_proj.weight", "out_proj.bias")),
    _layer("self_attention.linear_qkv.weight",
           ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"], "fuse_rows"),
    _layer("self_attention.linear_proj.weight", ["self_attn.out_proj.weight"]),
    _layer("self_attention.q_layernorm.weight", ["self_attn.q_layernorm.weight"]),
    _layer("self_attention.k_layernorm.weight", ["self_attn.k_layernorm.weight"]),
    _layer("pre_mlp_layernorm.weight", ["ffn_norm.weight"]),
    _layer("mlp.linear_fc1.weight", ["feed_forward.w1.weight", "feed_forward.w3.weight"], "fuse_rows"),
    _layer("mlp.linear_fc2.weight", ["feed_forward.w2.weight"]),
    WeightRule("decoder.final_layernorm.weight", ("model.embedding_norm.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)


def _lfm2_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or as Lfm2Config derives them from ``full_attn_idxs`` (absent: every layer attention)."""
    layers = int(hf["num_hidden_layers"])
    types = hf.get("layer_types")
    if types is None:
        full = hf.get("full_attn_idxs")
        full = set(range(layers) if full is None else full)
        types = [ATTENTION if i in full else CONV for i in range(layers)]
    return _checked_kinds(types, layers, (CONV, ATTENTION), "lfm2")


def _checked_kinds(types: List[str], layers: int, allowed: Tuple[str, ...], family: str) -> List[str]:
    """``types`` if it gives one of ``allowed`` per layer; else a one-line RegistryError naming the first wrong
    kind (or the count)."""
    unknown = sorted(set(types) - set(allowed))
    if unknown or len(types) != layers:
        raise RegistryError(f"{family} layer_types {list(types)} must give one of "
                            f"{', '.join(repr(kind) for kind in allowed)} per layer ({layers}); "
                            f"{unknown[0] if unknown else 'the count'} is not supported")
    return list(types)


def _short_conv_layers(types: List[str], kernel: int, bias: bool) -> Dict[str, Any]:
    """The conv layers of ``types`` as ``--experimental-attention-variant short_conv`` with their
    ``--linear-attention-freq`` marks and conv settings (nothing when no layer is a conv)."""
    marks = [int(kind == CONV) for kind in types]
    if not any(marks):
        return {}
    return dict(experimental_attention_variant="short_conv", linear_attention_freq=str(marks).replace(" ", ""),
                short_conv_kernel_size=kernel, short_conv_bias=bias)


def _lfm2_ffn(hf: Dict[str, Any]) -> int:
    """The SwiGLU width Lfm2MLP builds from ``intermediate_size`` (``block_ff_dim``) and its adjustment."""
    width = int(hf.get("block_ff_dim", hf["intermediate_size"]))
    if not hf.get("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = hf.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is None:
        return width
    multiple = int(hf.get("block_multiple_of", 256))
    width = int(multiplier * width)
    return multiple * ((width + multiple - 1) // multiple)


def _lfm2_base_config(hf: Dict[str, Any], family: str, ffn: int) -> Dict[str, Any]:
    """What LFM2 and LFM2-MoE share: the layer kinds, attention with q/k norms, norms, RoPE, embeddings."""
    if hf.get("head_dim") not in (None, int(hf["hidden_size"]) // int(hf["num_attention_heads"])):
        raise RegistryError(f"{family} head_dim={hf['head_dim']} is not supported: its attention heads are "
                            "hidden_size / num_attention_heads wide")
    if not any(key in hf for key in ROPE_KEYS):
        hf = {**hf, "rope_theta": LFM2_ROPE_THETA}
    tied = hf.get("tie_embedding", hf.get("tie_word_embeddings", True))
    out = {**_common_config({**hf, "intermediate_size": ffn, "tie_word_embeddings": tied}),
           "norm_epsilon": float(hf.get("norm_eps", 1e-5)), "qk_norm": "per_head"}
    return {**out, **_short_conv_layers(_lfm2_layer_types(hf), int(hf.get("conv_L_cache", 3)),
                                        bool(hf.get("conv_bias", False)))}


def _lfm2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return _lfm2_base_config(hf, "lfm2", _lfm2_ffn(hf))


def _lfm2_layer_types_of(cfg: TransformerConfig, family: str) -> List[str]:
    kinds = [cfg.layer_parts(i)[0] for i in range(cfg.num_layers)]
    if cfg.hybrid_override_pattern is not None or any(k not in (SHORT_CONV_MIXER, "attention") for k in kinds):
        raise RegistryError(f"{family} has short-conv and attention layers only (--experimental-attention-variant "
                            "short_conv with --linear-attention-freq)")
    return [CONV if kind == SHORT_CONV_MIXER else ATTENTION for kind in kinds]


def _lfm2_base_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    """The inverse of :func:`_lfm2_base_config` (the MLP widths are each family's)."""
    types = _lfm2_layer_types_of(cfg, family)
    require_config(cfg, family, normalization="RMSNorm", activation="swiglu", qk_norm="per_head",
                   qk_layernorm_after_rope=False, add_bias_linear=False, add_qkv_bias=False, add_dense_bias=False,
                   add_mlp_bias=False, kv_channels=cfg.hidden_size // cfg.num_attention_heads, sliding_window=None,
                   rotary_percent=1.0, rope_interleaved=False, post_norm=False, post_norm_only=False,
                   apply_layernorm_1p=False, parallel_residual=False)
    out = {key: value for key, value in _common_hf_config(cfg).items()
           if key not in ("head_dim", "rms_norm_eps", "hidden_act", "attention_dropout")}
    tied = not cfg.untie_embeddings_and_output_weights
    return {**out, "norm_eps": cfg.norm_epsilon, "layer_types": types, "tie_embedding": tied,
            "conv_L_cache": cfg.short_conv_kernel_size, "conv_bias": cfg.short_conv_bias}


def _lfm2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, "lfm2", "lfm2_moe for a mixture of experts", num_experts=None)
    return {**_lfm2_base_hf_config(cfg, "lfm2"), "full_attn_idxs": None, "block_ff_dim": cfg.ffn_hidden_size,
            "block_auto_adjust_ff_dim": False}


LFM2 = register(_checked_family("lfm2", "lfm2", "Lfm2ForCausalLM", _lfm2_config, _lfm2_hf_config, LFM2_WEIGHTS))


def _lfm2_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    out = _lfm2_base_config(hf, "lfm2_moe", int(hf["intermediate_size"]))
    router = sigmoid_router(hf, "lfm2_moe", "num_experts", norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
                            groups=False)
    return {**out, **router, "moe_router_enable_expert_bias": bool(hf.get("use_expert_bias", True)),
            "moe_ffn_hidden_size": int(hf["moe_intermediate_size"]),
            "moe_router_topk_scaling_factor": scaling_factor(hf.get("routed_scaling_factor")),
            "first_k_dense_replace": int(hf.get("num_dense_layers", 2))}


def _lfm2_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.num_experts is None:
        raise RegistryError("lfm2_moe needs --num-experts; a model without experts is lfm2")
    require_config(cfg, "lfm2_moe", moe_router_score_function="sigmoid", moe_router_pre_softmax=False,
                   moe_layer_freq=1, moe_expert_capacity_factor=None, shared_expert_gate=False,
                   moe_shared_expert_intermediate_size=None, moe_router_num_groups=None)
    return {**_lfm2_base_hf_config(cfg, "lfm2_moe"), "intermediate_size": cfg.ffn_hidden_size,
            "moe_intermediate_size": cfg.moe_expert_ffn_hidden_size, "num_experts": cfg.num_experts,
            "num_experts_per_tok": cfg.moe_router_topk, "norm_topk_prob": cfg.norm_topk_prob,
            "use_expert_bias": cfg.moe_router_enable_expert_bias, "routed_scaling_factor": scaling_factor_hf(cfg),
            "num_dense_layers": cfg.first_k_dense_replace}


def _lfm2_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """LFM2's rules (the leading dense layers' MLPs among them) plus the MoE layers'."""
    return LFM2_WEIGHTS + per_expert_weights(cfg, "feed_forward", "w1", "w3", "w2", "gate") + (
        _layer("mlp.router.expert_bias", ["feed_forward.expert_bias"]),)


LFM2_MOE = register(Family("lfm2_moe", "lfm2_moe", "Lfm2MoeForCausalLM", _lfm2_moe_config,
                           _checked("lfm2_moe", _lfm2_moe_config, _lfm2_moe_hf_config), LFM2_WEIGHTS,
                           preserved_keys=("output_router_logits",), weights_for=_lfm2_moe_weights))

LFM3_SLIDING = "sliding_attention"
LFM3_DEFAULTS = dict(head_dim=128, sliding_window=256, norm_eps=1e-5, tie_word_embeddings=True,
                     use_sandwich_norm=True, use_attention_gate=True, conv_L_cache=7, conv_bias=False,
                     max_position_embeddings=128_000)
LFM3_DEFAULT_ROPE = {LFM3_SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
                     ATTENTION: {"rope_type": "proportional", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.5}}
LFM3_WEIGHTS = _renamed(LFM2_WEIGHTS, {
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "self_attention.q_layernorm.weight": "self_attn.q_norm.weight",
    "self_attention.k_layernorm.weight": "self_attn.k_norm.weight"}, (
    _layer("post_self_attn_layernorm.weight", ["post_operator_norm.weight"]),
    _layer("post_mlp_layernorm.weight", ["post_ffn_norm.weight"]),
))
_LFM3_GATED_QKV = _layer("self_attention.linear_qkv.weight", ["self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                                                "self_attn.v_proj.weight", "self_attn.gate_proj.weight"],
                         "fuse_rows")


def _lfm3_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or Lfm3Config's default: layer 2 of every four full, layer 0 of every four after the
    first sliding, the rest conv."""
    layers = int(hf["num_hidden_layers"])
    types = hf.get("layer_types") or [ATTENTION if i % 4 == 2 else LFM3_SLIDING if i % 4 == 0 and i > 0 else CONV
                                      for i in range(layers)]
    return _checked_kinds(types, layers, (CONV, LFM3_SLIDING, ATTENTION), "lfm3")


def _lfm3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**LFM3_DEFAULTS, **hf}
    if hf.get("attention_bias", False):
        raise RegistryError("lfm3 attention_bias=True is not supported: the bias of the fused q/k/v/gate projection "
                            "would need one on g_proj, which LFM3 does not have")
    types = _lfm3_layer_types(hf)
    # a conv layer counts as full for the windows: it has no attention to window
    attention_kinds = [ATTENTION if kind == CONV else kind for kind in types]
    windows = _window_layers(attention_kinds, hf["sliding_window"], "lfm3")
    rope = per_kind_rope(hf, attention_kinds, "lfm3", LFM3_DEFAULT_ROPE)
    if not windows["sliding_window"]:
        rope["local_rotary_base"] = None
    gate = bool(hf["use_attention_gate"])
    common = _common_config({k: v for k, v in hf.items() if k not in ROPE_KEYS})
    return {**common, **windows, **rope, "norm_epsilon": float(hf["norm_eps"]), "qk_norm": "per_head",
            "post_norm": bool(hf["use_sandwich_norm"]), "attention_output_gate": gate,
            "attention_output_gate_per_head": gate,
            **_short_conv_layers(types, int(hf["conv_L_cache"]), bool(hf["conv_bias"]))}


def _lfm3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    """The inverse of :func:`_lfm3_config` (checked: a model it would not rebuild is refused)."""
    kinds = _lfm2_layer_types_of(cfg, "lfm3")
    types = [LFM3_SLIDING if kind == ATTENTION and cfg.layer_window(i) is not None else kind
             for i, kind in enumerate(kinds)]
    out = {key: value for key, value in _common_hf_config(cfg).items()
           if key not in ("rms_norm_eps", "hidden_act", "attention_dropout") + ROPE_KEYS}
    return {**out, "norm_eps": cfg.norm_epsilon, "layer_types": types,
            "sliding_window": cfg.sliding_window or LFM3_DEFAULTS["sliding_window"],
            "rope_parameters": per_kind_rope_hf(cfg, "lfm3"), "use_sandwich_norm": cfg.post_norm,
            "use_attention_gate": cfg.attention_output_gate, "attention_bias": False,
            "conv_L_cache": cfg.short_conv_kernel_size, "conv_bias": cfg.short_conv_bias}


def _lfm3_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """LFM3's rules, g_proj the last segment of the fused projection when the attention is gated."""
    return ((_LFM3_GATED_QKV,) if cfg.attention_output_gate else ()) + LFM3_WEIGHTS


LFM3 = register(Family("lfm3", "lfm3", "Lfm3ForCausalLM", _lfm3_config, _checked("lfm3", _lfm3_config, _lfm3_hf_config),
                       LFM3_WEIGHTS, weights_for=_lfm3_weights,
                       hf_tensor_aliases=((r"\.self_attn\.g_proj\.", ".self_attn.gate_proj."),)))

"""Linear-attention hybrid families as registry data: Qwen3-Next (``qwen3_next``), gated DeltaNet layers
beside gated softmax attention, every layer with its MLP or MoE.

HF ``layer_types`` (``linear_attention`` / ``full_attention``) become Megatron-core's
``--experimental-attention-variant gated_delta_net`` with ``--linear-attention-freq`` as a list
expression of 1 (linear) and 0 (attention) per layer; the DeltaNet sizes map one to one
(``linear_conv_kernel_dim``, ``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_num_key_heads``,
``linear_num_value_heads``).

    ours                                              HF (model.layers.{i}.*)
    self_attention.{in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj}
                                                      linear_attn.<same>   (DeltaNet layers, copied)
    self_attention.linear_qkv   [Q; K; V; G]          self_attn.q_proj ([q_h; g_h] per head), k_proj, v_proj
    self_attention.{q,k}_layernorm                    self_attn.{q,k}_norm
    mlp.router / mlp.experts / mlp.shared_experts / mlp.shared_expert_gate
                                                      mlp.gate / mlp.experts.{e} / mlp.shared_expert(_gate)

Qwen3-Next's norms are zero-centred, ``x * (1 + w)`` (``--apply-layernorm-1p``: the hidden norms, the final
norm and the per-head q/k norms); the DeltaNet's gated output norm is a plain ``w * x`` (the mixer's own).
Attention multiplies its output by ``sigmoid`` of a gate that transformers projects per head beside the
query (``--attention-output-gate``; the "qkv_output_gate" transform regroups the rows), and rotates a
quarter of each head by default (``partial_rotary_factor`` 0.25, ``--rotary-percent``). The MoE is
Qwen2-MoE's: softmax over all experts, top-k renormalised with ``norm_topk_prob``, a shared expert scaled
by ``sigmoid(shared_expert_gate(x))``; ``num_experts`` 0 means dense MLPs. Refused in one line: attention
biases, ``decoder_sparse_step`` other than 1, dense layers other than a leading run, and layer types other
than the two.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig, parse_layer_frequency
from core.transformer.gated_delta_net import ba_from_separate, qkvz_from_separate, separate_from_ba, separate_from_qkvz
from mindspeed_llm.models.families.moe_common import per_expert_weights
from mindspeed_llm.models.families.moe_softmax import _dense_layers, _pre_softmax_router, _pre_softmax_router_hf
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, TRANSFORMS, Family, RegistryError, TensorContext,
                                           WeightRule, _checked, _common_config, _common_hf_config, _layer, _renamed,
                                           refuse, register, require_config)

LAYER_TYPES = {"linear_attention": 1, "full_attention": 0}
GDN_TENSORS = ("in_proj_qkvz.weight", "in_proj_ba.weight", "conv1d.weight", "dt_bias", "A_log", "norm.weight",
               "out_proj.weight")
QWEN3_NEXT_PARTIAL_ROTARY = 0.25  # transformers' default when config.json omits partial_rotary_factor


# --------------------------------------------------------------------------- the gated query projection

def _gate_split(ctx: TensorContext) -> Tuple[int, int, int]:
    cfg = ctx.config
    return cfg.num_attention_heads, cfg.num_query_groups, cfg.kv_channels


def _qkv_output_gate_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """HF q_proj ``[heads * 2 hn, ...]`` (per head ``[q_h; g_h]``), k_proj, v_proj -> ours ``[Q; K; V; G]``."""
    heads, _, hn = _gate_split(ctx)
    q_and_gate, k, v = tensors
    if q_and_gate.is_meta:
        return q_and_gate.new_empty((q_and_gate.size(0) + k.size(0) + v.size(0), *q_and_gate.shape[1:]))
    per_head = q_and_gate.reshape(heads, 2, hn, *q_and_gate.shape[1:])  # [heads, (q, g), hn, ...]
    q, gate = (per_head[:, i].reshape(heads * hn, *q_and_gate.shape[1:]) for i in (0, 1))
    return torch.cat([q, k, v, gate], dim=0)


def _qkv_output_gate_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    heads, groups, hn = _gate_split(ctx)
    q, k, v, gate = tensor.split([heads * hn, groups * hn, groups * hn, heads * hn], dim=0)
    interleaved = torch.stack([q.reshape(heads, hn, *q.shape[1:]), gate.reshape(heads, hn, *q.shape[1:])], dim=1)
    return [interleaved.reshape(2 * heads * hn, *q.shape[1:]).contiguous(), k.contiguous(), v.contiguous()]


TRANSFORMS.setdefault("qkv_output_gate", (_qkv_output_gate_to_ours, _qkv_output_gate_to_hf))


# --------------------------------------------------------------------------- Qwen3.5's separate projections

def _rows(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """An empty tensor of the rows of ``tensors`` (the converter's shape-only pass over meta tensors)."""
    return tensors[0].new_empty((sum(t.size(0) for t in tensors), *tensors[0].shape[1:]))


def _qkvz_separate_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """Qwen3.5's in_proj_qkv ``[Q; K; V]`` and in_proj_z -> our grouped in_proj_qkvz rows."""
    return _rows(tensors) if tensors[0].is_meta else qkvz_from_separate(tensors[0], tensors[1], ctx.config)


def _qkvz_separate_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [part.contiguous() for part in separate_from_qkvz(tensor, ctx.config)]


def _ba_separate_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """Qwen3.5's in_proj_b and in_proj_a -> our grouped in_proj_ba rows."""
    return _rows(tensors) if tensors[0].is_meta else ba_from_separate(tensors[0], tensors[1], ctx.config)


def _ba_separate_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [part.contiguous() for part in separate_from_ba(tensor, ctx.config)]


TRANSFORMS.setdefault("gdn_qkvz_separate", (_qkvz_separate_to_ours, _qkvz_separate_to_hf))
TRANSFORMS.setdefault("gdn_ba_separate", (_ba_separate_to_ours, _ba_separate_to_hf))


# --------------------------------------------------------------------------- layer types

def linear_marks(types: Sequence[str], family: str, layers: int) -> List[int]:
    """HF ``layer_types`` as ``--linear-attention-freq`` marks: 1 a linear layer, 0 full attention."""
    unknown = sorted(set(map(str, types)) - set(LAYER_TYPES))
    if unknown or len(types) != layers:
        raise RegistryError(f"{family} layer_types must give one of {sorted(LAYER_TYPES)} per layer ({layers}); "
                            f"got {unknown or len(types)}")
    return [LAYER_TYPES[kind] for kind in types]


def linear_layer_types(marks: Sequence[int]) -> List[str]:
    """``--linear-attention-freq`` marks as HF ``layer_types``: the inverse of :func:`linear_marks`."""
    return ["linear_attention" if mark else "full_attention" for mark in marks]


def config_marks(cfg: TransformerConfig) -> List[int]:
    """The marks of ``cfg``'s ``--linear-attention-freq`` (all 0 without it): the inverse of :func:`linear_marks`."""
    if cfg.linear_attention_freq is None:
        return [0] * cfg.num_layers
    return parse_layer_frequency(cfg.linear_attention_freq, cfg.num_layers, "--linear-attention-freq")


def _linear_layers(hf: Dict[str, Any], family: str, layers: int) -> Dict[str, Any]:
    """``layer_types`` (else every ``full_attention_interval``-th layer full) as the GDN variant and its marks."""
    types = hf.get("layer_types")
    if not types:
        interval = int(hf.get("full_attention_interval", 4))
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    marks = linear_marks(types, family, layers)
    if not any(marks):  # no DeltaNet layer: plain attention layers, no variant
        return {}
    return dict(experimental_attention_variant="gated_delta_net", linear_attention_freq=str(marks),
                linear_conv_kernel_dim=int(hf.get("linear_conv_kernel_dim", 4)),
                linear_key_head_dim=int(hf.get("linear_key_head_dim", 128)),
                linear_value_head_dim=int(hf.get("linear_value_head_dim", 128)),
                linear_num_key_heads=int(hf.get("linear_num_key_heads", 16)),
                linear_num_value_heads=int(hf.get("linear_num_value_heads", 32)))


def _linear_layers_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return dict(layer_types=linear_layer_types(config_marks(cfg)),
                linear_conv_kernel_dim=cfg.linear_conv_kernel_dim, linear_key_head_dim=cfg.linear_key_head_dim,
                linear_value_head_dim=cfg.linear_value_head_dim, linear_num_key_heads=cfg.linear_num_key_heads,
                linear_num_value_heads=cfg.linear_num_value_heads)


# --------------------------------------------------------------------------- Qwen3-Next

def _gated_hybrid_config(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """What Qwen3-Next and Qwen3.5 share: gated attention with zero-centred norms, partial RoPE, DeltaNet layers."""
    if hf.get("attention_bias", False):
        raise RegistryError(f"{family} attention_bias=True is not supported (q/k/v/o biases without MLP biases)")
    hf = {"partial_rotary_factor": QWEN3_NEXT_PARTIAL_ROTARY, **hf}
    return {**_common_config(hf), "qk_norm": "per_head", "apply_layernorm_1p": True, "attention_output_gate": True,
            **_linear_layers(hf, family, int(hf["num_hidden_layers"]))}


def _gated_moe(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """Qwen2-MoE's routing with a gated shared expert."""
    return dict(_pre_softmax_router(hf, family, "num_experts"), moe_ffn_hidden_size=int(hf["moe_intermediate_size"]),
                moe_shared_expert_intermediate_size=int(hf["shared_expert_intermediate_size"]),
                shared_expert_gate=True)


def _qwen3_next_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    kwargs = _gated_hybrid_config(hf, "qwen3_next")
    if int(hf.get("num_experts", 0) or 0) > 0:
        kwargs.update(_gated_moe(hf, "qwen3_next"), **_dense_layers(hf, "qwen3_next"))
    return kwargs


def _gated_hybrid_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    require_config(cfg, family, qk_norm="per_head", apply_layernorm_1p=True, attention_output_gate=True,
                   add_bias_linear=False, add_qkv_bias=False, sliding_window=None, activation="swiglu")
    return {**_common_hf_config(cfg), **_linear_layers_hf(cfg), "attention_bias": False,
            "partial_rotary_factor": cfg.rotary_percent}


def _gated_moe_hf(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    if cfg.moe_shared_expert_intermediate_size is None or not cfg.shared_expert_gate:
        raise RegistryError(f"{family} MoE layers need a gated shared expert (--moe-shared-expert-intermediate-size "
                            "and --shared-expert-gate)")
    return {**_pre_softmax_router_hf(cfg, family),
            "shared_expert_intermediate_size": cfg.moe_shared_expert_intermediate_size}


def _qwen3_next_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _gated_hybrid_hf_config(cfg, "qwen3_next")
    if cfg.num_experts is None:
        return {**out, "num_experts": 0, "decoder_sparse_step": 1, "mlp_only_layers": []}
    return {**out, **_gated_moe_hf(cfg, "qwen3_next")}


QWEN3_NEXT_ATTENTION = tuple(rule for rule in LLAMA_WEIGHTS if "linear_qkv" not in rule.ours) + (
    _layer("self_attention.linear_qkv.weight",
           ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"], "qkv_output_gate"),
    *(_layer(f"self_attention.{name}", [f"linear_attn.{name}"]) for name in GDN_TENSORS),
)


def _gated_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Per-expert tensors, the router and the gated shared expert (``mlp.shared_expert``)."""
    if cfg.num_experts is None:
        return ()
    shared = (_layer("mlp.shared_experts.linear_fc1.weight",
                     ["mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"], "fuse_rows"),
              _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_expert.down_proj.weight"]),
              _layer("mlp.shared_expert_gate", ["mlp.shared_expert_gate.weight"]))
    return per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") + shared


def _qwen3_next_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return QWEN3_NEXT_ATTENTION + _gated_moe_weights(cfg)


# the multi-token-prediction layer published Qwen3-Next and Qwen3.5 checkpoints carry (mtp.*), which transformers
# does not load and the decoder does not build: left out on conversion, with a note
MTP_LAYER = ("mtp.",)
QWEN3_NEXT = register(Family("qwen3_next", "qwen3_next", "Qwen3NextForCausalLM", _qwen3_next_config,
                             _checked("qwen3_next", _qwen3_next_config, _qwen3_next_hf_config), QWEN3_NEXT_ATTENTION,
                             preserved_keys=("output_router_logits", "full_attention_interval"),
                             weights_for=_qwen3_next_weights, unloaded_hf_prefixes=MTP_LAYER), "qwen3-next")


# --------------------------------------------------------------------------- Qwen3.5 (text) and Qwen3.5-MoE (text)

def _mrope_parameters(cfg: TransformerConfig) -> Dict[str, Any]:
    """Qwen3.5's ``rope_parameters``: interleaved multimodal RoPE, whose three sections see the same position for
    text, so any split of the rotated frequencies computes our RoPE; the published one (11, 11, 10 of 32) is
    the split written, scaled to this head size."""
    if cfg.rope_scaling_type is not None:
        raise RegistryError(f"qwen3_5 has no equivalent of --rope-scaling-type {cfg.rope_scaling_type}")
    frequencies = int(cfg.kv_channels * cfg.rotary_percent) // 2
    third, rest = divmod(frequencies, 3)
    return {"rope_parameters": {"rope_type": "default", "rope_theta": cfg.rotary_base,
                                "partial_rotary_factor": cfg.rotary_percent, "mrope_interleaved": True,
                                "mrope_section": [third + (rest > 0), third + (rest > 1), third]}}


def _qwen3_5_hf_rope(out: Dict[str, Any], cfg: TransformerConfig) -> Dict[str, Any]:
    for key in ("rope_theta", "rope_scaling", "partial_rotary_factor"):
        out.pop(key, None)
    return {**out, **_mrope_parameters(cfg)}


def _qwen3_5_text_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return _gated_hybrid_config(hf, "qwen3_5_text")


def _qwen3_5_text_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.num_experts is not None:
        raise RegistryError("qwen3_5_text has no MoE layers; use --model-type-hf qwen3_5_moe_text")
    return _qwen3_5_hf_rope(_gated_hybrid_hf_config(cfg, "qwen3_5_text"), cfg)


def _qwen3_5_moe_text_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**hf, "intermediate_size": hf.get("moe_intermediate_size", 512), "norm_topk_prob": True}
    return {**_gated_hybrid_config(hf, "qwen3_5_moe_text"), **_gated_moe(hf, "qwen3_5_moe_text")}


def _qwen3_5_moe_text_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, "qwen3_5_moe_text", norm_topk_prob=True, first_k_dense_replace=0)
    out = {**_gated_hybrid_hf_config(cfg, "qwen3_5_moe_text"), **_gated_moe_hf(cfg, "qwen3_5_moe_text")}
    for key in ("intermediate_size", "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"):
        out.pop(key, None)  # every layer MoE, always renormalised: keys Qwen3.5-MoE does not have
    return _qwen3_5_hf_rope(out, cfg)


QWEN3_5_ATTENTION = tuple(rule for rule in QWEN3_NEXT_ATTENTION if "in_proj_" not in rule.ours) + (
    _layer("self_attention.in_proj_qkvz.weight", ["linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight"],
           "gdn_qkvz_separate"),
    _layer("self_attention.in_proj_ba.weight", ["linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight"],
           "gdn_ba_separate"),
)


def _qwen3_5_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return QWEN3_5_ATTENTION + _gated_moe_weights(cfg)


QWEN3_5_PRESERVED = ("output_router_logits", "full_attention_interval")
QWEN3_5_TEXT = register(Family("qwen3_5_text", "qwen3_5_text", "Qwen3_5ForCausalLM", _qwen3_5_text_config,
                               _checked("qwen3_5_text", _qwen3_5_text_config, _qwen3_5_text_hf_config),
                               QWEN3_5_ATTENTION, preserved_keys=QWEN3_5_PRESERVED, weights_for=_qwen3_5_weights,
                               unloaded_hf_prefixes=MTP_LAYER),
                        "qwen3.5", "qwen3-5", "qwen3_5")
QWEN3_5_MOE_TEXT = register(Family("qwen3_5_moe_text", "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM",
                                   _qwen3_5_moe_text_config,
                                   _checked("qwen3_5_moe_text", _qwen3_5_moe_text_config, _qwen3_5_moe_text_hf_config),
                                   QWEN3_5_ATTENTION, preserved_keys=QWEN3_5_PRESERVED, weights_for=_qwen3_5_weights,
                                   unloaded_hf_prefixes=MTP_LAYER),
                            "qwen3.5-moe", "qwen3-5-moe", "qwen3_5_moe")

# --------------------------------------------------------------------------- OLMo-Hybrid


def _olmo_hybrid_defaults(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``hf`` with OlmoHybridConfig's defaults where it omits a key (DeltaNet heads = attention heads, key dim
    0.75 hidden / heads, value dim twice that; every 4th layer attention)."""
    heads, hidden, layers = int(hf["num_attention_heads"]), int(hf["hidden_size"]), int(hf["num_hidden_layers"])
    key_heads = int(hf.get("linear_num_key_heads") or heads)
    key_dim = int(hf.get("linear_key_head_dim") or int(0.75 * hidden / key_heads))
    types = hf.get("layer_types") or ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
    return {"rms_norm_eps": 1e-6, **hf, "linear_num_key_heads": key_heads,
            "linear_num_value_heads": int(hf.get("linear_num_value_heads") or heads), "linear_key_head_dim": key_dim,
            "linear_value_head_dim": int(hf.get("linear_value_head_dim") or 2 * key_dim), "layer_types": types}


def _olmo_hybrid_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """OLMo-Hybrid: Olmo3's attention layers (output norms only, q/k RMSNorm over all heads' channels) beside
    gated DeltaNet layers with Llama's pre-norms, separate q/k/v/g/a/b projections and beta in (0, 2); RoPE on the
    attention layers, or none when ``rope_theta`` is null (the released checkpoints)."""
    if hf.get("attention_bias", False):
        raise RegistryError("olmo_hybrid attention_bias=True is not supported (q/k/v/o biases without MLP biases)")
    hf = _olmo_hybrid_defaults(hf)
    rope = hf.get("rope_parameters")
    nope = isinstance(rope, dict) and rope.get("rope_theta") is None and hf.get("rope_theta") is None
    kwargs = {**_common_config({k: v for k, v in hf.items() if not (nope and k == "rope_parameters")}),
              "qk_norm": "full_width", "post_norm_only": True, "linear_attention_pre_norm": True,
              "linear_allow_neg_eigval": bool(hf.get("linear_allow_neg_eigval", True)),
              "linear_norm_epsilon": OLMO_HYBRID_GATED_NORM_EPS,
              **_linear_layers(hf, "olmo_hybrid", int(hf["num_hidden_layers"]))}
    if nope:
        kwargs = {key: value for key, value in kwargs.items() if key not in ("rotary_base", "rotary_percent")}
        kwargs["position_embedding_type"] = "none"
    return kwargs


def _olmo_hybrid_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, "olmo_hybrid", qk_norm="full_width", post_norm_only=True, post_norm=False,
                   linear_attention_pre_norm=True, linear_norm_epsilon=OLMO_HYBRID_GATED_NORM_EPS,
                   add_bias_linear=False, add_qkv_bias=False, sliding_window=None, activation="swiglu",
                   attention_output_gate=False, apply_layernorm_1p=False)
    if cfg.position_embedding_type not in ("rope", "none"):
        raise RegistryError(f"olmo_hybrid has RoPE or no positions; the config sets --position-embedding-type "
                            f"{cfg.position_embedding_type}")
    out = {**_common_hf_config(cfg), **_linear_layers_hf(cfg), "attention_bias": False,
           "linear_allow_neg_eigval": cfg.linear_allow_neg_eigval}
    if cfg.position_embedding_type == "none":  # NoPE: what the released checkpoints write
        out.pop("rope_theta", None)
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": None}
    return out


def _qkvg_separate_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """OLMo-Hybrid's q_proj, k_proj, v_proj and g_proj -> our grouped in_proj_qkvz rows."""
    if tensors[0].is_meta:
        return _rows(tensors)
    return qkvz_from_separate(torch.cat(list(tensors[:3]), dim=0), tensors[3], ctx.config)


def _qkvg_separate_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    qkv, gate = separate_from_qkvz(tensor, ctx.config)
    cfg = ctx.config
    key_rows = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    q, k, v = qkv.split([key_rows, key_rows, qkv.size(0) - 2 * key_rows], dim=0)
    return [q.contiguous(), k.contiguous(), v.contiguous(), gate.contiguous()]


TRANSFORMS.setdefault("gdn_qkvg_separate", (_qkvg_separate_to_ours, _qkvg_separate_to_hf))

OLMO_HYBRID_GATED_NORM_EPS = 1e-5  # transformers' o_norm eps (flash-linear-attention's FusedRMSNormGated default)
def _concat_rows_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """Pieces stacked by rows whatever their split: transformers saves OLMo-Hybrid's q/k/v convs as three even
    chunks of the fused conv, the published checkpoints at their own widths; both load as their concatenation."""
    return _rows(tensors) if tensors[0].is_meta else torch.cat(list(tensors), dim=0)


TRANSFORMS.setdefault("concat_rows", (_concat_rows_to_ours, TRANSFORMS["fuse_rows"][1]))

OLMO_HYBRID_GATED_NORM_EPS = 1e-5  # transformers' o_norm eps (flash-linear-attention's FusedRMSNormGated default)
# Tensor names as transformers saves OLMo-Hybrid (its conversion mapping, reversed): a DeltaNet layer's pre-norms
# are attention_layer_norm and feedforward_layer_norm, and every post_attention_layernorm is feedforward_layer_norm
# (the attention layers' output norm); the in-memory names are read too (hf_tensor_aliases)
OLMO_HYBRID_WEIGHTS: Tuple[WeightRule, ...] = _renamed(LLAMA_WEIGHTS, {
    "input_layernorm.weight": "attention_layer_norm.weight", "pre_mlp_layernorm.weight": "feedforward_layer_norm.weight",
}, (
    _layer("post_self_attn_layernorm.weight", ["feedforward_layer_norm.weight"]),  # attention layers' output norms
    _layer("post_mlp_layernorm.weight", ["post_feedforward_layernorm.weight"]),
    # DeltaNet layers
    _layer("self_attention.in_proj_qkvz.weight", [f"linear_attn.{p}_proj.weight" for p in "qkvg"], "gdn_qkvg_separate"),
    _layer("self_attention.in_proj_ba.weight", ["linear_attn.b_proj.weight", "linear_attn.a_proj.weight"],
           "gdn_ba_separate"),
    _layer("self_attention.conv1d.weight", [f"linear_attn.{p}_conv1d.weight" for p in "qkv"], "concat_rows"),
    *(_layer(f"self_attention.{name}", [f"linear_attn.{name}"]) for name in ("dt_bias", "A_log")),
    _layer("self_attention.norm.weight", ["linear_attn.o_norm.weight"]),
    _layer("self_attention.out_proj.weight", ["linear_attn.o_proj.weight"]),
))
def _olmo_hybrid_published_convs(tensors: Dict[str, torch.Tensor], hf: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The q/k/v convs of every DeltaNet layer at their own widths (key, key and value channels), as the published
    checkpoints and the converter write them; transformers saves three even chunks of the fused conv (the reverse
    of its Concatenate), which load as the same conv."""
    hf = _olmo_hybrid_defaults(hf)
    key = int(hf["linear_num_key_heads"]) * int(hf["linear_key_head_dim"])
    out = dict(tensors)
    for name in [n for n in tensors if n.endswith("linear_attn.q_conv1d.weight")]:
        names = [name.replace(".q_conv1d.", f".{p}_conv1d.") for p in "qkv"]
        fused = torch.cat([tensors[n] for n in names], dim=0)
        out.update(zip(names, fused.split([key, key, fused.size(0) - 2 * key], dim=0)))
    return out


OLMO_HYBRID_ALIASES = ((r"^(model\.layers\.\d+)\.input_layernorm\.", r"\1.attention_layer_norm."),
                       (r"^(model\.layers\.\d+)\.post_attention_layernorm\.", r"\1.feedforward_layer_norm."))
OLMO_HYBRID = register(Family("olmo_hybrid", "olmo_hybrid", "OlmoHybridForCausalLM", _olmo_hybrid_config,
                              _checked("olmo_hybrid", _olmo_hybrid_config, _olmo_hybrid_hf_config),
                              OLMO_HYBRID_WEIGHTS,
                              preserved_keys=("linear_a_log_min", "linear_a_log_max", "linear_dt_min",
                                              "linear_dt_max", "linear_dt_init_floor"),
                              hf_tensor_aliases=OLMO_HYBRID_ALIASES, published_layout=_olmo_hybrid_published_convs),
                       "olmo-hybrid")

# The linear-attention hybrids transformers ships that the decoder cannot build yet, each with what it lacks.
refuse("qwen4_exp_text", "its QSA indexer (sparse attention over selected keys), gated residuals, n-gram embeddings and "
       "per-layer embeddings have no equivalent in the decoder", "qwen4_exp")

"""Mixtures of experts with a gated attention output: AFMoE (``afmoe``, Arcee's Trinity models).

AFMoE's layer is Gemma2's sandwich (norms before and after attention and MLP, ``--post-norm``) around a
Llama attention with per-head q/k RMSNorms (``--qk-layernorm``) and an output gate, and DeepSeek-V3's
aux-loss-free sigmoid router. What each HF key maps to:

* ``layer_types`` (default: every ``global_attn_every_n_layers``-th layer full) with ``sliding_window``:
  ``--sliding-window`` with ``--sliding-window-pattern`` (every Nth layer full) or ``--full-attention-layers``;
  only the sliding layers rotate q/k: the full-attention layers are NoPE (``--no-rope-layers``);
* ``self_attn.gate_proj``: the output times sigmoid(gate) per channel (``--attention-output-gate``), the gate
  the fourth segment of our fused ``linear_qkv`` ([q; k; v; gate] rows); it has no bias, so
  ``attention_bias=True`` (biases on q/k/v/o) is refused;
* ``num_dense_layers``: ``--first-k-dense-replace`` (dense FFN ``intermediate_size``);
* ``num_experts`` / ``num_experts_per_tok`` / ``moe_intermediate_size``: experts, top-k, expert FFN;
  ``num_shared_experts``: one shared expert of ``n x moe_intermediate_size``
  (``--moe-shared-expert-intermediate-size``; at least one: HF builds it unconditionally);
* the router: sigmoid scores, experts chosen by score + ``mlp.expert_bias`` (our router's ``expert_bias``,
  ``--moe-router-enable-expert-bias``), weighed by the unbiased scores always renormalised
  (``--norm-topk-prob``; HF adds 1e-20 to the sum, as ours), times ``route_scale``
  (``--moe-router-topk-scaling-factor``);
* ``mup_enabled``: the word embeddings times sqrt(hidden) as a Python float (``--embedding-multiplier``;
  Gemma's ``--input-embeds-norm`` rounds the factor to the activation dtype first, which AFMoE does not).

Tensors: ``self_attn.{q,k,v,gate}_proj`` (fused), ``self_attn.{q,k}_norm``, ``input_layernorm``,
``post_attention_layernorm`` (our ``post_self_attn_layernorm``), ``pre_mlp_layernorm``,
``post_mlp_layernorm``; MoE layers ``mlp.router.gate.weight``, ``mlp.expert_bias``,
``mlp.experts.{e}.{gate,up,down}_proj`` (as transformers saves its fused experts) and
``mlp.shared_experts.*``; dense layers ``mlp.{gate,up,down}_proj``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, Family, RegistryError, WeightRule, _checked,
                                           _common_config, _common_hf_config, _layer, _layer_types, _layer_windows,
                                           _renamed, register)
from mindspeed_llm.models.families.llama_like import _check_common, _no_extras, _refuse
from mindspeed_llm.models.families.moe_common import check_bias_router_hf
from mindspeed_llm.models.families.moe_sigmoid import (bias_router_weights, leading_dense_layers, moe_sizes,
                                                        moe_sizes_hf, scaling_factor, scaling_factor_hf,
                                                        shared_experts, shared_experts_hf, sigmoid_router)

_AFMOE = "afmoe"
# AfmoeConfig's defaults for the keys a saved config.json may leave out
AFMOE_DEFAULTS = dict(head_dim=128, rms_norm_eps=1e-5, max_position_embeddings=16384, num_dense_layers=1,
                      num_experts=64, num_experts_per_tok=6, num_shared_experts=2, route_scale=1.0,
                      global_attn_every_n_layers=4, sliding_window=1024, mup_enabled=False, moe_intermediate_size=1408,
                      intermediate_size=6144, tie_word_embeddings=False)

# [q; k; v; gate] rows of our linear_qkv (--attention-output-gate): the gate is the fourth segment
AFMOE_GATED_QKV = _layer("self_attention.linear_qkv.weight", ["self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                                             "self_attn.v_proj.weight", "self_attn.gate_proj.weight"],
                         "fuse_rows")
AFMOE_ATTENTION_WEIGHTS: Tuple[WeightRule, ...] = (AFMOE_GATED_QKV,) + _renamed(
    tuple(rule for rule in LLAMA_WEIGHTS if rule.ours != AFMOE_GATED_QKV.ours),
    {"pre_mlp_layernorm.weight": "pre_mlp_layernorm.weight"}, (
        _layer("post_self_attn_layernorm.weight", ["post_attention_layernorm.weight"]),
        _layer("post_mlp_layernorm.weight", ["post_mlp_layernorm.weight"]),
    ))


def _afmoe_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``layer_types``, or AfmoeConfig's default: every ``global_attn_every_n_layers``-th layer full."""
    every = int(hf["global_attn_every_n_layers"])
    return list(hf.get("layer_types") or ["sliding_attention" if (i + 1) % every else "full_attention"
                                          for i in range(int(hf["num_hidden_layers"]))])


def _afmoe_attention(hf: Dict[str, Any]) -> Dict[str, Any]:
    """The windows of the sliding layers and the NoPE full-attention layers (only sliding layers rotate)."""
    types, layers = _afmoe_layer_types(hf), int(hf["num_hidden_layers"])
    if "sliding_attention" in types and not hf.get("sliding_window"):
        raise RegistryError(f"{_AFMOE} has sliding_attention layers but no sliding_window")
    windows = _layer_windows(types, hf.get("sliding_window"), layers)
    return {**windows, "no_rope_layers": tuple(i for i, kind in enumerate(types) if kind == "full_attention")}


def _afmoe_embeddings(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``mup_enabled``: the embeddings times sqrt(hidden) (``--embedding-multiplier``)."""
    return {"embedding_multiplier": math.sqrt(int(hf["hidden_size"])) if hf["mup_enabled"] else None}


def _afmoe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**AFMOE_DEFAULTS, **hf}
    _refuse(_AFMOE, hf, attention_bias=False)
    moe_ffn = int(hf["moe_intermediate_size"])
    return {**_common_config(hf), **_afmoe_attention(hf), "qk_norm": "per_head", "post_norm": True,
            "attention_output_gate": True, **_afmoe_embeddings(hf), **moe_sizes(hf),
            **sigmoid_router(hf, _AFMOE, "num_experts", norm_topk_prob=True, groups=False),
            "moe_router_topk_scaling_factor": scaling_factor(hf["route_scale"]),
            **shared_experts(hf, _AFMOE, "num_shared_experts", moe_ffn),
            **leading_dense_layers(int(hf["num_dense_layers"] or 0), _AFMOE, "num_dense_layers")}


def _afmoe_mup_hf(cfg: TransformerConfig) -> bool:
    """``mup_enabled`` from ``--embedding-multiplier`` (none, or exactly sqrt(hidden))."""
    if cfg.embedding_multiplier is None:
        return False
    if cfg.embedding_multiplier != math.sqrt(cfg.hidden_size):
        raise RegistryError(f"{_AFMOE} scales the embeddings by sqrt(hidden) or not at all (mup_enabled); "
                            f"--embedding-multiplier {cfg.embedding_multiplier} differs")
    return True


def _afmoe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common(_AFMOE, cfg, sliding_window=cfg.sliding_window, rotary_percent=cfg.rotary_percent,
                  qk_norm="per_head", qk_layernorm_after_rope=False, post_norm=True, attention_output_gate=True,
                  attention_output_gate_per_head=False, softmax_type="vanilla")
    _no_extras(_AFMOE, cfg, "qk_norm", "post_norm", "embedding_multiplier", "no_rope_layers")
    if cfg.qkv_bias or cfg.dense_bias(0) or cfg.mlp_bias or cfg.dense_bias_layers:
        raise RegistryError(f"{_AFMOE} has no linear biases (its gate_proj has none, so attention_bias is refused)")
    types = _layer_types(cfg)
    full = tuple(i for i, kind in enumerate(types) if kind == "full_attention")
    if tuple(sorted(cfg.no_rope_layers)) != full:
        raise RegistryError(f"{_AFMOE} rotates exactly the sliding-window layers: --no-rope-layers must be the "
                            f"full-attention layers {list(full)}, not {list(cfg.no_rope_layers)}")
    check_bias_router_hf(cfg, _AFMOE, norm_topk_prob=True, moe_router_num_groups=None)
    out = {**_common_hf_config(cfg), "attention_bias": False, **moe_sizes_hf(cfg), "num_experts": cfg.num_experts,
           "route_scale": scaling_factor_hf(cfg), **shared_experts_hf(cfg, _AFMOE, "num_shared_experts"),
           "num_dense_layers": cfg.first_k_dense_replace, "mup_enabled": _afmoe_mup_hf(cfg), "layer_types": types,
           "router_aux_loss_coef": cfg.moe_aux_loss_coeff}
    out.pop("norm_topk_prob")  # AFMoE always renormalises; AfmoeConfig has no such key
    if cfg.sliding_window is not None:
        out["sliding_window"] = cfg.sliding_window
    if cfg.sliding_window_pattern is not None:
        out["global_attn_every_n_layers"] = cfg.sliding_window_pattern
    return out


def _afmoe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """The gated attention, sandwich norms and dense MLP rules plus the MoE layer's."""
    return AFMOE_ATTENTION_WEIGHTS + bias_router_weights(cfg, router="router.gate", bias="expert_bias")


AFMOE = register(Family(_AFMOE, _AFMOE, "AfmoeForCausalLM", _afmoe_config, _checked(_AFMOE, _afmoe_config,
                                                                                    _afmoe_hf_config),
                        AFMOE_ATTENTION_WEIGHTS, preserved_keys=("output_router_logits",),
                        weights_for=_afmoe_weights), "trinity")

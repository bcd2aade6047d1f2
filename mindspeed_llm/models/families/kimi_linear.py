"""Kimi Linear (``kimi_linear``) and Bailing's hybrids (``bailing_hybrid``, Ling) as registry data: Kimi Delta
Attention layers beside multi-latent attention (Kimi Linear's without positions), each with DeepSeek-V3's MoE (or
a dense MLP in the leading layers).

HF ``layer_types`` (``linear_attention`` / ``full_attention``; in Moonshot's config.json the 1-based
``linear_attn_config.kda_layers`` / ``full_attn_layers``) become ``--experimental-attention-variant kda``
with ``--linear-attention-freq`` as a list of 1 (KDA) and 0 (MLA) per layer. KDA has as many key as value heads,
all of ``linear_attn_config.head_dim`` (``linear_head_dim``): our ``--linear-num-key-heads`` and
``--linear-num-value-heads``, ``--linear-key-head-dim`` and ``--linear-value-head-dim``.

    ours (decoder.layers.{i}.*)                           HF (model.layers.{i}.*)
    self_attention.in_proj   [q; k; v; b; f_a; g_a]       self_attn.{q,k,v,b,f_a,g_a}_proj   (KDA layers, fused rows)
    self_attention.conv1d    [q; k; v]                    self_attn.{q,k,v}_conv1d           (fused rows)
    self_attention.{f_b_proj, dt_bias, g_b_proj,          self_attn.<same>
                    o_norm, o_proj}
    self_attention.A_log     [h]                          self_attn.A_log [1, 1, h, 1]
    self_attention.linear_q_proj ... (MLA layers)         self_attn.q_proj, kv_a_proj_with_mqa, ... (mla.MLA_WEIGHTS)
    mlp.router / mlp.experts / mlp.shared_experts         mlp.gate (+ e_score_correction_bias) / mlp.experts
                                                          (fused [E, 2f, h], [E, h, f]) / mlp.shared_experts

The MLA layers have no RoPE at all (transformers drops the rotary embedding: ``--position-embedding-type
none``); the rope dims of the shared key still exist and are attended unrotated. Routing is DeepSeek-V3's:
sigmoid scores with the selection bias, group-limited when ``num_expert_group`` > ``topk_group``, renormalised
with ``moe_renormalize``, times ``routed_scaling_factor``; ``num_shared_experts`` shared experts of
``moe_intermediate_size`` each. transformers saves its config under the aliases of ``KimiLinearConfig.attribute_map``
(``num_experts``, ``num_experts_per_token``, ``moe_renormalize``, ``num_expert_group``, ``num_shared_experts``,
``model_max_length``); both spellings are read and the aliases are written. Dense layers: ``mlp_layer_types``
(else the first ``first_k_dense_replace``), a leading run only. Refused in one line: ``mla_use_nope`` false
(transformers has no RoPE path), a router activation other than sigmoid, ``moe_layer_freq`` other than 1 and
MTP layers (``num_nextn_predict_layers``; transformers builds none).

Bailing's hybrids (``BailingHybridForCausalLM``) have the same three parts, shaped differently:

* KDA with full-rank gates (``--kda-full-rank-gates``: ``f_proj`` and ``g_proj`` as rows of ``in_proj``), the
  ``q/k/v_conv1d`` fused into ``conv1d``, ``A_log`` ``[h]`` and ``dt_bias``,
  and with ``kda_safe_gate`` the bounded forget gate ``kda_lower_bound * sigmoid(...)``
  (``--kda-gate-lower-bound``); ``head_dim`` (or the saved ``linear_head_dim``) wide heads, as many as the
  attention's;
* MLA with interleaved RoPE and a sigmoid gate per head on its output (``self_attn.g_proj``:
  ``--attention-output-gate --attention-output-gate-per-head``), whose rope dims are ``qk_rope_head_dim``;
* DeepSeek-V3's routing (group-limited top-2-sum groups, the selection bias saved as ``gate.expert_bias``) over
  experts saved one tensor each (``experts.{e}.gate_proj``...), the dense layers ``mlp_layer_types`` (a leading run);
* the names of Ling's checkpoints, which transformers' ``save_pretrained`` writes too (every mixer is
  ``attention``, its output projection ``dense``, the embedding ``model.word_embeddings``);
* ``layer_types`` (default: every ``layer_group_size``-th layer MLA) as the KDA variant's marks. Its MTP layers
  (``num_nextn_predict_layers``, saved as ``model.layers.{num_hidden_layers + j}``) are left out with a note, as
  transformers does not load them; ``num_nextn_predict_layers`` and ``mtp_loss_scaling_factor`` are kept for the
  way back. Refused in one line: a ``hidden_act`` other than SiLU (the conv's activation is fixed), KDA heads other
  than the attention heads.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from core.transformer.config import KDA_MIXER, TransformerConfig
from mindspeed_llm.models.families.hybrid_paired import _without_positions
from mindspeed_llm.models.families.linear_attention import config_marks, linear_layer_types, linear_marks
from mindspeed_llm.models.families.mla import MLA_WEIGHTS, _mla_config
from mindspeed_llm.models.families.mla_moe import (_SHARED_EXPERT_WEIGHTS, _check_remote_key, _moe_config,
                                                   _moe_hf_config, _rope_dims)
from mindspeed_llm.models.families.moe_common import (check_bias_router_hf, dense_run, group_routing,
                                                      group_routing_hf, mlp_layer_types, per_expert_weights,
                                                      sigmoid_routing)
from mindspeed_llm.models.registry import (ROPE_KEYS, TRANSFORMS, Family, RegistryError, TensorContext, WeightRule,
                                           _checked, _layer, register, require_config)

FAMILY = "kimi_linear"
# KimiLinearConfig.attribute_map: the alias transformers writes -> the DeepSeek-V3 key our readers take
ALIASES = {"num_experts": "n_routed_experts", "num_local_experts": "n_routed_experts",
           "num_experts_per_token": "num_experts_per_tok", "moe_renormalize": "norm_topk_prob",
           "num_expert_group": "n_group", "num_shared_experts": "n_shared_experts",
           "model_max_length": "max_position_embeddings"}
# the alias transformers writes for each of those keys
ALIASES_OUT = {ours: alias for alias, ours in ALIASES.items() if alias != "num_local_experts"}
# transformers' KimiLinearConfig defaults of the keys read below (a config.json may omit them)
DEFAULTS = dict(n_routed_experts=256, num_experts_per_tok=8, moe_intermediate_size=1024, n_shared_experts=1,
                routed_scaling_factor=2.446, n_group=1, topk_group=1, norm_topk_prob=True, kv_lora_rank=512,
                q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, tie_word_embeddings=False,
                linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4, max_position_embeddings=1048576,
                rms_norm_eps=1e-5)


# --------------------------------------------------------------------------- weights

def _a_log_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return tensors[0].reshape(-1)  # [1, 1, h, 1] -> [h]


def _a_log_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor.reshape(1, 1, -1, 1).contiguous()]


TRANSFORMS.setdefault("kda_a_log", (_a_log_to_ours, _a_log_to_hf))

_KDA = "self_attn."
# the tensors as Moonshot's checkpoints (and transformers' save_pretrained) store them
KDA_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("self_attention.in_proj.weight", [f"{_KDA}{name}.weight" for name in (
        "q_proj", "k_proj", "v_proj", "b_proj", "f_a_proj", "g_a_proj")], "fuse_rows"),
    _layer("self_attention.conv1d.weight", [f"{_KDA}{name}_conv1d.weight" for name in "qkv"], "fuse_rows"),
    *(_layer(f"self_attention.{name}", [f"{_KDA}{name}"]) for name in (
        "f_b_proj.weight", "dt_bias", "g_b_proj.weight", "o_norm.weight", "o_proj.weight")),
    _layer("self_attention.A_log", [f"{_KDA}A_log"], "kda_a_log"),
)
KIMI_LINEAR_WEIGHTS = MLA_WEIGHTS + KDA_WEIGHTS
_MOE = "block_sparse_moe"
MOE_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("mlp.shared_experts.linear_fc1.weight",
           [f"{_MOE}.shared_experts.gate_proj.weight", f"{_MOE}.shared_experts.up_proj.weight"], "fuse_rows"),
    _layer("mlp.shared_experts.linear_fc2.weight", [f"{_MOE}.shared_experts.down_proj.weight"]),
    _layer("mlp.router.expert_bias", [f"{_MOE}.gate.e_score_correction_bias"]))
# transformers' save_pretrained writes the dense layers' MLP under block_sparse_moe too; Moonshot's (and our
# exports) under mlp: both are read
TENSOR_ALIASES = ((r"^(model\.layers\.\d+)\.block_sparse_moe\.(gate_proj|up_proj|down_proj)\.", r"\1.mlp.\2."),)


def _kimi_linear_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    experts = per_expert_weights(cfg, _MOE, "w1", "w3", "w2", "gate") if cfg.num_experts else ()
    return KIMI_LINEAR_WEIGHTS + experts + MOE_WEIGHTS


# --------------------------------------------------------------------------- HF -> ours

def _canonical(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``hf`` with transformers' aliases under the DeepSeek-V3 keys, the 1-based layer lists of Moonshot's
    ``linear_attn_config`` read as transformers reads them, and transformers' defaults for what is absent."""
    out = dict(DEFAULTS)
    for key, value in hf.items():
        out[ALIASES.get(key, key)] = value
    linear = dict(hf.get("linear_attn_config") or {})
    out["linear_head_dim"] = int(linear.get("head_dim", out["linear_head_dim"]))
    out["linear_num_heads"] = int(linear.get("num_heads", out["linear_num_heads"]))
    out["linear_conv_kernel_dim"] = int(linear.get("short_conv_kernel_size", out["linear_conv_kernel_dim"]))
    layers = int(out["num_hidden_layers"])
    if not out.get("layer_types"):
        if "full_attn_layers" in linear and "kda_layers" in linear:
            types = [None] * layers
            for number in linear["full_attn_layers"]:
                types[int(number) - 1] = "full_attention"
            for number in linear["kda_layers"]:
                types[int(number) - 1] = "linear_attention"
        else:
            types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]
        out["layer_types"] = types
    if not out.get("mlp_layer_types"):
        dense = int(hf.get("first_k_dense_replace", 1))
        out["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(layers)]
    return out


def _kda_layers(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``layer_types`` as the KDA variant with its marks, and KDA's sizes."""
    marks = linear_marks(list(hf["layer_types"]), FAMILY, int(hf["num_hidden_layers"]))
    if not any(marks):
        return {}
    heads, dim = int(hf["linear_num_heads"]), int(hf["linear_head_dim"])
    return dict(experimental_attention_variant="kda", linear_attention_freq=str(marks),
                linear_conv_kernel_dim=int(hf["linear_conv_kernel_dim"]), linear_key_head_dim=dim,
                linear_value_head_dim=dim, linear_num_key_heads=heads, linear_num_value_heads=heads)


def _kimi_linear_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = _canonical(hf)
    if hf.get("mla_use_nope") is False:
        raise RegistryError(f"{FAMILY} mla_use_nope=false is not supported: transformers' Kimi Linear attends "
                            "without positions only")
    _check_remote_key(hf, FAMILY, "moe_router_activation_func", "sigmoid")
    _check_remote_key(hf, FAMILY, "num_nextn_predict_layers", 0)
    kwargs = {**_mla_config(hf, FAMILY), **_moe_config(hf, FAMILY),
              **sigmoid_routing(bool(hf["norm_topk_prob"])), **group_routing(hf, FAMILY),
              **_kda_layers(hf)}
    dense = dense_run(hf["mlp_layer_types"], int(hf["num_hidden_layers"]), FAMILY)
    return _without_positions({**kwargs, "first_k_dense_replace": dense} if dense else kwargs)


# --------------------------------------------------------------------------- ours -> HF

def _kda_layers_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    marks = config_marks(cfg)
    if any(marks) and (cfg.layer_parts(marks.index(1))[0] != KDA_MIXER
                       or cfg.linear_num_key_heads != cfg.linear_num_value_heads
                       or cfg.linear_key_head_dim != cfg.linear_value_head_dim):
        raise RegistryError(f"{FAMILY} linear layers are Kimi Delta Attention with as many key as value heads of one "
                            "size: --experimental-attention-variant kda, --linear-num-key-heads = "
                            "--linear-num-value-heads, --linear-key-head-dim = --linear-value-head-dim")
    numbers = {kind: [i + 1 for i, mark in enumerate(marks) if mark == flag] for kind, flag in
               (("kda_layers", 1), ("full_attn_layers", 0))}
    heads, dim, width = cfg.linear_num_key_heads, cfg.linear_key_head_dim, cfg.linear_conv_kernel_dim
    return dict(layer_types=linear_layer_types(marks),
                linear_num_heads=heads, linear_head_dim=dim, linear_conv_kernel_dim=width,
                linear_attn_config={**numbers, "num_heads": heads, "head_dim": dim, "short_conv_kernel_size": width})


def _kimi_linear_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.position_embedding_type != "none":
        raise RegistryError(f"{FAMILY} attends without positions: it needs --position-embedding-type none")
    check_bias_router_hf(cfg, FAMILY, fix="--moe-router-score-function sigmoid with --moe-router-enable-expert-bias")
    out = {**_moe_hf_config(cfg, FAMILY), **group_routing_hf(cfg, FAMILY), "norm_topk_prob": cfg.norm_topk_prob,
           **_kda_layers_hf(cfg)}
    dense = out.pop("first_k_dense_replace")
    out.update(first_k_dense_replace=dense, mlp_layer_types=mlp_layer_types(dense, cfg.num_layers),
               mla_use_nope=True, moe_router_activation_func="sigmoid", num_nextn_predict_layers=0)
    for key in ROPE_KEYS + ("head_dim",):
        out.pop(key, None)
    return {ALIASES_OUT.get(key, key): value for key, value in out.items()}


KIMI_LINEAR = register(Family(FAMILY, FAMILY, "KimiLinearForCausalLM", _kimi_linear_config,
                              _checked(FAMILY, _kimi_linear_config, _kimi_linear_hf_config), KIMI_LINEAR_WEIGHTS,
                              preserved_keys=("output_router_logits",), weights_for=_kimi_linear_weights,
                              hf_tensor_aliases=TENSOR_ALIASES),
                       "kimi-linear")


# --------------------------------------------------------------------------- Bailing's hybrids (Ling)

BAILING = "bailing_hybrid"
# BailingHybridConfig's defaults of the keys read below, under the keys our readers take
BAILING_DEFAULTS = dict(n_routed_experts=512, num_experts_per_tok=8, moe_intermediate_size=768, n_shared_experts=1,
                        routed_scaling_factor=2.5, n_group=8, topk_group=4, norm_topk_prob=True, kv_lora_rank=512,
                        q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                        tie_word_embeddings=False, head_dim=128, short_conv_kernel_size=4, layer_group_size=6,
                        kda_safe_gate=True, kda_lower_bound=-5.0, first_k_dense_replace=2, hidden_act="silu",
                        max_position_embeddings=262144, rms_norm_eps=1e-6, intermediate_size=6144,
                        rope_theta=6000000.0)
BAILING_ALIASES = {**ALIASES, "num_nextn_predict_layers": "num_mtp_layers"}
BAILING_ALIASES_OUT = {ours: alias for alias, ours in BAILING_ALIASES.items() if alias != "num_local_experts"}


def _bailing_canonical(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``hf`` under the DeepSeek-V3 keys with transformers' defaults and its derived lists filled in."""
    out = dict(BAILING_DEFAULTS)
    for key, value in hf.items():
        out[BAILING_ALIASES.get(key, key)] = value
    layers = int(out["num_hidden_layers"])
    out["linear_head_dim"] = int(out.get("linear_head_dim") or out["head_dim"])
    out["linear_num_heads"] = int(out.get("linear_num_heads") or out["num_attention_heads"])
    out["linear_conv_kernel_dim"] = int(out.get("linear_conv_kernel_dim") or out["short_conv_kernel_size"])
    group = int(out["layer_group_size"])
    out["layer_types"] = out.get("layer_types") or [
        "full_attention" if (i + 1) % group == 0 else "linear_attention" for i in range(layers)]
    dense = int(out["first_k_dense_replace"])
    out["mlp_layer_types"] = out.get("mlp_layer_types") or mlp_layer_types(dense, layers)
    return out


def _bailing_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = _bailing_canonical(hf)
    if hf["hidden_act"] != "silu":
        raise RegistryError(f"{BAILING} hidden_act={hf['hidden_act']!r} is not supported: its KDA conv activation "
                            "is SiLU in the decoder")
    if hf["linear_num_heads"] != int(hf["num_attention_heads"]):
        raise RegistryError(f"{BAILING} linear_num_heads={hf['linear_num_heads']} differs from num_attention_heads="
                            f"{hf['num_attention_heads']}: transformers gives KDA the attention's head count")
    kwargs = {**_mla_config(hf, BAILING), "rope_interleaved": True, **_moe_config(hf, BAILING),
              **sigmoid_routing(bool(hf["norm_topk_prob"])), **group_routing(hf, BAILING, score_topk=2),
              **_kda_layers(hf), "attention_output_gate": True, "attention_output_gate_per_head": True}
    _rope_dims(hf, BAILING, kwargs, int(hf["qk_rope_head_dim"]))
    if kwargs.get("experimental_attention_variant"):
        kwargs.update(kda_full_rank_gates=True,
                      kda_gate_lower_bound=float(hf["kda_lower_bound"]) if hf["kda_safe_gate"] else None)
    dense = dense_run(hf["mlp_layer_types"], int(hf["num_hidden_layers"]), BAILING)
    return {**kwargs, "first_k_dense_replace": dense} if dense else kwargs


def _bailing_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    marks = config_marks(cfg)
    require_config(cfg, BAILING, "interleaved RoPE with a sigmoid gate per attention head (--rope-interleaved "
                   "--attention-output-gate --attention-output-gate-per-head)", position_embedding_type="rope",
                   rope_interleaved=True, attention_output_gate=True, attention_output_gate_per_head=True)
    if any(marks):
        kda_ok = (cfg.layer_parts(marks.index(1))[0] == KDA_MIXER and cfg.kda_full_rank_gates
                  and cfg.linear_num_key_heads == cfg.linear_num_value_heads == cfg.num_attention_heads
                  and cfg.linear_key_head_dim == cfg.linear_value_head_dim)
        if not kda_ok:
            raise RegistryError(f"{BAILING} linear layers are Kimi Delta Attention with full-rank gates and the "
                                "attention's head count for keys and values, of one size: --experimental-attention-"
                                "variant kda --kda-full-rank-gates, --linear-num-key-heads = --linear-num-value-heads "
                                "= --num-attention-heads, --linear-key-head-dim = --linear-value-head-dim")
    check_bias_router_hf(cfg, BAILING, fix="--moe-router-score-function sigmoid with --moe-router-enable-expert-bias")
    out = {**_moe_hf_config(cfg, BAILING), **group_routing_hf(cfg, BAILING, score_topk=2),
           "norm_topk_prob": cfg.norm_topk_prob}
    dense = out.pop("first_k_dense_replace")
    head_dim = cfg.linear_key_head_dim if any(marks) else cfg.qk_pos_emb_head_dim
    bound = cfg.kda_gate_lower_bound
    out.update(first_k_dense_replace=dense, mlp_layer_types=mlp_layer_types(dense, cfg.num_layers),
               layer_types=linear_layer_types(marks), head_dim=head_dim, linear_head_dim=head_dim,
               linear_num_heads=cfg.num_attention_heads, short_conv_kernel_size=cfg.linear_conv_kernel_dim,
               linear_conv_kernel_dim=cfg.linear_conv_kernel_dim, kda_safe_gate=bound is not None,
               kda_lower_bound=bound if bound is not None else BAILING_DEFAULTS["kda_lower_bound"], hidden_act="silu")
    return {BAILING_ALIASES_OUT.get(key, key): value for key, value in out.items()}


def _bailing_mtp_layers(hf: Dict[str, Any]) -> Tuple[str, ...]:
    """The prefixes of the MTP layers a checkpoint saves after its decoder layers (transformers loads none)."""
    hf = _bailing_canonical(hf)
    first = int(hf["num_hidden_layers"])
    return tuple(f"model.layers.{first + j}." for j in range(int(hf.get("num_mtp_layers") or 0)))


_ATT = "attention."  # Ling's checkpoints (and transformers' save_pretrained) name every mixer "attention"
BAILING_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.word_embeddings.weight",), "vocab"),
    _layer("input_layernorm.weight", ["input_layernorm.weight"]),
    _layer("pre_mlp_layernorm.weight", ["post_attention_layernorm.weight"]),
    _layer("mlp.linear_fc1.weight", ["mlp.gate_proj.weight", "mlp.up_proj.weight"], "fuse_rows"),
    _layer("mlp.linear_fc2.weight", ["mlp.down_proj.weight"]),
    # MLA layers
    *(_layer(f"self_attention.{ours}", [f"{_ATT}{hf}"]) for ours, hf in (
        ("linear_q_proj.weight", "q_proj.weight"), ("linear_q_down_proj.weight", "q_a_proj.weight"),
        ("q_layernorm.weight", "q_a_layernorm.weight"), ("linear_q_up_proj.weight", "q_b_proj.weight"),
        ("linear_kv_down_proj.weight", "kv_a_proj_with_mqa.weight"), ("kv_layernorm.weight", "kv_a_layernorm.weight"),
        ("linear_kv_up_proj.weight", "kv_b_proj.weight"), ("linear_proj.weight", "dense.weight"),
        ("linear_gate.weight", "g_proj.weight"))),
    # KDA layers
    _layer("self_attention.in_proj.weight", [f"{_ATT}{name}.weight" for name in (
        "q_proj", "k_proj", "v_proj", "b_proj", "f_proj", "g_proj")], "fuse_rows"),
    _layer("self_attention.conv1d.weight", [f"{_ATT}{name}_conv1d.weight" for name in "qkv"], "fuse_rows"),
    *(_layer(f"self_attention.{name}", [f"{_ATT}{name}"]) for name in ("dt_bias", "A_log", "o_norm.weight")),
    _layer("self_attention.o_proj.weight", [f"{_ATT}dense.weight"]),
    # MoE layers: the experts one tensor each, the router and its selection bias, the shared experts
    _layer("mlp.router.expert_bias", ["mlp.gate.expert_bias"]),
) + _SHARED_EXPERT_WEIGHTS
BAILING_FINAL = (WeightRule("decoder.final_layernorm.weight", ("model.norm.weight",)),
                 WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"))


def _bailing_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    experts = per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate") if cfg.num_experts else ()
    return BAILING_WEIGHTS + experts + BAILING_FINAL


BAILING_HYBRID = register(Family(BAILING, BAILING, "BailingHybridForCausalLM", _bailing_config,
                                 _checked(BAILING, _bailing_config, _bailing_hf_config),
                                 BAILING_WEIGHTS + BAILING_FINAL,
                                 preserved_keys=("output_router_logits", "num_nextn_predict_layers",
                                                 "mtp_loss_scaling_factor", "layer_group_size", "pretraining_tp"),
                                 weights_for=_bailing_weights, unloaded_hf_prefixes_for=_bailing_mtp_layers),
                          "bailing-hybrid", "ling")

"""Kimi Linear (``kimi_linear``) as registry data: Kimi Delta Attention layers beside multi-latent attention
without positions, each with DeepSeek-V3's MoE (or a dense MLP in the leading layers).

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
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from core.transformer.config import KDA_MIXER, TransformerConfig
from mindspeed_llm.models.families.hybrid_paired import _without_positions
from mindspeed_llm.models.families.linear_attention import config_marks, linear_layer_types, linear_marks
from mindspeed_llm.models.families.mla import MLA_WEIGHTS, _mla_config
from mindspeed_llm.models.families.mla_moe import _check_remote_key, _moe_config, _moe_hf_config
from mindspeed_llm.models.families.moe_common import (check_bias_router_hf, dense_run, group_routing,
                                                      group_routing_hf, mlp_layer_types, per_expert_weights,
                                                      sigmoid_routing)
from mindspeed_llm.models.registry import (ROPE_KEYS, TRANSFORMS, Family, RegistryError, TensorContext, WeightRule,
                                           _checked, _layer, register)

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

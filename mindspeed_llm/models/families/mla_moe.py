"""Multi-latent-attention MoE families: DeepSeek-V2 (``deepseek_v2``), DeepSeek-V3 (``deepseek_v3``),
GLM-4.7-Flash (``glm4_moe_lite``), Mistral 4 (``mistral4``), and the sparse-attention ones, DeepSeek-V3.2
(``deepseek_v32``) and GLM-5 (``glm_moe_dsa``).

All four are MLA layers (``mla.MLA_WEIGHTS``, ``core/transformer/mla.py``) whose MLP is a dense SwiGLU
MLP in the first ``first_k_dense_replace`` layers (``intermediate_size``, ``--first-k-dense-replace``) and an
MoE layer after: routed experts of ``moe_intermediate_size`` (``--moe-ffn-hidden-size``) plus a shared expert
of ``n_shared_experts * moe_intermediate_size`` (``--n-shared-experts``), the top-k weights times
``routed_scaling_factor`` (``--moe-router-topk-scaling-factor``). They differ in routing and RoPE:

* ``deepseek_v2``: softmax over all experts then top-k (``--moe-router-pre-softmax``), no renormalisation
  (transformers ignores ``norm_topk_prob``, so True is refused); ``topk_method`` ``greedy`` or
  ``group_limited_greedy`` (groups scored by their best expert: ``--moe-router-group-score-topk 1``);
  interleaved RoPE always.
* ``deepseek_v3`` / ``glm4_moe_lite``: sigmoid scores (``--moe-router-score-function sigmoid``), the
  ``e_score_correction_bias`` buffer added for the selection only (our router's ``expert_bias``,
  ``--moe-router-enable-expert-bias``), groups (``n_group`` > 1) scored by the sum of their best two
  (``--moe-router-group-score-topk 2``), ``norm_topk_prob``; ``rope_interleave`` (default true). GLM names
  its dense layers in ``mlp_layer_types`` (a leading run only). DeepSeek-V3's ``num_nextn_predict_layers``
  is ``--mtp-num-layers``, its MTP layers ``model.layers.{L + k}.*`` (registry.mtp_weight_rules);
  transformers ignores them, and a checkpoint saved by transformers (without them) converts without MTP.
* ``mistral4``: DeepSeek-V3's layout with a softmax router (pre-softmax, top-2-sum groups,
  ``norm_topk_prob``), experts saved as fused 3-D tensors (``experts.gate_up_proj`` [E, 2f, h] with gate
  rows first, ``experts.down_proj`` [E, h, f]: our stacked layout, copied), RoPE over
  ``partial_rotary_factor`` of ``qk_nope_head_dim + qk_rope_head_dim`` (must be the rope dims) and the
  Llama-4 query temperature (``llama_4_scaling_beta`` over ``original_max_position_embeddings``:
  ``--attn-temperature-beta``/``--attn-temperature-length``).

* ``deepseek_v32`` / ``glm_moe_dsa``: DeepSeek-V3's layers (``mlp_layer_types`` or ``first_k_dense_replace`` for
  the dense ones; a q latent always) with DeepSeek Sparse Attention (``--experimental-attention-variant dsa``):
  ``index_n_heads``, ``index_head_dim``, ``index_topk`` are ``--dsa-indexer-n-heads/-head-dim/-topk``, the
  indexer's weights ``self_attn.indexer.{wq_b, wk, k_norm, weights_proj}`` and its key LayerNorm's eps 1e-6.
  MLA's RoPE is interleaved; the indexer's is half-split in V3.2 and interleaved in GLM-5
  (``--dsa-indexer-rope-interleaved``). GLM-5's ``indexer_types`` ("full" computes the top-k, "shared" reuses the
  last full layer's) must be Megatron-core's pattern of some ``--dsa-indexer-topk-freq`` and
  ``--dsa-indexer-skip-topk-offset``. The published checkpoints are FP8: their dequantisation is the
  low-precision issue's (the converter refuses a ``quantization_config``).

The remote-code keys transformers does not read are refused unless they agree with what it computes
(``moe_layer_freq`` 1, ``scoring_func``, ``topk_method``); ``aux_loss_alpha`` / ``seq_aux`` set the training
loss (``--moe-aux-loss-coeff``, ``--moe-router-load-balancing-type seq_aux_loss``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from core.transformer.config import TransformerConfig, dsa_topk_source
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _layer, mtp_config, mtp_hf_config,
                                           register, require_config, with_mtp_weights)
from mindspeed_llm.models.families.mla import MLA_WEIGHTS, _mla_config, _mla_hf_config
from mindspeed_llm.models.families.moe_common import (check_bias_router_hf, dense_run, group_routing,
                                                      group_routing_hf, mlp_layer_types, per_expert_weights,
                                                      sigmoid_routing)

# keys our config does not model, kept for the inverse (``ep_size``: the remote code's runtime EP degree)
_PRESERVED = ("ep_size", "output_router_logits")
# transformers' config defaults of the keys read below (a config.json may omit them)
_MLA_DEFAULTS = dict(kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                     tie_word_embeddings=False, first_k_dense_replace=0, n_shared_experts=1, routed_scaling_factor=1.0,
                     n_group=1, topk_group=1)
_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "deepseek_v2": dict(_MLA_DEFAULTS, n_routed_experts=64, moe_intermediate_size=1407, n_shared_experts=2,
                        topk_method="greedy", norm_topk_prob=False),
    "deepseek_v3": dict(_MLA_DEFAULTS, n_routed_experts=256, moe_intermediate_size=2048, routed_scaling_factor=2.5,
                        n_group=8, topk_group=4, num_experts_per_tok=8, first_k_dense_replace=3, norm_topk_prob=True),
    "glm4_moe_lite": dict(_MLA_DEFAULTS, n_routed_experts=64, moe_intermediate_size=1536, routed_scaling_factor=1.8,
                          num_experts_per_tok=4, norm_topk_prob=True, q_lora_rank=768, qk_nope_head_dim=192,
                          v_head_dim=256, rms_norm_eps=1e-5),
    "mistral4": dict(_MLA_DEFAULTS, n_routed_experts=128, moe_intermediate_size=2048, num_experts_per_tok=4,
                     norm_topk_prob=True, kv_lora_rank=256, q_lora_rank=1024, qk_nope_head_dim=64),
}
# transformers' Mistral4 RoPE when config.json has none (partial_rotary_factor: the rope share of the q/k head)
MISTRAL4_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                 "llama_4_scaling_beta": 0.1}
_SHARED_EXPERT_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("mlp.shared_experts.linear_fc1.weight",
           ["mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"], "fuse_rows"),
    _layer("mlp.shared_experts.linear_fc2.weight", ["mlp.shared_experts.down_proj.weight"]))
_EXPERT_BIAS_WEIGHT = _layer("mlp.router.expert_bias", ["mlp.gate.e_score_correction_bias"])
# Mistral4 saves the experts as transformers holds them: [E, 2f, h] (gate rows, then up) and [E, h, f]
_FUSED_EXPERT_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("mlp.router.weight", ["mlp.gate.weight"]),
    _layer("mlp.experts.linear_fc1.weight", ["mlp.experts.gate_up_proj"]),
    _layer("mlp.experts.linear_fc2.weight", ["mlp.experts.down_proj"]))


# --------------------------------------------------------------------------- HF -> ours


def _check_remote_key(hf: Dict[str, Any], family: str, key: str, expected: Any) -> None:
    """A remote-code key transformers ignores must say what transformers computes."""
    if key in hf and hf[key] is not None and hf[key] != expected:
        raise RegistryError(f"{family} {key}={hf[key]!r} is not supported: transformers computes {expected!r}")


def _moe_config(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """Experts, top-k, expert and shared-expert sizes, scaling factor and the training aux loss."""
    _check_remote_key(hf, family, "moe_layer_freq", 1)
    experts, moe_ffn = int(hf["n_routed_experts"]), int(hf["moe_intermediate_size"])
    shared = int(hf.get("n_shared_experts") or 0)
    scaling = float(hf.get("routed_scaling_factor", 1.0))
    aux = float(hf.get("aux_loss_alpha") or 0.0)
    return dict(num_experts=experts, moe_router_topk=int(hf["num_experts_per_tok"]), moe_ffn_hidden_size=moe_ffn,
                moe_shared_expert_intermediate_size=shared * moe_ffn if shared else None,
                moe_router_topk_scaling_factor=scaling if scaling != 1.0 else None, moe_aux_loss_coeff=aux,
                moe_router_load_balancing_type="seq_aux_loss" if aux and hf.get("seq_aux") else "aux_loss")


def _leading_dense(hf: Dict[str, Any]) -> Dict[str, Any]:
    dense = int(hf.get("first_k_dense_replace") or 0)
    return {"first_k_dense_replace": dense} if dense else {}


def _rope_dims(hf: Dict[str, Any], family: str, kwargs: Dict[str, Any], head_dim: int) -> None:
    """transformers rotates ``int(head_dim * partial_rotary_factor)`` dims: they must be the rope dims."""
    percent = kwargs.pop("rotary_percent", 1.0)
    if int(head_dim * percent) != int(hf["qk_rope_head_dim"]):
        raise RegistryError(f"{family} partial_rotary_factor={percent} rotates {int(head_dim * percent)} dims, "
                            f"not qk_rope_head_dim={hf['qk_rope_head_dim']}")


def _deepseek_v2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """DeepSeek-V2: pre-softmax routing, greedy or group-limited (group = its best expert), interleaved RoPE."""
    family = "deepseek_v2"
    hf = {**_DEFAULTS[family], **hf}
    method = hf.get("topk_method") or "greedy"
    if method not in ("greedy", "group_limited_greedy"):
        raise RegistryError(f"{family} topk_method={method!r} is not supported (greedy, group_limited_greedy)")
    if hf.get("norm_topk_prob", False):
        raise RegistryError(f"{family} norm_topk_prob=True is not supported: transformers' DeepseekV2 ignores it")
    _check_remote_key(hf, family, "scoring_func", "softmax")
    kwargs = {**_mla_config(hf, family), "rope_interleaved": True, **_moe_config(hf, family),
              "moe_router_pre_softmax": True, **_leading_dense(hf)}
    if method == "group_limited_greedy":
        kwargs.update(group_routing(hf, family, score_topk=1))
    _rope_dims(hf, family, kwargs, int(hf["qk_rope_head_dim"]))
    return kwargs


def _sigmoid_config(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """DeepSeek-V3 / GLM-4.7-Flash routing: sigmoid with the correction bias, top-2-sum groups."""
    hf = {**_DEFAULTS[family], **hf}
    _check_remote_key(hf, family, "scoring_func", "sigmoid")
    _check_remote_key(hf, family, "topk_method", "noaux_tc")
    kwargs = {**_mla_config(hf, family), "rope_interleaved": bool(hf.get("rope_interleave", True)),
              **_moe_config(hf, family), **sigmoid_routing(bool(hf.get("norm_topk_prob", True))),
              **group_routing(hf, family, score_topk=2)}
    _rope_dims(hf, family, kwargs, int(hf["qk_rope_head_dim"]))
    return kwargs


def _deepseek_v3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**_DEFAULTS["deepseek_v3"], **hf}
    return {**_sigmoid_config(hf, "deepseek_v3"), **_leading_dense(hf), **mtp_config(hf)}


def _glm4_moe_lite_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """GLM-4.7-Flash: DeepSeek-V3's routing; dense layers from ``mlp_layer_types`` (default: the first)."""
    family = "glm4_moe_lite"
    _check_remote_key(hf, family, "first_k_dense_replace", _leading_dense_count(hf))
    hf = {**_DEFAULTS[family], **hf}
    layers = int(hf["num_hidden_layers"])
    dense = dense_run(hf.get("mlp_layer_types") or mlp_layer_types(1, layers), layers, family)
    kwargs = _sigmoid_config(hf, family)
    return {**kwargs, "first_k_dense_replace": dense} if dense else kwargs


def _leading_dense_count(hf: Dict[str, Any]) -> int:
    types = hf.get("mlp_layer_types") or ["dense"]
    return next((i for i, kind in enumerate(types) if kind != "dense"), len(types))


def _mistral4_rope_params(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}


def _mistral4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Mistral 4: pre-softmax routing with top-2-sum groups, partial RoPE over the q/k head, query temperature."""
    family = "mistral4"
    hf = {**_DEFAULTS[family], **hf}
    params = _mistral4_rope_params(hf) or dict(MISTRAL4_ROPE)
    head_dim = int(hf["qk_nope_head_dim"]) + int(hf["qk_rope_head_dim"])
    params.setdefault("partial_rotary_factor", int(hf["qk_rope_head_dim"]) / head_dim)
    hf = {**hf, "rope_parameters": params, "rope_scaling": None}
    kwargs = {**_mla_config(hf, family), "rope_interleaved": bool(hf.get("rope_interleave", True)),
              **_moe_config(hf, family), "moe_router_pre_softmax": True,
              "norm_topk_prob": bool(hf.get("norm_topk_prob", True)), **group_routing(hf, family, score_topk=2),
              **_leading_dense(hf)}
    _rope_dims(hf, family, kwargs, head_dim)
    beta = params.get("llama_4_scaling_beta")
    if beta:
        length = params.get("original_max_position_embeddings")
        if not length:
            raise RegistryError(f"{family} llama_4_scaling_beta needs rope_parameters original_max_position_embeddings")
        kwargs.update(attn_temperature_beta=float(beta), attn_temperature_length=int(length))
    return kwargs


_DSA_DEFAULTS: Dict[str, Dict[str, Any]] = {  # transformers' defaults of the DSA families' keys read below
    "deepseek_v32": dict(_DEFAULTS["deepseek_v3"], index_topk=2048, index_head_dim=128, index_n_heads=64),
    "glm_moe_dsa": dict(_DEFAULTS["deepseek_v3"], n_group=1, topk_group=1, q_lora_rank=2048, qk_nope_head_dim=192,
                        v_head_dim=256, rms_norm_eps=1e-5, index_topk=2048, index_head_dim=128, index_n_heads=32),
}
HF_INDEXER_NORM_EPS = 1e-6  # transformers' indexer k_norm ignores rms_norm_eps


def _glm_indexer_types(hf: Dict[str, Any]) -> List[str]:
    """GLM-5's per-layer indexer kinds as transformers derives them (``indexer_types``, else
    ``index_topk_pattern``, else ``index_topk_freq`` / ``index_skip_topk_offset``)."""
    if hf.get("indexer_types"):
        return list(hf["indexer_types"])
    pattern = hf.get("index_topk_pattern")
    if pattern is not None:
        return [{"F": "full", "S": "shared"}[c] for c in pattern] if isinstance(pattern, str) else list(pattern)
    freq, offset = max(int(hf.get("index_topk_freq", 1)), 1), int(hf.get("index_skip_topk_offset", 2))
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(int(hf["num_hidden_layers"]))]


def _dsa_kinds(cfg: TransformerConfig, layers: int) -> List[str]:
    return ["full" if cfg.dsa_topk_source(i) == i else "shared" for i in range(layers)]


def _dsa_sharing(kinds: List[str], family: str) -> Dict[str, int]:
    """The (--dsa-indexer-topk-freq, --dsa-indexer-skip-topk-offset) whose pattern is ``kinds``; refused if none."""
    layers = len(kinds)
    for freq in range(1, layers + 1):
        for offset in range(0, layers + 1):
            if ["full" if dsa_topk_source(i, freq, offset) == i else "shared" for i in range(layers)] == kinds:
                return {"dsa_indexer_topk_freq": freq, "dsa_indexer_skip_topk_offset": offset}
    raise RegistryError(f"{family} indexer_types={kinds} is not a pattern of every N-th layer computing its top-k "
                        "(--dsa-indexer-topk-freq with --dsa-indexer-skip-topk-offset)")


def _dsa_config(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    """DeepSeek-V3's layers with sparse attention: dense layers by ``mlp_layer_types``, the indexer's sizes."""
    hf = {**_DSA_DEFAULTS[family], **hf}
    if hf.get("q_lora_rank") is None:
        raise RegistryError(f"{family} needs q_lora_rank: transformers' attention always has a query latent")
    layers = int(hf["num_hidden_layers"])
    dense = dense_run(hf.get("mlp_layer_types") or mlp_layer_types(int(hf["first_k_dense_replace"] or 0), layers),
                      layers, family)
    kwargs = {**_sigmoid_config({**hf, "rope_interleave": True}, "deepseek_v3"), **mtp_config(hf),
              "experimental_attention_variant": "dsa", "dsa_indexer_n_heads": int(hf["index_n_heads"]),
              "dsa_indexer_head_dim": int(hf["index_head_dim"]), "dsa_indexer_topk": int(hf["index_topk"]),
              "dsa_indexer_rope_interleaved": family == "glm_moe_dsa"}
    if dense:
        kwargs["first_k_dense_replace"] = dense
    if kwargs["norm_epsilon"] != HF_INDEXER_NORM_EPS:
        kwargs["dsa_indexer_k_norm_epsilon"] = HF_INDEXER_NORM_EPS
    if family == "glm_moe_dsa":
        kwargs.update(_dsa_sharing(_glm_indexer_types(hf)[:layers], family))
    return kwargs


def _deepseek_v32_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return _dsa_config(hf, "deepseek_v32")


def _glm_moe_dsa_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return _dsa_config(hf, "glm_moe_dsa")


# --------------------------------------------------------------------------- ours -> HF


def _moe_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    """The shared MoE keys; refuses what these families cannot express."""
    if cfg.num_experts is None:
        raise RegistryError(f"{family} needs --num-experts (its MLPs after --first-k-dense-replace are MoE)")
    require_config(cfg, family, moe_layer_freq=1, moe_expert_capacity_factor=None, shared_expert_gate=False)
    moe_ffn, shared = cfg.moe_expert_ffn_hidden_size, cfg.moe_shared_expert_intermediate_size or 0
    if shared % moe_ffn:
        raise RegistryError(f"{family} sizes the shared expert as n_shared_experts x moe_intermediate_size; "
                            f"{shared} is not a multiple of {moe_ffn}")
    out = _mla_hf_config(cfg, family)
    out.update(mlp_bias=False, n_routed_experts=cfg.num_experts, num_experts_per_tok=cfg.moe_router_topk,
               moe_intermediate_size=moe_ffn, n_shared_experts=shared // moe_ffn,
               routed_scaling_factor=cfg.moe_router_topk_scaling_factor or 1.0,
               first_k_dense_replace=cfg.first_k_dense_replace, moe_layer_freq=1,
               aux_loss_alpha=cfg.moe_aux_loss_coeff, seq_aux=cfg.moe_router_load_balancing_type == "seq_aux_loss")
    return out


def _deepseek_v2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    family = "deepseek_v2"
    require_config(cfg, family, "--moe-router-pre-softmax without --norm-topk-prob or the expert bias, and "
                   "--rope-interleaved", moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   norm_topk_prob=False, moe_router_enable_expert_bias=False, rope_interleaved=True)
    out = {**_moe_hf_config(cfg, family), **group_routing_hf(cfg, family, score_topk=1), "norm_topk_prob": False,
           "scoring_func": "softmax"}
    out["topk_method"] = "group_limited_greedy" if cfg.moe_router_num_groups is not None else "greedy"
    return out


def _sigmoid_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    check_bias_router_hf(cfg, family, fix="--moe-router-score-function sigmoid with --moe-router-enable-expert-bias")
    return {**_moe_hf_config(cfg, family), **group_routing_hf(cfg, family, score_topk=2),
            "norm_topk_prob": cfg.norm_topk_prob, "rope_interleave": cfg.rope_interleaved,
            "scoring_func": "sigmoid", "topk_method": "noaux_tc"}


def _deepseek_v3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_sigmoid_hf_config(cfg, "deepseek_v3"), **mtp_hf_config(cfg)}


def _glm4_moe_lite_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _sigmoid_hf_config(cfg, "glm4_moe_lite")
    dense = out.pop("first_k_dense_replace")
    out["mlp_layer_types"] = mlp_layer_types(dense, cfg.num_layers)
    return out


def _mistral4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    family = "mistral4"
    require_config(cfg, family, "--moe-router-pre-softmax without the expert bias", moe_router_score_function="softmax",
                   moe_router_pre_softmax=True, moe_router_enable_expert_bias=False)
    out = {**_moe_hf_config(cfg, family), **group_routing_hf(cfg, family, score_topk=2),
           "norm_topk_prob": cfg.norm_topk_prob, "rope_interleave": cfg.rope_interleaved}
    rope = {**(out.pop("rope_scaling") or {"rope_type": "default"}), "rope_theta": out.pop("rope_theta")}
    length: Optional[int] = cfg.attn_temperature_length
    yarn_length = rope.get("original_max_position_embeddings")
    if length is not None and yarn_length is not None and length != yarn_length:
        raise RegistryError(f"{family} reads one original_max_position_embeddings: --attn-temperature-length "
                            f"{length} must equal the YaRN original context {yarn_length}")
    # transformers reads both keys whatever the rope type
    rope.update(llama_4_scaling_beta=cfg.attn_temperature_beta or 0.0,
                original_max_position_embeddings=length or yarn_length or cfg.max_position_embeddings,
                partial_rotary_factor=cfg.qk_pos_emb_head_dim / (cfg.qk_head_dim + cfg.qk_pos_emb_head_dim))
    out["head_dim"] = cfg.qk_head_dim + cfg.qk_pos_emb_head_dim
    return {**out, "rope_parameters": rope}


def _dsa_hf_config(cfg: TransformerConfig, family: str) -> Dict[str, Any]:
    """The DSA families' config.json: DeepSeek-V3's keys without rope_interleave, mlp_layer_types, the indexer."""
    if not cfg.is_dsa or cfg.q_lora_rank is None:
        raise RegistryError(f"{family} needs --experimental-attention-variant dsa with a --q-lora-rank")
    require_config(cfg, family, "--rope-interleaved, and --dsa-indexer-rope-interleaved only for glm_moe_dsa",
                   rope_interleaved=True, dsa_indexer_rope_interleaved=family == "glm_moe_dsa")
    eps = cfg.dsa_indexer_k_norm_epsilon if cfg.dsa_indexer_k_norm_epsilon is not None else cfg.norm_epsilon
    if eps != HF_INDEXER_NORM_EPS:
        raise RegistryError(f"{family}'s indexer key norm uses eps {HF_INDEXER_NORM_EPS}; set "
                            f"--dsa-indexer-k-norm-epsilon {HF_INDEXER_NORM_EPS} (it is {eps})")
    out = {**_sigmoid_hf_config(cfg, family), **mtp_hf_config(cfg), "index_n_heads": cfg.dsa_indexer_n_heads,
           "index_head_dim": cfg.dsa_indexer_head_dim, "index_topk": cfg.dsa_indexer_topk}
    out.pop("rope_interleave")  # transformers' DSA attention always interleaves
    out["mlp_layer_types"] = mlp_layer_types(out["first_k_dense_replace"], cfg.num_layers)
    if family == "glm_moe_dsa":
        out["indexer_types"] = _dsa_kinds(cfg, cfg.num_layers)
    elif cfg.dsa_indexer_topk_freq != 1:
        raise RegistryError(f"{family} computes the top-k in every layer: drop --dsa-indexer-topk-freq "
                            f"{cfg.dsa_indexer_topk_freq} (GLM-5, glm_moe_dsa, shares it)")
    return out


def _deepseek_v32_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return _dsa_hf_config(cfg, "deepseek_v32")


def _glm_moe_dsa_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return _dsa_hf_config(cfg, "glm_moe_dsa")


# --------------------------------------------------------------------------- weights and registration


def _per_expert_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """MLA + dense MLP rules (dense layers), per-expert and shared-expert rules (MoE layers)."""
    return (MLA_WEIGHTS + per_expert_weights(cfg, "mlp", "gate_proj", "up_proj", "down_proj", "gate")
            + _SHARED_EXPERT_WEIGHTS + (_EXPERT_BIAS_WEIGHT,))


# DSA's lightning indexer (core/transformer/sparse_attention.py), whole on every TP rank
DSA_INDEXER_WEIGHTS: Tuple[WeightRule, ...] = tuple(
    _layer(f"self_attention.indexer.{name}", [f"self_attn.indexer.{name}"])
    for name in ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight"))


def _dsa_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return _per_expert_weights(cfg) + DSA_INDEXER_WEIGHTS


def _fused_expert_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return MLA_WEIGHTS + _FUSED_EXPERT_WEIGHTS + _SHARED_EXPERT_WEIGHTS


DEEPSEEK_V2 = register(Family("deepseek_v2", "deepseek_v2", "DeepseekV2ForCausalLM", _deepseek_v2_config,
                              _deepseek_v2_hf_config, MLA_WEIGHTS, preserved_keys=_PRESERVED,
                              weights_for=_per_expert_weights), "deepseek2", "deepseek2-lite")
DEEPSEEK_V3 = register(Family("deepseek_v3", "deepseek_v3", "DeepseekV3ForCausalLM", _deepseek_v3_config,
                              _deepseek_v3_hf_config, MLA_WEIGHTS, preserved_keys=_PRESERVED,
                              weights_for=with_mtp_weights(_per_expert_weights)), "deepseek3")
GLM4_MOE_LITE = register(Family("glm4_moe_lite", "glm4_moe_lite", "Glm4MoeLiteForCausalLM", _glm4_moe_lite_config,
                                _glm4_moe_lite_hf_config, MLA_WEIGHTS, preserved_keys=_PRESERVED,
                                weights_for=_per_expert_weights))
MISTRAL4 = register(Family("mistral4", "mistral4", "Mistral4ForCausalLM", _mistral4_config, _mistral4_hf_config,
                           MLA_WEIGHTS, preserved_keys=_PRESERVED, weights_for=_fused_expert_weights))
DEEPSEEK_V32 = register(Family("deepseek_v32", "deepseek_v32", "DeepseekV32ForCausalLM", _deepseek_v32_config,
                               _deepseek_v32_hf_config, MLA_WEIGHTS + DSA_INDEXER_WEIGHTS, preserved_keys=_PRESERVED,
                               weights_for=with_mtp_weights(_dsa_weights)), "deepseek32")
GLM_MOE_DSA = register(Family("glm_moe_dsa", "glm_moe_dsa", "GlmMoeDsaForCausalLM", _glm_moe_dsa_config,
                              _glm_moe_dsa_hf_config, MLA_WEIGHTS + DSA_INDEXER_WEIGHTS, preserved_keys=_PRESERVED,
                              weights_for=with_mtp_weights(_dsa_weights)), "glm5")

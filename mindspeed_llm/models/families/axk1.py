"""SK Telecom's A.X-K1 (``axk1``): DeepSeek-V3's layers with an RMSNorm on each MoE block's output.

transformers' ``AXK1`` is DeepSeek-V3 (``mla_moe``'s ``deepseek_v3``: MLA, sigmoid top-k routing with the
``e_score_correction_bias`` selection bias, top-2-sum groups, ``norm_topk_prob``, ``routed_scaling_factor``, a
shared expert) with one change: an MoE layer's output, routed plus shared, goes through ``post_mlp_layernorm``
(RMSNorm, ``rms_norm_eps``) before the residual add; the dense layers have none. That is ``--moe-output-norm``
(``decoder.layers.{i}.post_mlp_layernorm`` on the MoE layers only). HF keys as in ``deepseek_v3``, and:

* ``mlp_layer_types`` (a leading run of ``dense`` then ``sparse``) is ``--first-k-dense-replace``; without it the
  legacy ``first_k_dense_replace`` (default 1, not DeepSeek-V3's 3) with ``moe_layer_freq`` 1, as transformers
  derives it. Both are written on export.
* ``q_lora_rank`` must be set: transformers' A.X-K1 attention always has the query latent.
* ``num_nextn_predict_layers`` is ``--mtp-num-layers`` (MTP layers ``model.layers.{L + k}.*``, their MoE layer
  with its ``post_mlp_layernorm`` too); transformers drops them when it saves, and such a checkpoint converts
  without MTP.

Tensor names as saved (transformers renames ``mlp.post_mlp_layernorm`` back to the layer level on save)::

    decoder.layers.{i}.post_mlp_layernorm.weight        model.layers.{i}.post_mlp_layernorm.weight   (MoE layers)
    decoder.layers.{i}.mlp.router.expert_bias           model.layers.{i}.mlp.gate.e_score_correction_bias
    decoder.layers.{i}.mlp.experts.linear_fc1/fc2       model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj
    decoder.layers.{i}.mlp.shared_experts.linear_fc1/2  model.layers.{i}.mlp.shared_experts.{gate,up,down}_proj

The published checkpoints also store a ``post_mlp_layernorm`` in the dense layers, which transformers does not
load (its ``_keys_to_ignore_on_load_unexpected``): the converter leaves those out with a note.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.families.mla import MLA_WEIGHTS, _mla_config
from mindspeed_llm.models.families.mla_moe import (_MLA_DEFAULTS, _PRESERVED, _check_remote_key, _moe_config,
                                                   _per_expert_weights, _rope_dims, _sigmoid_hf_config)
from mindspeed_llm.models.families.moe_common import dense_run, group_routing, mlp_layer_types, sigmoid_routing
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _layer, mtp_config, mtp_hf_config,
                                           register, require_config, with_mtp_weights)

FAMILY = "axk1"
# transformers' AXK1Config defaults of the keys read below (a config.json may omit them); the legacy
# first_k_dense_replace is handled by _mlp_layer_types
_DEFAULTS: Dict[str, Any] = dict({k: v for k, v in _MLA_DEFAULTS.items() if k != "first_k_dense_replace"},
                                 n_routed_experts=192, moe_intermediate_size=2048, routed_scaling_factor=2.5,
                                 n_group=8, topk_group=4, num_experts_per_tok=8, norm_topk_prob=True,
                                 rms_norm_eps=1e-6, max_position_embeddings=32768)
HF_LEGACY_FIRST_DENSE = 1  # AXK1Config's default first_k_dense_replace when mlp_layer_types is absent
_OUTPUT_NORM_WEIGHT = _layer("post_mlp_layernorm.weight", ["post_mlp_layernorm.weight"])


# --------------------------------------------------------------------------- HF -> ours


def _mlp_layer_types(hf: Dict[str, Any]) -> List[str]:
    """``mlp_layer_types``, or what transformers derives from the legacy ``first_k_dense_replace`` and
    ``moe_layer_freq`` (layer ``i`` sparse when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``)."""
    if hf.get("mlp_layer_types"):
        return list(hf["mlp_layer_types"])
    first = int(hf.get("first_k_dense_replace", HF_LEGACY_FIRST_DENSE) or 0)
    freq = int(hf.get("moe_layer_freq") or 1)
    return ["sparse" if i >= first and i % freq == 0 else "dense" for i in range(int(hf["num_hidden_layers"]))]


def _leading_dense(hf: Dict[str, Any]) -> int:
    """The leading dense layers; a ``first_k_dense_replace`` beside ``mlp_layer_types`` must agree with it."""
    layers = int(hf["num_hidden_layers"])
    dense = dense_run(_mlp_layer_types(hf), layers, FAMILY)
    if hf.get("mlp_layer_types"):
        _check_remote_key(hf, FAMILY, "first_k_dense_replace", dense)
    return dense


def _axk1_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """DeepSeek-V3's MLA and sigmoid routing, the leading dense layers, MTP, and the MoE output norm."""
    hf = {**_DEFAULTS, **hf}
    if hf.get("q_lora_rank") is None:
        raise RegistryError(f"{FAMILY} needs q_lora_rank: transformers' A.X-K1 attention always has a query latent")
    _check_remote_key(hf, FAMILY, "scoring_func", "sigmoid")
    _check_remote_key(hf, FAMILY, "topk_method", "noaux_tc")
    kwargs = {**_mla_config(hf, FAMILY), "rope_interleaved": bool(hf.get("rope_interleave", True)),
              **_moe_config(hf, FAMILY), **sigmoid_routing(bool(hf.get("norm_topk_prob", True))),
              **group_routing(hf, FAMILY, score_topk=2), **mtp_config(hf), "moe_output_norm": True}
    _rope_dims(hf, FAMILY, kwargs, int(hf["qk_rope_head_dim"]))
    dense = _leading_dense(hf)
    return {**kwargs, "first_k_dense_replace": dense} if dense else kwargs


def _dense_output_norms(hf: Dict[str, Any]) -> Tuple[str, ...]:
    """The dense layers' ``post_mlp_layernorm`` that the published checkpoints store and nothing reads."""
    types = _mlp_layer_types({**_DEFAULTS, **hf})
    return tuple(f"model.layers.{i}.post_mlp_layernorm." for i, kind in enumerate(types) if kind == "dense")


# --------------------------------------------------------------------------- ours -> HF


def _axk1_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    """DeepSeek-V3's keys with ``mlp_layer_types`` (and the matching legacy keys); refuses a model without the
    MoE output norm or the query latent."""
    require_config(cfg, FAMILY, "--moe-output-norm", moe_output_norm=True)
    if cfg.q_lora_rank is None:
        raise RegistryError(f"{FAMILY} always has a query latent: set --q-lora-rank")
    out = {**_sigmoid_hf_config(cfg, FAMILY), **mtp_hf_config(cfg)}
    out["mlp_layer_types"] = mlp_layer_types(out["first_k_dense_replace"], cfg.num_layers)
    return out


# --------------------------------------------------------------------------- weights and registration


def _axk1_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """DeepSeek-V3's per-expert map plus the MoE layers' output norm."""
    return _per_expert_weights(cfg) + (_OUTPUT_NORM_WEIGHT,)


AXK1 = register(Family(FAMILY, "axk1", "AXK1ForCausalLM", _axk1_config, _axk1_hf_config, MLA_WEIGHTS,
                       preserved_keys=_PRESERVED, weights_for=with_mtp_weights(_axk1_weights),
                       unloaded_hf_prefixes_for=_dense_output_norms))

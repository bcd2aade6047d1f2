"""Parity cases of A.X-K1 (``axk1``; merged into ``test_zoo_parity.CASES``).

DeepSeek-V3's tiny MLA MoE (``cases_mla_moe``: four heads, expert FFN 32, one shared expert) with a leading dense
layer, so the output norm (``--moe-output-norm``) must sit on the MoE layers only: a norm on the dense layer, or
none on the MoE layers, has no tensor to read (and changes the logits). The router's ``e_score_correction_bias``
is perturbed by ``test_zoo_parity.build_hf_model``.

* ``axk1``: sigmoid with the bias, top-2 within the best 2 of 4 groups of 2 (scored by their best two),
  renormalised, scaled by 2.5, interleaved RoPE with YaRN, ``rms_norm_eps`` 1e-5 (the output norms' eps; the
  latent norms keep 1e-6), one dense layer by ``mlp_layer_types``, and ``num_nextn_predict_layers`` 1 (transformers
  saves no MTP tensors: the converter drops MTP).
* ``axk1_half_rotation``: two leading dense layers by the legacy ``first_k_dense_replace``, rope_interleave false,
  one group, no renormalisation, no scaling, attention biases.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

_MLA = dict(num_key_value_heads=4, kv_lora_rank=24, q_lora_rank=20, qk_nope_head_dim=12, qk_rope_head_dim=8,
            v_head_dim=10)
_MOE = dict(_MLA, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
            bos_token_id=None, eos_token_id=None)
_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
         "mscale": 0.8, "mscale_all_dim": 0.9}

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "axk1": ("AXK1Config", "AXK1ForCausalLM",
             dict(_MOE, n_routed_experts=8, n_group=4, topk_group=2, mlp_layer_types=["dense", "sparse", "sparse"],
                  routed_scaling_factor=2.5, norm_topk_prob=True, rms_norm_eps=1e-5, rope_parameters=_YARN,
                  num_nextn_predict_layers=1), "axk1"),
    "axk1_half_rotation": ("AXK1Config", "AXK1ForCausalLM",
                           dict(_MOE, n_group=1, topk_group=1, first_k_dense_replace=2, norm_topk_prob=False,
                                rope_interleave=False, attention_bias=True, routed_scaling_factor=1.0), "axk1"),
}

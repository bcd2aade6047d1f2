"""Parity cases of the softmax-routed MoE families (``mindspeed_llm/models/families/moe_softmax.py``, merged
into ``test_zoo_parity.CASES``): Mixtral, Qwen3Moe, Qwen2Moe, OLMoE and the rest.

Four experts, top-2 (so the tiny training test's tokens reach every expert), expert FFN 32; every family's
distinguishing setting is on (Granite's multipliers and attention biases, a shared expert, DBRX's q/k/v
clipping, PhiMoE's biases and a SparseMixer eps wide enough that the softmax covers several experts).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

GRANITE_SCALES = dict(embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3, logits_scaling=6.0)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM",
                   dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, attention_bias=True,
                        **GRANITE_SCALES), "granitemoe"),
    "granitemoeshared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
                         dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32,
                              shared_intermediate_size=48, tie_word_embeddings=True, **GRANITE_SCALES),
                         "granitemoeshared"),
    "granitemoe_swa": ("GraniteMoeSWAConfig", "GraniteMoeSWAForCausalLM",
                       dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32,
                            shared_intermediate_size=48, sliding_window=4,
                            layer_types=["full_attention", "sliding_attention", "sliding_attention"],
                            layer_rope_theta=[10000.0, 500.0, 500.0], **GRANITE_SCALES), "granitemoe_swa"),
    "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32, norm_topk_prob=True,
                       pad_token_id=0, eos_token_id=1), "flex_olmo"),
    "hunyuan_v1_moe": ("HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM",
                       dict(num_experts=4, moe_topk=2, intermediate_size=32, head_dim=16, attention_bias=True,
                            rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0,
                                             "rope_theta": 10000.0}), "hunyuan-moe"),
    "dbrx": ("DbrxConfig", "DbrxForCausalLM",
             dict(d_model=64, n_heads=4, n_layers=3, max_seq_len=256,  # BASE's aliases reach d_model too late
                  ffn_config=dict(moe_num_experts=4, moe_top_k=2, ffn_hidden_size=32),
                  attn_config=dict(kv_n_heads=2, clip_qkv=0.5, rope_theta=5000.0),
                  rope_parameters={"rope_type": "default", "rope_theta": 5000.0}), "dbrx"),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM",
               dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, attention_bias=True,
                    lm_head_bias=True, router_jitter_noise=0.3), "phimoe"),
    # variants: a window on every layer and the default eps; DBRX's top-k left unnormalised, a clip that never
    # acts (transformers 5.24's DBRX fails on clip_qkv null and reads attn_config.rope_theta, unused, so both are set)
    "phimoe_sliding": ("PhimoeConfig", "PhimoeForCausalLM",
                       dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, sliding_window=4),
                       "phimoe"),
    "dbrx_unnormalised": ("DbrxConfig", "DbrxForCausalLM",
                          dict(d_model=64, n_heads=4, n_layers=3, max_seq_len=256,
                               ffn_config=dict(moe_num_experts=4, moe_top_k=2, ffn_hidden_size=32,
                                               moe_normalize_expert_weights=None),
                               attn_config=dict(kv_n_heads=2, clip_qkv=100.0, rope_theta=10000.0)), "dbrx"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16), "mixtral"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16,
                       norm_topk_prob=True), "qwen3-moe"),
    "qwen3_moe_dense_first": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                              dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16,
                                   mlp_only_layers=[0], norm_topk_prob=False), "qwen3_moe"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                       norm_topk_prob=False), "qwen2-moe"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32, clip_qkv=4.0), "olmoe"),
}

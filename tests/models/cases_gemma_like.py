"""Parity cases of the Gemma-style families (``mindspeed_llm/models/families/gemma_like.py``), merged into
``test_zoo_parity.CASES``: name -> (HF config class, HF model class, config overrides, --model-type-hf).

VaultGemma; the ModernBERT decoder tied with its decoder bias, a window of 8 // 2 and local/global RoPE bases,
and untied with every bias and the tanh GELU (``modernbert_decoder_biases``; an odd local_attention 9 gives
window 4); Gemma4 unified text whose full layers have their own head dim (32), one KV head, values equal to
their keys' projection (attention_k_eq_v) and proportional RoPE on half their angles, with q/k/v/o biases and
a final softcap, and with one attention shape for all layers (``gemma4_unified_one_shape``); Gemma4 text
(``gemma4``) without per-layer inputs, the same decoder under Gemma4ForCausalLM. Gemma4's RMSNorm epsilon is
0.5: the last layer's scalar feeds the final RMSNorm, which is scale invariant up to the epsilon, so with 1e-6
that scalar's gradient would be ~0 and the training-step test could not check it.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM",
                   dict(head_dim=16, sliding_window=4, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                        final_logit_softcapping=3.0), "vaultgemma"),
    "modernbert_decoder": ("ModernBertDecoderConfig", "ModernBertDecoderForCausalLM",
                           dict(local_attention=8, global_attn_every_n_layers=2, pad_token_id=0,
                                rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5000.0},
                                                 "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}}),
                           "modernbert_decoder"),
    "modernbert_decoder_biases": ("ModernBertDecoderConfig", "ModernBertDecoderForCausalLM",
                                  dict(local_attention=9, pad_token_id=0, norm_bias=True, attention_bias=True, mlp_bias=True,
                                       classifier_bias=True, classifier_activation="gelu_pytorch_tanh",
                                       hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=False),
                                  "modernbert-decoder"),
    "gemma4_unified": ("Gemma4UnifiedTextConfig", "Gemma4UnifiedForCausalLM",
                       dict(head_dim=16, global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1,
                            sliding_window=4, final_logit_softcapping=3.0, rms_norm_eps=0.5, attention_bias=True,
                            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                             "full_attention": {"rope_type": "proportional", "rope_theta": 5000.0,
                                                                "partial_rotary_factor": 0.5}}), "gemma4_unified"),
    "gemma4": ("Gemma4TextConfig", "Gemma4ForCausalLM",
               dict(head_dim=16, global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1,
                    hidden_size_per_layer_input=0, sliding_window=4, final_logit_softcapping=3.0, rms_norm_eps=0.5,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                     "full_attention": {"rope_type": "proportional", "rope_theta": 5000.0,
                                                        "partial_rotary_factor": 0.25}}), "gemma4"),
    "gemma4_unified_one_shape": ("Gemma4UnifiedTextConfig", "Gemma4UnifiedForCausalLM",
                                 dict(head_dim=16, global_head_dim=16, sliding_window=4, rms_norm_eps=0.5,
                                      layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                      rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                                       "full_attention": {"rope_type": "default", "rope_theta": 5000.0}}),
                                 "gemma4_unified"),
}

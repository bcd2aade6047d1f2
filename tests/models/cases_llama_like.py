"""Tiny parity cases of the Llama-like families (mindspeed_llm/models/families/llama_like.py), merged into
``tests/models/test_zoo_parity.CASES``; also Qwen2/Qwen3 with per-layer sliding windows.

Each case stresses its family's behaviour: Seed-OSS biases by place, HunYuan's q/k norms after RoPE and its
``dynamic`` RoPE with ``alpha``, ERNIE's interleaved RoPE with every bias, CWM's full layers at 0 (mod 4)
with Llama-3 RoPE, GLM's half-width interleaved RoPE, GLM-4's sandwich norms, Emu3's text model, and
Ministral3's YaRN ramp (a short original context, so the ramp spans several dims and the Llama-4 query
temperature changes within the 12 test positions); Qwen2/Qwen3 with ``use_sliding_window`` and
``max_window_layers``, and Olmo3 with YaRN on its full-attention layers only.
``exaone4``: every 3rd layer full and without RoPE; ``exaone4_no_window``: every layer full and rotated;
``hyperclovax``: sandwich norms and all of Granite's multipliers.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "original_max_position_embeddings": 8,
        "beta_fast": 4.0, "beta_slow": 0.1, "mscale": 1.0, "mscale_all_dim": 0.5, "llama_4_scaling_beta": 0.3}

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM",
                 dict(head_dim=24, attention_out_bias=True, attention_dropout=0.0, residual_dropout=0.0), "seed-oss"),
    "seed_oss_mlp_bias": ("SeedOssConfig", "SeedOssForCausalLM",
                          dict(head_dim=16, attention_bias=False, mlp_bias=True, attention_dropout=0.0,
                               residual_dropout=0.0), "seed_oss"),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM",
                         dict(head_dim=16, attention_bias=True,
                              rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0,
                                               "rope_theta": 10000.0}), "hunyuan"),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", dict(head_dim=16, use_bias=True), "ernie4_5"),
    "cwm": ("CwmConfig", "CwmForCausalLM", dict(head_dim=16, sliding_window=4, bos_token_id=1, eos_token_id=2),
            "cwm"),
    "glm": ("GlmConfig", "GlmForCausalLM", dict(head_dim=16, pad_token_id=0, eos_token_id=2), "glm"),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(head_dim=24, pad_token_id=0, eos_token_id=2, rms_norm_eps=1e-5),
             "glm4"),
    "emu3": ("Emu3TextConfig", "Emu3ForCausalLM",
             dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, attention_dropout=0.0), "emu3"),
    "ministral3": ("Ministral3Config", "Ministral3ForCausalLM",
                   dict(head_dim=16, sliding_window=6, rope_parameters=YARN, pad_token_id=0), "ministral3"),
    "qwen2_window": ("Qwen2Config", "Qwen2ForCausalLM",
                     dict(use_sliding_window=True, sliding_window=4, max_window_layers=1), "qwen2"),
    "qwen3_window": ("Qwen3Config", "Qwen3ForCausalLM",
                     dict(head_dim=16, use_sliding_window=True, sliding_window=5, max_window_layers=2), "qwen3"),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM",
                dict(head_dim=16, sliding_window=4, sliding_window_pattern=3,
                     layer_types=["sliding_attention", "sliding_attention", "full_attention"]), "exaone4"),
    "exaone4_no_window": ("Exaone4Config", "Exaone4ForCausalLM",
                          dict(sliding_window=None, tie_word_embeddings=True,
                               layer_types=["full_attention"] * 3), "exaone4"),
    "hyperclovax": ("HyperCLOVAXConfig", "HyperCLOVAXForCausalLM",
                    dict(embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3,
                         logits_scaling=0.5), "hyperclovax"),
    # layers 0 full, 1-2 sliding (transformers' default layout); sinks perturbed like every weight; a second
    # RoPE base on the sliding layers
    "granite_swa": ("GraniteSWAConfig", "GraniteSWAForCausalLM",
                    dict(sliding_window=4, embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3,
                         logits_scaling=6.0, layer_rope_theta=[10000.0, 300.0, 300.0]), "granite_swa"),
    "granite_swa_nope": ("GraniteSWAConfig", "GraniteSWAForCausalLM",
                         dict(sliding_window=4, tie_word_embeddings=False, layer_rope_theta=[0, 5000.0, 5000.0]),
                         "granite_swa"),
}

# YaRN (--rope-scaling-type yarn) on Olmo3's full-attention layers only, the sliding ones unscaled
CASES["olmo3_yarn"] = ("Olmo3Config", "Olmo3ForCausalLM",
                       dict(sliding_window=4, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                            rope_parameters={"full_attention": {k: v for k, v in YARN.items()
                                                                if k != "llama_4_scaling_beta"},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 300.0}}),
                       "olmo3")

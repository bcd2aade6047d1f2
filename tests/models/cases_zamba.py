"""Parity cases of Zamba2 and Zamba (merged into ``test_zoo_parity.CASES``).

Six layers, three of them hybrid ('Z'), over two shared blocks: the first and third hybrid layers share block 0,
so a block's weights serve two depths with two different adapters. The first case has the attention adapters
(q, k, v; KV heads = query heads, as transformers needs), RoPE (``use_mem_rope``) and Mamba2 with 2 groups of
8 heads over a chunk of 5 of the 12 tokens; the second has grouped KV heads, no attention adapters, no
positions, one block, a hybrid first layer and untied embeddings.

Zamba (v1): Mamba1 layers of 4 independent SSMs (``n_mamba_heads``, each its own x_proj / dt_proj) and one
shared block (no adapters, no positions, GQA) at two depths; the second case has untied embeddings (a block per
hybrid layer, as transformers ties them only with the embeddings), one SSM and a hybrid first layer.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

ZAMBA = dict(mamba_d_state=8, mamba_dt_rank=6, num_attention_heads=4, rms_norm_eps=1e-6, initializer_range=0.1,
             time_step_min=0.5, time_step_max=2.0)  # dt drawn larger than the published init: gradients well above 0
ZAMBA2 = dict(n_mamba_heads=8, mamba_d_state=8, mamba_ngroups=2, chunk_size=5, adapter_rank=4, rms_norm_eps=1e-5,
              initializer_range=0.1)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "zamba2": ("Zamba2Config", "Zamba2ForCausalLM",
               dict(ZAMBA2, num_hidden_layers=6, num_key_value_heads=4, num_mem_blocks=2,
                    use_shared_attention_adapter=True, use_mem_rope=True,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                    layers_block_type=["linear_attention", "hybrid", "linear_attention", "hybrid", "hybrid",
                                       "linear_attention"]), "zamba2"),
    "zamba2_gqa_no_positions": ("Zamba2Config", "Zamba2ForCausalLM",
                                dict(ZAMBA2, num_mem_blocks=1, tie_word_embeddings=False, mamba_ngroups=1,
                                     layers_block_type=["hybrid", "linear_attention", "hybrid"]), "zamba2"),
    "zamba": ("ZambaConfig", "ZambaForCausalLM",
              dict(ZAMBA, n_mamba_heads=4, num_hidden_layers=5, num_key_value_heads=2,
                   layers_block_type=["linear_attention", "hybrid", "linear_attention", "linear_attention",
                                      "hybrid"]), "zamba"),
    "zamba_untied_one_ssm": ("ZambaConfig", "ZambaForCausalLM",
                             dict(ZAMBA, n_mamba_heads=1, tie_word_embeddings=False, num_key_value_heads=4,
                                  layers_block_type=["hybrid", "linear_attention", "hybrid"]), "zamba"),
}

"""Parity cases of Zamba2 (merged into ``test_zoo_parity.CASES``).

Six layers, three of them hybrid ('Z'), over two shared blocks: the first and third hybrid layers share block 0,
so a block's weights serve two depths with two different adapters. The first case has the attention adapters
(q, k, v; KV heads = query heads, as transformers needs), RoPE (``use_mem_rope``) and Mamba2 with 2 groups of
8 heads over a chunk of 5 of the 12 tokens; the second has grouped KV heads, no attention adapters, no
positions, one block, a hybrid first layer and untied embeddings.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

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
}

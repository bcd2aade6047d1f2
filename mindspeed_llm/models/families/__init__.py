"""The registry's families, one module per kind of model; each module registers its families at import.

``registry.py`` imports every module of this package (:func:`mindspeed_llm.models.registry._load_family_modules`),
so a new module needs no edit elsewhere. What each module holds:

* ``absolute_positions``: learned or sinusoidal absolute positions (GPT-2, GPTBigCode, GPT-Neo, OPT, BioGpt, XGLM);
* ``alibi``: ALiBi attention biases instead of RoPE (Bloom, MPT);
* ``parallel_residual``: attention and MLP side by side, the GPT-NeoX lineage and Falcon;
* ``cohere``: Cohere's parallel layer with one shared LayerNorm (Command-R, Command-R7B, Compass text);
* ``llama_like``: Llama's layout with RMSNorm and SwiGLU plus behaviour flags;
* ``mlp_variants``: Llama's layout with another MLP (non-gated, ReLU squared, xIELU, BitNet's sub-norms);
* ``gemma_like``: GeGLU decoders with local and global layers, each with its own RoPE base;
* ``mla``: dense multi-latent attention;
* ``moe_common``: the pieces the mixture-of-experts modules share (expert weight rules, routing keys);
* ``moe_softmax``: softmax-routed mixtures of experts, one tensor per expert or fused;
* ``moe_sigmoid``: sigmoid or expert-bias routed mixtures of experts (DeepSeek-V3's router on Llama attention);
* ``gated_attention_moe``: mixtures of experts with a sigmoid-gated attention output and NoPE full layers (AFMoE);
* ``kolibri_mellum_flint``: Qwen3-MoE-style experts with sliding-window layers (Mellum, Flint, Kolibri-1);
* ``axk1``: DeepSeek-V3's layers with a norm on the MoE layers' outputs (A.X-K1);
* ``moe_variants``: MoE versions of covered decoders (EXAONE-MoE, Cohere2-MoE, MiniCPM5-MoE);
* ``moe_fused_experts``: mixtures of experts whose experts are stored as transposed 3-D tensors;
* ``mla_moe``: multi-latent attention with DeepSeek's mixture of experts;
* ``deepseek_v4``: DeepSeek-V4's compressed attention, hyper-connections and hash-routed experts;
* ``minimax``: MiniMax-Text-01's lightning-attention layers beside attention, with post-norm residuals;
* ``ssm``: state-space models (Mamba, Mamba2).
"""

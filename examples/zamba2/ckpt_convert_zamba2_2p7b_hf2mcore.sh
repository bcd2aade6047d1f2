#!/usr/bin/env bash
# Convert Zamba2-2.7B from Hugging Face safetensors (transformers' Zamba2ForCausalLM layout, model_type zamba2) to our
# Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_zamba2_2p7b_ptd.sh): each hybrid layer becomes a 'Z'
# layer, and the shared blocks (saved once, under the first hybrid layer of each) with their per-depth adapters
# become decoder.shared_blocks.{k} and each 'Z' layer's own adapters; sizes are read from its config.json.
#   bash examples/zamba2/ckpt_convert_zamba2_2p7b_hf2mcore.sh
#   SMOKE=1 bash examples/zamba2/ckpt_convert_zamba2_2p7b_hf2mcore.sh   # a tiny random zamba2 model (Mamba2, hybrid, Mamba2, hybrid over 2 shared blocks), TP=2 PP=2
#   DRY_RUN=1 bash examples/zamba2/ckpt_convert_zamba2_2p7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Zamba2-2.7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/zamba2-2p7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=zamba2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (2 Mamba
# heads of 64 make expand 2 of the tiny hidden 64)
HF_MODEL_TYPE=zamba2 HF_CONFIG='{"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"], "n_mamba_heads": 2, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "chunk_size": 256, "num_mem_blocks": 2, "adapter_rank": 128, "use_shared_attention_adapter": false, "use_mem_rope": false, "hidden_act": "gelu", "rms_norm_eps": 1e-05, "time_step_min": 0.001, "add_bias_linear": false, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_hf2mcore

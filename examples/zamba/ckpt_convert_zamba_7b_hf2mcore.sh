#!/usr/bin/env bash
# Convert Zamba-7B-v1 from Hugging Face safetensors (transformers' ZambaForCausalLM layout, model_type zamba) to our
# Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_zamba_7b_ptd.sh): each hybrid layer becomes a 'Z'
# layer, the shared block (saved once, under the first hybrid layer) becomes decoder.shared_blocks.0, and each Mamba
# mixer's per-SSM tensors ([heads, ...]) and interleaved x/gate in_proj rows our flat layout; sizes are read from
# its config.json.
#   bash examples/zamba/ckpt_convert_zamba_7b_hf2mcore.sh
#   SMOKE=1 bash examples/zamba/ckpt_convert_zamba_7b_hf2mcore.sh   # a tiny random zamba model (Mamba1, hybrid, Mamba1, hybrid), TP=2 PP=2
#   DRY_RUN=1 bash examples/zamba/ckpt_convert_zamba_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Zamba-7B-v1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/zamba-7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=zamba

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=zamba HF_CONFIG='{"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"], "n_mamba_heads": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true, "mamba_proj_bias": false, "hidden_act": "gelu", "hidden_mamba_act": "silu", "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_hf2mcore

#!/usr/bin/env bash
# Convert Bamba-9B from Hugging Face safetensors (transformers' BambaForCausalLM layout, model_type bamba) to our
# Megatron (mcore) layout at TP=4 PP=1 (the layout of pretrain_bamba_9b_ptd.sh); each HF layer becomes two pattern
# letters (its mixer, its MLP), and the attention layers (attn_layer_indices), Mamba2 and attention sizes are read
# from its config.json.
#   bash examples/bamba/ckpt_convert_bamba_9b_hf2mcore.sh
#   SMOKE=1 bash examples/bamba/ckpt_convert_bamba_9b_hf2mcore.sh   # a tiny random bamba model (Mamba2, attention, Mamba2, Mamba2, each with its MLP), TP=2 PP=2
#   DRY_RUN=1 bash examples/bamba/ckpt_convert_bamba_9b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Bamba-9B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/bamba-9b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=bamba

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (4 Mamba
# heads of 32 make expand 2 of the tiny hidden 64)
HF_MODEL_TYPE=bamba HF_CONFIG='{"num_hidden_layers": 4, "attn_layer_indices": [1], "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "attention_bias": false, "mlp_bias": false, "z_loss_coefficient": 0.0, "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'

recipe_hf2mcore

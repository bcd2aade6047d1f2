#!/usr/bin/env bash
# Convert Nemotron-H-56B-Base-8K from Hugging Face safetensors (transformers' NemotronHForCausalLM layout, model_type
# nemotron_h) to our Megatron (mcore) layout at TP=8 PP=2 (the layout of pretrain_nemotron_h_56b_ptd.sh); the
# hybrid pattern, Mamba2 and attention sizes are read from its config.json.
#   bash examples/nemotron_h/ckpt_convert_nemotron_h_56b_hf2mcore.sh
#   SMOKE=1 bash examples/nemotron_h/ckpt_convert_nemotron_h_56b_hf2mcore.sh   # a tiny random nemotron_h model (Mamba2, MLP, attention, MLP), TP=2 PP=2
#   DRY_RUN=1 bash examples/nemotron_h/ckpt_convert_nemotron_h_56b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Nemotron-H-56B-Base-8K}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/nemotron-h-56b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
MODEL_TYPE_HF=nemotron_h

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (8 groups as the real model: 8 Mamba heads, of 16 so that they make expand 2 of the tiny hidden 64)
HF_MODEL_TYPE=nemotron_h HF_CONFIG='{"layers_block_type": ["mamba", "mlp", "attention", "mlp"], "head_dim": 32, "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4, "chunk_size": 128, "use_conv_bias": true, "use_bias": false, "mamba_hidden_act": "silu", "time_step_min": 0.001, "mlp_hidden_act": "relu2", "mlp_bias": false, "attention_bias": false, "layer_norm_epsilon": 1e-05, "residual_in_fp32": false, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

recipe_hf2mcore

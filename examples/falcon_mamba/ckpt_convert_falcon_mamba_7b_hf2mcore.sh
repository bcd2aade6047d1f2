#!/usr/bin/env bash
# Convert FalconMamba-7B from Hugging Face safetensors (transformers' FalconMambaForCausalLM layout, model_type
# falcon_mamba; tiiuae/falcon-mamba-7b) to our Megatron (mcore) layout at TP=4 PP=1 (the layout of
# pretrain_falcon_mamba_7b_ptd.sh).
#   bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_hf2mcore.sh
#   SMOKE=1 bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_hf2mcore.sh   # a tiny random falcon_mamba model, TP=2 PP=2
#   DRY_RUN=1 bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/falcon-mamba-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/falcon-mamba-7b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
# "expand": 16 with intermediate_size 2 x hidden, as the published config.json has it (intermediate_size wins)
MODEL_TYPE_HF=falcon_mamba

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon_mamba HF_CONFIG='{"state_size": 16, "expand": 16, "conv_kernel": 4, "time_step_rank": 256, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-05, "mixer_rms_eps": 1e-06, "residual_in_fp32": true, "tie_word_embeddings": false}'

recipe_hf2mcore

#!/usr/bin/env bash
# Convert Ministral-3-8B-Base-2512 (text model) from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_ministral3_8b_ptd.sh).
#   bash examples/ministral3/ckpt_convert_ministral3_8b_hf2mcore.sh
#   SMOKE=1 bash examples/ministral3/ckpt_convert_ministral3_8b_hf2mcore.sh   # a tiny random ministral3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/ministral3/ckpt_convert_ministral3_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Ministral-3-8B-Base-2512-text}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ministral3-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=ministral3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral3 HF_CONFIG='{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}, "rms_norm_eps": 1e-05, "head_dim": 16, "tie_word_embeddings": false, "max_position_embeddings": 262144, "pad_token_id": 0}'

recipe_hf2mcore

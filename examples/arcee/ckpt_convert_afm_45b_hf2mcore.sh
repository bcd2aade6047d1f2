#!/usr/bin/env bash
# Convert AFM-4.5B from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_afm_45b_ptd.sh).
#   bash examples/arcee/ckpt_convert_afm_45b_hf2mcore.sh
#   SMOKE=1 bash examples/arcee/ckpt_convert_afm_45b_hf2mcore.sh   # a tiny random arcee model, TP=2 PP=2
#   DRY_RUN=1 bash examples/arcee/ckpt_convert_afm_45b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/AFM-4.5B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/afm-45b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=arcee

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=arcee HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

recipe_hf2mcore

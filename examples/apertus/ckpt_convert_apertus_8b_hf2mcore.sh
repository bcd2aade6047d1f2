#!/usr/bin/env bash
# Convert Apertus-8B-2509 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_apertus_8b_ptd.sh).
#   bash examples/apertus/ckpt_convert_apertus_8b_hf2mcore.sh
#   SMOKE=1 bash examples/apertus/ckpt_convert_apertus_8b_hf2mcore.sh   # a tiny random apertus model, TP=2 PP=2
#   DRY_RUN=1 bash examples/apertus/ckpt_convert_apertus_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Apertus-8B-2509}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/apertus-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=apertus

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=apertus HF_CONFIG='{"hidden_act": "xielu", "rms_norm_eps": 1e-05, "attention_bias": false, "rope_parameters": {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "dtype": "float32"}'

recipe_hf2mcore

#!/usr/bin/env bash
# Convert HyperCLOVAX-SEED-Text-Instruct-1.5B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_hyperclovax_15b_ptd.sh).
#   bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_hf2mcore.sh
#   SMOKE=1 bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_hf2mcore.sh   # a tiny random hyperclovax model, TP=2 PP=2
#   DRY_RUN=1 bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/HyperCLOVAX-SEED-Text-Instruct-1.5B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/hyperclovax-15b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=hyperclovax

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hyperclovax HF_CONFIG='{"use_post_norm": true, "rms_norm_eps": 1e-05, "rope_theta": 50000000.0, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_hf2mcore

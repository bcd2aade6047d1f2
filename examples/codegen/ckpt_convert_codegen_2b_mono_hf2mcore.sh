#!/usr/bin/env bash
# Convert codegen-2B-mono from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_codegen_2b_mono_ptd.sh).
#   bash examples/codegen/ckpt_convert_codegen_2b_mono_hf2mcore.sh
#   SMOKE=1 bash examples/codegen/ckpt_convert_codegen_2b_mono_hf2mcore.sh   # a tiny random codegen model, TP=2 PP=2
#   DRY_RUN=1 bash examples/codegen/ckpt_convert_codegen_2b_mono_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/codegen-2B-mono}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/codegen-2b-mono-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
# (rotary_dim 12 of the tiny model's 16 dims per head: codegen-2B's 64 of 80 (80% either way rounds to 12))
MODEL_TYPE_HF=codegen

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=codegen HF_CONFIG='{"rotary_dim": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": false, "n_positions": 2048, "n_ctx": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_hf2mcore

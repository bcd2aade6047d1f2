#!/usr/bin/env bash
# Convert Emu3 text model (8B) from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_emu3_8b_ptd.sh).
#   bash examples/emu3/ckpt_convert_emu3_8b_hf2mcore.sh
#   SMOKE=1 bash examples/emu3/ckpt_convert_emu3_8b_hf2mcore.sh   # a tiny random emu3_text_model model, TP=2 PP=2
#   DRY_RUN=1 bash examples/emu3/ckpt_convert_emu3_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Emu3-Chat-text}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/emu3-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=emu3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=emu3_text_model HF_CONFIG='{"rope_theta": 1000000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 9216, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "attention_dropout": 0.0}'

recipe_hf2mcore

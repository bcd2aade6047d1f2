#!/usr/bin/env bash
# Convert SmolLM3-3B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_smollm3_3b_ptd.sh).
#   bash examples/smollm3/ckpt_convert_smollm3_3b_hf2mcore.sh
#   SMOKE=1 bash examples/smollm3/ckpt_convert_smollm3_3b_hf2mcore.sh   # a tiny random smollm3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/smollm3/ckpt_convert_smollm3_3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/SmolLM3-3B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/smollm3-3b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
# (no_rope_layers [1, 0]: the tiny model's 2 layers keep one NoPE layer, as every 4th is in the 36;
# pad_token_id null: the published 128004 is outside the tiny vocabulary)
MODEL_TYPE_HF=smollm3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=smollm3 HF_CONFIG='{"no_rope_layers": [1, 0], "pad_token_id": null, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "use_sliding_window": false, "tie_word_embeddings": true, "max_position_embeddings": 65536}'

recipe_hf2mcore

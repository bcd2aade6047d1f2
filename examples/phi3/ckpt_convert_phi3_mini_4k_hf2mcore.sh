#!/usr/bin/env bash
# Convert Phi-3-mini-4k-instruct from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_phi3_mini_4k_ptd.sh).
#   bash examples/phi3/ckpt_convert_phi3_mini_4k_hf2mcore.sh
#   SMOKE=1 bash examples/phi3/ckpt_convert_phi3_mini_4k_hf2mcore.sh   # a tiny random phi3 model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Phi-3-mini-4k-instruct}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/phi3-mini-4k-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup phi3 '{"num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": false, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "pad_token_id": null}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf phi3 \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

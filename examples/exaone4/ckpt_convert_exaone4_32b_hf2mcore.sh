#!/usr/bin/env bash
# Convert EXAONE-4.0-32B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2
# (the layout of pretrain_exaone4_32b_ptd.sh).
#   bash examples/exaone4/ckpt_convert_exaone4_32b_hf2mcore.sh
#   SMOKE=1 bash examples/exaone4/ckpt_convert_exaone4_32b_hf2mcore.sh   # a tiny random exaone4 model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/EXAONE-4.0-32B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/exaone4-32b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup exaone4 '{"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"], "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 131072}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf exaone4 \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

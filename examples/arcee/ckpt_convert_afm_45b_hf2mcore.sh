#!/usr/bin/env bash
# Convert AFM-4.5B from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_afm_45b_ptd.sh).
#   bash examples/arcee/ckpt_convert_afm_45b_hf2mcore.sh
#   SMOKE=1 bash examples/arcee/ckpt_convert_afm_45b_hf2mcore.sh   # a tiny random arcee model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/AFM-4.5B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/afm-45b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup arcee '{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf arcee \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

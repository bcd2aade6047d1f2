#!/usr/bin/env bash
# Convert mpt-7b from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_mpt_7b_ptd.sh).
#   bash examples/mpt/ckpt_convert_mpt_7b_hf2mcore.sh
#   SMOKE=1 bash examples/mpt/ckpt_convert_mpt_7b_hf2mcore.sh   # a tiny random mpt model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/mpt-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mpt-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup mpt '{"max_seq_len": 2048, "no_bias": true, "layer_norm_epsilon": 1e-05, "attn_config": {"alibi": true, "alibi_bias_max": 8, "clip_qkv": null, "softmax_scale": null}, "tie_word_embeddings": true}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf mpt \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

#!/usr/bin/env bash
# Convert gpt-neo-1.3B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_gpt_neo_1_3b_ptd.sh).
#   bash examples/gpt_neo/ckpt_convert_gpt_neo_1_3b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_neo/ckpt_convert_gpt_neo_1_3b_hf2mcore.sh   # a tiny random gpt_neo model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt-neo-1.3B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gpt-neo-1_3b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup gpt_neo '{"attention_types": [[["global", "local"], 1]], "window_size": 256, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf gpt_neo \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

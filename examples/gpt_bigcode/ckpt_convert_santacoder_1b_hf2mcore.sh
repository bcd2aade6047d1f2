#!/usr/bin/env bash
# Convert gpt_bigcode-santacoder from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_santacoder_1b_ptd.sh).
#   bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_hf2mcore.sh   # a tiny random gpt_bigcode model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt_bigcode-santacoder}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/santacoder-1b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup gpt_bigcode '{"multi_query": true, "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 2048}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf gpt_bigcode \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

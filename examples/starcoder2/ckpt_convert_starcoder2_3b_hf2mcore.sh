#!/usr/bin/env bash
# Convert starcoder2-3b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_starcoder2_3b_ptd.sh).
#   bash examples/starcoder2/ckpt_convert_starcoder2_3b_hf2mcore.sh
#   SMOKE=1 bash examples/starcoder2/ckpt_convert_starcoder2_3b_hf2mcore.sh   # a tiny random starcoder2 model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/starcoder2-3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/starcoder2-3b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup starcoder2 '{"rope_theta": 999999.4420358813, "sliding_window": 8, "use_bias": true, "norm_epsilon": 1e-05, "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true, "max_position_embeddings": 16384}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf starcoder2 \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

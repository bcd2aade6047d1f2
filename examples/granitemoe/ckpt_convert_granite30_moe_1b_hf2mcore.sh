#!/usr/bin/env bash
# Convert granite-3.0-1b-a400m-base from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=8
# (the layout of pretrain_granite30_moe_1b_ptd.sh).
#   bash examples/granitemoe/ckpt_convert_granite30_moe_1b_hf2mcore.sh
#   SMOKE=1 bash examples/granitemoe/ckpt_convert_granite30_moe_1b_hf2mcore.sh   # a tiny random granitemoe model, TP=2 PP=2 EP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/granite-3.0-1b-a400m-base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/granite-3.0-1b-a400m-base-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup granitemoe '{"num_local_experts": 32, "num_experts_per_tok": 8, "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 6.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf granitemoe \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" --target-expert-parallel-size "$EP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

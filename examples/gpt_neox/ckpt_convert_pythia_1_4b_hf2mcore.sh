#!/usr/bin/env bash
# Convert pythia-1.4b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_pythia_1_4b_ptd.sh).
#   bash examples/gpt_neox/ckpt_convert_pythia_1_4b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_neox/ckpt_convert_pythia_1_4b_hf2mcore.sh   # a tiny random gpt_neox model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/pythia-1.4b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/pythia-1-4b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup gpt_neox '{"rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true, "attention_bias": true, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf gpt_neox \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

#!/usr/bin/env bash
# Convert Youtu-LLM-2B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_youtu_2b_ptd.sh).
#   bash examples/youtu/ckpt_convert_youtu_2b_hf2mcore.sh
#   SMOKE=1 bash examples/youtu/ckpt_convert_youtu_2b_hf2mcore.sh   # a tiny random youtu model, TP=2 PP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Youtu-LLM-2B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/youtu-llm-2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup youtu '{"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "rope_interleave": true, "rms_norm_eps": 1e-06, "rope_theta": 1600000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf youtu \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

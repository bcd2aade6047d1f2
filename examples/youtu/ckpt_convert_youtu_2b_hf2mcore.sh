#!/usr/bin/env bash
# Convert Youtu-LLM-2B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_youtu_2b_ptd.sh).
#   bash examples/youtu/ckpt_convert_youtu_2b_hf2mcore.sh
#   SMOKE=1 bash examples/youtu/ckpt_convert_youtu_2b_hf2mcore.sh   # a tiny random youtu model, TP=2 PP=2
#   DRY_RUN=1 bash examples/youtu/ckpt_convert_youtu_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Youtu-LLM-2B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/youtu-llm-2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=youtu

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=youtu HF_CONFIG='{"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "rope_interleave": true, "rms_norm_eps": 1e-06, "rope_theta": 1600000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_hf2mcore

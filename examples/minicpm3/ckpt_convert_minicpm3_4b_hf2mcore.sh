#!/usr/bin/env bash
# Convert MiniCPM3-4B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_minicpm3_4b_ptd.sh).
# The published LongRoPE rope_scaling is refused by the converter (RegistryError): convert a config without it.
#   bash examples/minicpm3/ckpt_convert_minicpm3_4b_hf2mcore.sh
#   SMOKE=1 bash examples/minicpm3/ckpt_convert_minicpm3_4b_hf2mcore.sh   # a tiny random minicpm3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/minicpm3/ckpt_convert_minicpm3_4b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/MiniCPM3-4B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/minicpm3-4b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=minicpm3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minicpm3 HF_CONFIG='{"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_hf2mcore

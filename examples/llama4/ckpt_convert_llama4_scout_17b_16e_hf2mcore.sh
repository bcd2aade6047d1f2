#!/usr/bin/env bash
# Convert the text model of Llama-4-Scout-17B-16E from Hugging Face safetensors (a text-only
# Llama4ForCausalLM checkpoint, model_type llama4_text) to our Megatron (mcore) layout at TP=4 PP=4 EP=4
# (the layout of pretrain_llama4_scout_17b_16e_ptd.sh).
#   bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh
#   SMOKE=1 bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh   # a tiny random llama4_text model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Llama-4-Scout-17B-16E}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/llama4-scout-17b-16e-mcore-tp4pp4ep4}
TP=${TP:-4} PP=${PP:-4} EP=${EP:-4}
# of Scout's 4, so that the 2-layer smoke model has a NoPE layer)
MODEL_TYPE_HF=llama4

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama4_text HF_CONFIG='{"num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "use_qk_norm": true, "attention_chunk_size": 8192, "attn_temperature_tuning": true, "floor_scale": 8192, "attn_scale": 0.1, "no_rope_layer_interval": 2, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

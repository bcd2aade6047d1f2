#!/usr/bin/env bash
# Convert Hunyuan-A13B-Pretrain from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=8
# (the layout of pretrain_hunyuan_a13b_ptd.sh).
#   bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_hf2mcore.sh
#   SMOKE=1 bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_hf2mcore.sh   # a tiny random hunyuan_v1_moe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Hunyuan-A13B-Pretrain}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/hunyuan-a13b-pretrain-mcore-tp2pp2ep8}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-8}
MODEL_TYPE_HF=hunyuan-moe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_moe HF_CONFIG='{"num_experts": 64, "moe_topk": [8, 8], "num_shared_expert": [1, 1], "use_mixed_mlp_moe": true, "use_qk_norm": true, "use_cla": false, "rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

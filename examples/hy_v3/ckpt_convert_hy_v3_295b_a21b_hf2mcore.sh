#!/usr/bin/env bash
# Convert HY-V3 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=4 EP=32
# (the layout of pretrain_hy_v3_295b_a21b_ptd.sh).
#   bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh
#   SMOKE=1 bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh   # a tiny random hy_v3 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/HY-V3}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/hy-v3-295b-a21b-mcore-tp1pp4ep32}
TP=${TP:-1} PP=${PP:-4} EP=${EP:-32}
MODEL_TYPE_HF=hy_v3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hy_v3 HF_CONFIG='{"num_experts": 192, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "num_shared_experts": 1, "router_scaling_factor": 2.826, "mlp_layer_types": ["dense", "sparse"], "attention_bias": false, "mlp_bias": false, "head_dim": 16, "rms_norm_eps": 1e-05, "rope_theta": 11158840.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

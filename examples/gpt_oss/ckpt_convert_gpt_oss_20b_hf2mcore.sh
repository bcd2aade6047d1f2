#!/usr/bin/env bash
# Convert gpt-oss-20b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1 EP=4
# (the layout of pretrain_gpt_oss_20b_ptd.sh). The published checkpoint stores the experts in MXFP4
# (quantization_config: *_blocks / *_scales): the converter dequantises them on import, exactly, as transformers'
# Mxfp4Config(dequantize=True) does; a bf16 copy converts too.
#   bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_hf2mcore.sh   # a tiny random gpt_oss model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt-oss-20b-bf16}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gpt-oss-20b-mcore-tp2pp1ep4}
TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}
MODEL_TYPE_HF=gpt-oss

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_oss HF_CONFIG='{"num_local_experts": 32, "num_experts_per_tok": 4, "router_aux_loss_coef": 0.9, "head_dim": 64, "attention_bias": true, "sliding_window": 128, "swiglu_limit": 7.0, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false}, "rope_theta": 150000, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

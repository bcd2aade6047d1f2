#!/usr/bin/env bash
# Convert OLMoE-1B-7B-0924 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=8
# (the layout of pretrain_olmoe_1b_7b_ptd.sh).
#   bash examples/olmoe/ckpt_convert_olmoe_1b_7b_hf2mcore.sh
#   SMOKE=1 bash examples/olmoe/ckpt_convert_olmoe_1b_7b_hf2mcore.sh   # a tiny random olmoe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/olmoe/ckpt_convert_olmoe_1b_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/OLMoE-1B-7B-0924}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/olmoe-1b-7b-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
MODEL_TYPE_HF=olmoe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmoe HF_CONFIG='{"num_experts": 64, "num_experts_per_tok": 8, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "clip_qkv": null, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

#!/usr/bin/env bash
# Convert dots.llm1 from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=16
# (the layout of pretrain_dots_llm1_142b_ptd.sh).
#   bash examples/dots1/ckpt_convert_dots_llm1_142b_hf2mcore.sh
#   SMOKE=1 bash examples/dots1/ckpt_convert_dots_llm1_142b_hf2mcore.sh   # a tiny random dots1 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/dots1/ckpt_convert_dots_llm1_142b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/dots.llm1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/dots-llm1-142b-mcore-tp2pp2ep16}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
MODEL_TYPE_HF=dots1

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=dots1 HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 32, "n_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": true, "attention_bias": false, "rms_norm_eps": 1e-05, "rope_theta": 10000000.0, "tie_word_embeddings": false, "max_position_embeddings": 32768, "sliding_window": null}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

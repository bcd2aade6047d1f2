#!/usr/bin/env bash
# Convert dbrx-base from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=2 EP=8
# (the layout of pretrain_dbrx_132b_ptd.sh).
#   bash examples/dbrx/ckpt_convert_dbrx_132b_hf2mcore.sh
#   SMOKE=1 bash examples/dbrx/ckpt_convert_dbrx_132b_hf2mcore.sh   # a tiny random dbrx model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/dbrx/ckpt_convert_dbrx_132b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/dbrx-base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/dbrx-base-mcore-tp4pp2ep8}
TP=${TP:-4} PP=${PP:-2} EP=${EP:-8}
MODEL_TYPE_HF=dbrx

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=dbrx HF_CONFIG='{"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 256, "attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 500000}, "ffn_config": {"ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 128, "moe_num_experts": 16, "moe_top_k": 4, "moe_jitter_eps": 0, "moe_loss_weight": 0.05, "moe_normalize_expert_weights": 1.0}, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "tie_word_embeddings": false}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

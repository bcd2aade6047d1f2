#!/usr/bin/env bash
# Convert Jamba-v0.1 from Hugging Face safetensors (transformers' JambaForCausalLM layout, model_type jamba) to our
# Megatron (mcore) layout at TP=1 PP=4 EP=8 (the layout of pretrain_jamba01_52b_ptd.sh); each HF layer becomes two
# pattern letters (its mixer, its MLP or MoE), placed by the attention and expert periods and offsets of its
# config.json, which also gives the Mamba1, attention and expert sizes.
#   bash examples/jamba/ckpt_convert_jamba01_52b_hf2mcore.sh
#   SMOKE=1 bash examples/jamba/ckpt_convert_jamba01_52b_hf2mcore.sh   # a tiny random jamba model (Mamba1 + MLP, Mamba1 + MoE, attention + MLP, Mamba1 + MoE), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/jamba/ckpt_convert_jamba01_52b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Jamba-v0.1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/jamba01-52b-mcore-tp1pp4ep8}
TP=${TP:-1} PP=${PP:-4} EP=${EP:-8}
MODEL_TYPE_HF=jamba

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json: attention
# in HF layer 2 and experts in layers 1 and 3 (4 pattern letters per stage at PP 2). The attention period is spelled
# as the mcore2hf recipe writes it back (the smallest period placing it: 3 from offset 2, where 4 from 2 places the
# same layer) so that its smoke round trip compares identical configs.
HF_MODEL_TYPE=jamba HF_CONFIG='{"num_hidden_layers": 4, "attn_layer_period": 3, "attn_layer_offset": 2, "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 16, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.001, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

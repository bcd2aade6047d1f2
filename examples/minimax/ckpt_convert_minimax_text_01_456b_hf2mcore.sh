#!/usr/bin/env bash
# Convert MiniMax-Text-01 from Hugging Face safetensors (transformers' MiniMaxForCausalLM layout, model_type minimax:
# per-expert block_sparse_moe.experts.{e}.w1/w2/w3, the lightning layers' fused qkv_proj and output_gate) to our
# Megatron (mcore) layout at TP=4 PP=8 EP=8 (the layout of pretrain_minimax_text_01_456b_ptd.sh); the layer pattern,
# the lightning and MoE sizes and the residual factors are read from its config.json (the decays the checkpoint
# stores, slope_rate and the rest, are recomputed from the config and not read).
#   bash examples/minimax/ckpt_convert_minimax_text_01_456b_hf2mcore.sh
#   SMOKE=1 bash examples/minimax/ckpt_convert_minimax_text_01_456b_hf2mcore.sh   # a tiny random minimax model (3 lightning layers, attention), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/minimax/ckpt_convert_minimax_text_01_456b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/MiniMax-Text-01}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/minimax-text-01-mcore-tp4pp8ep8}
TP=${TP:-4} PP=${PP:-8} EP=${EP:-8}
MODEL_TYPE_HF=minimax-text-01

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (3 lightning layers then one softmax attention layer, the real model's pattern shrunk)
HF_MODEL_TYPE=minimax HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 16, "num_key_value_heads": 2, "num_local_experts": 32, "num_experts_per_tok": 2, "full_attn_alpha_factor": 3.5565588200778455, "linear_attn_alpha_factor": 3.5565588200778455, "mlp_alpha_factor": 3.5565588200778455, "full_attn_beta_factor": 1.0, "linear_attn_beta_factor": 1.0, "mlp_beta_factor": 1.0, "block_size": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.5}, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "pad_token_id": 0}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

#!/usr/bin/env bash
# Convert LFM2-8B-A1B from Hugging Face safetensors (transformers' Lfm2MoeForCausalLM layout, model_type lfm2_moe) to
# our Megatron (mcore) layout at TP=1 PP=1 EP=8 (the layout of pretrain_lfm2_8b_a1b_ptd.sh); the layer kinds, conv,
# attention and expert sizes and the dense layers are read from its config.json.
#   bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_hf2mcore.sh
#   SMOKE=1 bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_hf2mcore.sh   # a tiny random lfm2_moe model (conv, conv, attention, conv; two dense layers, then MoE), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/LFM2-8B-A1B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/lfm2-8b-a1b-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
MODEL_TYPE_HF=lfm2_moe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (the
# first 4 layers of the real pattern: conv, conv, attention, conv; the first 2 dense as in the real model), the layer
# kinds spelled as layer_types and the embeddings' tying as tie_word_embeddings, as the mcore2hf recipe writes them
# back
HF_MODEL_TYPE=lfm2_moe HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["conv", "conv", "full_attention", "conv"], "conv_L_cache": 3, "conv_bias": false, "num_dense_layers": 2, "num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 32, "use_expert_bias": true, "norm_topk_prob": true, "routed_scaling_factor": 1.0, "norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": true, "max_position_embeddings": 128000}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

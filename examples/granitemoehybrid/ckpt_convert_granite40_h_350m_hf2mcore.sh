#!/usr/bin/env bash
# Convert Granite-4.0-H-350M from Hugging Face safetensors (transformers' GraniteMoeHybridForCausalLM layout,
# model_type granitemoehybrid) to our Megatron (mcore) layout at TP=1 PP=1 (the layout of
# pretrain_granite40_h_350m_ptd.sh); each HF layer becomes two pattern letters (its mixer, its MLP), and the layer
# kinds, Mamba2 and attention sizes and Granite's multipliers are read from its config.json.
#   bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_hf2mcore.sh
#   SMOKE=1 bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_hf2mcore.sh   # a tiny random granitemoehybrid model (Mamba2, attention, Mamba2, Mamba2, each with its MLP), TP=2 PP=2
#   DRY_RUN=1 bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/granite-4.0-h-350m}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/granite-4.0-h-350m-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=granitemoehybrid

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (4 Mamba
# heads of 32 make expand 2 of the tiny hidden 64). The layer kinds and NoPE are spelled as the mcore2hf recipe
# writes them back (linear_attention/full_attention, position_embedding_type null) so that its smoke round trip
# compares identical configs; the published spelling (mamba/attention, "nope") converts the same way.
HF_MODEL_TYPE=granitemoehybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"], "num_local_experts": 0, "shared_intermediate_size": 128, "position_embedding_type": null, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "embedding_multiplier": 12.0, "residual_multiplier": 0.246, "attention_multiplier": 0.015625, "logits_scaling": 3.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_hf2mcore

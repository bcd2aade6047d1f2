#!/usr/bin/env bash
# Convert LFM2-1.2B from Hugging Face safetensors (transformers' Lfm2ForCausalLM layout, model_type lfm2) to our
# Megatron (mcore) layout at TP=1 PP=1 (the layout of pretrain_lfm2_1_2b_ptd.sh); the layer kinds, conv and
# attention sizes and the adjusted FFN width are read from its config.json.
#   bash examples/lfm2/ckpt_convert_lfm2_1_2b_hf2mcore.sh
#   SMOKE=1 bash examples/lfm2/ckpt_convert_lfm2_1_2b_hf2mcore.sh   # a tiny random lfm2 model (conv, conv, attention, conv), TP=2 PP=2
#   DRY_RUN=1 bash examples/lfm2/ckpt_convert_lfm2_1_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/LFM2-1.2B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/lfm2-1.2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=lfm2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (the first 4 layers of the real pattern: conv, conv, attention, conv). The layer kinds and the FFN width are spelled
# as the mcore2hf recipe writes them back (layer_types; block_auto_adjust_ff_dim false, the width as built), so that
# its smoke round trip compares identical configs; the published spelling (full_attn_idxs, block_ff_dim 12288
# adjusted to 8192) converts the same way (tests/models/cases_lfm2.py checks both layer spellings and the adjusted
# width against transformers).
HF_MODEL_TYPE=lfm2 HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["conv", "conv", "full_attention", "conv"], "conv_L_cache": 3, "conv_bias": false, "block_auto_adjust_ff_dim": false, "norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": true, "max_position_embeddings": 128000}'

recipe_hf2mcore

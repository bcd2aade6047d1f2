#!/usr/bin/env bash
# Convert Olmo-Hybrid-7B from Hugging Face safetensors (OlmoHybridForCausalLM, model_type olmo_hybrid: the DeltaNet
# layers' attention_layer_norm / feedforward_layer_norm and q/k/v convs as the checkpoints store them, the in-memory
# names read too) to our Megatron (mcore) layout at TP=2 PP=2 (the layout of pretrain_olmo_hybrid_7b_ptd.sh); the
# layer types, DeltaNet and attention sizes and beta doubling are read from its config.json, the separate q/k/v/g and
# b/a projections regrouped into our fused DeltaNet projections.
#   bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_hf2mcore.sh
#   SMOKE=1 bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_hf2mcore.sh   # a tiny random olmo_hybrid model (3 DeltaNet layers, attention), TP=2 PP=2
#   DRY_RUN=1 bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Olmo-Hybrid-7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/olmo-hybrid-7b-mcore-tp2pp2}
TP=${TP:-2} PP=${PP:-2}
MODEL_TYPE_HF=olmo_hybrid

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo_hybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_conv_kernel_dim": 4, "linear_allow_neg_eigval": true, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": null}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'

recipe_hf2mcore

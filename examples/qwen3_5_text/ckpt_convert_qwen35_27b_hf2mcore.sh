#!/usr/bin/env bash
# Convert Qwen3.5-27B's text model from Hugging Face safetensors (transformers' Qwen3_5ForCausalLM layout, model_type
# qwen3_5_text) to our Megatron (mcore) layout at TP=4 PP=2 (the layout of pretrain_qwen35_27b_ptd.sh); the layer
# pattern, DeltaNet and attention sizes are read from its config.json, the separate in_proj_qkv / in_proj_z and
# in_proj_b / in_proj_a rows regrouped into our fused DeltaNet projections.
# The published Qwen/Qwen3.5-27B directory is the multimodal Qwen3_5ForConditionalGeneration (these fields under
# config.json's text_config; the text tensors under model.language_model.*, beside model.visual.* and the MTP
# layer's mtp.*). The converter reads it as it is: text_config and the model.language_model.* tensors as the text
# model (qwen3_5_text), the vision tower and the MTP layer left out with a note (transformers' text model does not
# load them either); a text-only Qwen3_5ForCausalLM directory converts too. The multi-token-prediction layer
# (mtp_num_hidden_layers 1) is not converted or trained; mcore2hf writes the text model.
#   bash examples/qwen3_5_text/ckpt_convert_qwen35_27b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen3_5_text/ckpt_convert_qwen35_27b_hf2mcore.sh   # a tiny random qwen3_5_text model (3 DeltaNet layers, attention), TP=2 PP=2
#   DRY_RUN=1 bash examples/qwen3_5_text/ckpt_convert_qwen35_27b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen3.5-27B}    # the text-only directory (see above), tokenizer files beside it
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen35-27b-mcore-tp4pp2}
TP=${TP:-4} PP=${PP:-2}
MODEL_TYPE_HF=qwen3_5_text

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (3 DeltaNet
# layers then one attention layer, as every 4 layers of the real model; value heads 3 x the key heads). The rotary
# sections are spelled as the mcore2hf recipe writes them back for head dim 32 ([2, 1, 1] of the 4 rotated
# frequencies, as [11, 11, 10] of 32 for head dim 256) so that its smoke round trip compares identical configs.
HF_MODEL_TYPE=qwen3_5_text HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 32, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 4, "linear_num_value_heads": 12, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "mrope_interleaved": true, "mrope_section": [2, 1, 1]}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'

recipe_hf2mcore

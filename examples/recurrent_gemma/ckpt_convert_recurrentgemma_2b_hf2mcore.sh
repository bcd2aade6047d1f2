#!/usr/bin/env bash
# Convert RecurrentGemma-2B from Hugging Face safetensors (transformers' RecurrentGemmaForCausalLM layout, model_type
# recurrent_gemma) to our Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_recurrentgemma_2b_ptd.sh); the
# block cycle (_block_types), the RG-LRU, attention and MLP sizes, the window and the logit cap are read from its
# config.json.
#   bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_hf2mcore.sh
#   SMOKE=1 bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_hf2mcore.sh   # a tiny random recurrent_gemma model (recurrent, recurrent, attention, recurrent), TP=2 PP=2
#   DRY_RUN=1 bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/recurrentgemma-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/recurrentgemma-2b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=recurrent_gemma

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=recurrent_gemma HF_CONFIG='{"num_hidden_layers": 4, "_block_types": ["recurrent", "recurrent", "attention"], "num_key_value_heads": 1, "conv1d_width": 4, "attention_window_size": 8, "logits_soft_cap": 30.0, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "attention_bias": false, "embeddings_scale_by_sqrt_dim": true, "hidden_activation": "gelu_pytorch_tanh", "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1}'

recipe_hf2mcore

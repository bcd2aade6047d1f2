#!/usr/bin/env bash
# Convert RWKV-4-Pile-7B from Hugging Face safetensors (transformers' RwkvForCausalLM layout, model_type rwkv) to our
# Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_rwkv4_7b_ptd.sh); each HF block becomes two pattern
# letters (time mixing, channel mixing), the widths read from its config.json.
#   bash examples/rwkv/ckpt_convert_rwkv4_7b_hf2mcore.sh
#   SMOKE=1 bash examples/rwkv/ckpt_convert_rwkv4_7b_hf2mcore.sh   # a tiny random rwkv model (2 blocks), TP=2 PP=2
#   DRY_RUN=1 bash examples/rwkv/ckpt_convert_rwkv4_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/rwkv-4-7b-pile}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/rwkv4-7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=rwkv

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=rwkv HF_CONFIG='{"num_hidden_layers": 2, "context_length": 1024, "layer_norm_epsilon": 1e-05, "rescale_every": 6, "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 0}'

recipe_hf2mcore

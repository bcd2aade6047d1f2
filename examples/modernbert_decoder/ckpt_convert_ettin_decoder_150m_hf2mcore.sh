#!/usr/bin/env bash
# Convert ettin-decoder-150m from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_ettin_decoder_150m_ptd.sh).
#   bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_hf2mcore.sh
#   SMOKE=1 bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_hf2mcore.sh   # a tiny random modernbert-decoder model, TP=2 PP=2
#   DRY_RUN=1 bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/ettin-decoder-150m}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ettin-decoder-150m-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=modernbert-decoder

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=modernbert-decoder HF_CONFIG='{"num_key_value_heads": 4, "norm_eps": 1e-05, "norm_bias": false, "local_attention": 16, "global_attn_every_n_layers": 3, "hidden_activation": "gelu", "classifier_activation": "gelu", "decoder_bias": true, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_hf2mcore

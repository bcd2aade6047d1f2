#!/usr/bin/env bash
# Pretrain GPT-2 124M (openai-community/gpt2 config.json = transformers' GPT2Config() defaults): 12 layers, hidden 768, FFN 3072, 12 heads (MHA), vocab 50257, 1024 learned positions, LayerNorm (eps 1e-5), GELU (tanh: gelu_new), biases on every linear, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/gpt2/pretrain_gpt2_124m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt2/pretrain_gpt2_124m_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt2/pretrain_gpt2_124m_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gpt2-124m-mcore (ckpt_convert_gpt2_124m_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gpt2-124m}
DATA_PATH=${DATA_PATH:-./dataset/gpt2_text_document}    # data_convert_gpt2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt2}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=12 HIDDEN_SIZE=768 FFN_HIDDEN_SIZE=3072 NUM_HEADS=12 NUM_KV_HEADS=12 VOCAB_SIZE=50257
SEQ_LENGTH=${SEQ_LENGTH:-1024} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1024
    --position-embedding-type learned_absolute
    --normalization LayerNorm --norm-epsilon 1e-5 --gelu-tanh
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain bloom-7b1 (bigscience/bloom-7b1 config.json: 30 layers, hidden 4096, FFN 16384 (4 x hidden), 32 heads (MHA), vocab 250880, ALiBi (no rotary), LayerNorm 1e-5 with bias, a LayerNorm on the word embeddings, Bloom's tanh GELU, biases on every linear, tied embeddings, sequence 2048).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/bloom/pretrain_bloom_7b1_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bloom/pretrain_bloom_7b1_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/bloom/pretrain_bloom_7b1_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/bloom-7b1-mcore (ckpt_convert_bloom_7b1_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/bloom-7b1}
DATA_PATH=${DATA_PATH:-./dataset/bloom_text_document}    # data_convert_bloom_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bloom-7b1}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=30 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=250880
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.2e-4 MIN_LR=6e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type alibi
    --normalization LayerNorm --norm-epsilon 1e-5 --embed-layernorm --gelu-tanh
ARGS

recipe_pretrain

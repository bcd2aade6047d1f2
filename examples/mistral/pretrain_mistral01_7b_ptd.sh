#!/usr/bin/env bash
# Pretrain Mistral-7B-v0.1 (mistralai/Mistral-7B-v0.1 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32000, rope theta 10000, RMSNorm 1e-5, untied embeddings, sliding window 4096.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/mistral/pretrain_mistral01_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral/pretrain_mistral01_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/mistral/pretrain_mistral01_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/mistral01-7b-mcore (ckpt_convert_mistral01_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mistral01-7b}
DATA_PATH=${DATA_PATH:-./dataset/mistral01_text_document}    # data_convert_mistral01_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.1}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=32000 SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 10000
    --sliding-window "$SLIDING_WINDOW"
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

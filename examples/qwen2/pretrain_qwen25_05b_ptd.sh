#!/usr/bin/env bash
# Pretrain Qwen2.5-0.5B (Qwen/Qwen2.5-0.5B config.json): 24 layers, hidden 896, FFN 4864, 14 heads / 2 KV heads, vocab 151936, rope theta 1000000, RMSNorm 1e-6, tied embeddings, qkv bias.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/qwen2/pretrain_qwen25_05b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2/pretrain_qwen25_05b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen2/pretrain_qwen25_05b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen25-05b-mcore (ckpt_convert_qwen25_05b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen25-05b}
DATA_PATH=${DATA_PATH:-./dataset/qwen25_text_document}    # data_convert_qwen25_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-0.5B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=896 FFN_HIDDEN_SIZE=4864 NUM_HEADS=14 NUM_KV_HEADS=2 VOCAB_SIZE=151936
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear --add-qkv-bias
ARGS

recipe_pretrain

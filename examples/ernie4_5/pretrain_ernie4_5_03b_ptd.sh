#!/usr/bin/env bash
# Pretrain ERNIE-4.5-0.3B-Base-PT (baidu/ERNIE-4.5-0.3B-Base-PT config.json; see examples/README.md): 18 layers, hidden 1024, FFN 3072, 16 heads / 2 KV heads, head dim 128, vocab 103424, rope theta 500000 on interleaved pairs, RMSNorm 1e-5, no biases (use_bias false), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/ernie4_5/pretrain_ernie4_5_03b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ernie4_5/pretrain_ernie4_5_03b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/ernie4_5/pretrain_ernie4_5_03b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/ernie4-5-03b-mcore (ckpt_convert_ernie4_5_03b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/ernie4-5-03b}
DATA_PATH=${DATA_PATH:-./dataset/ernie4_5_text_document}    # data_convert_ernie4_5_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=18 HIDDEN_SIZE=1024 FFN_HIDDEN_SIZE=3072 NUM_HEADS=16 NUM_KV_HEADS=2 KV_CHANNELS=128 VOCAB_SIZE=103424
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --kv-channels "$KV_CHANNELS"
    --rope-interleaved
    --position-embedding-type rope --rotary-base 500000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

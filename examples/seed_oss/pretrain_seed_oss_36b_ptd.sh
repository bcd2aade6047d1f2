#!/usr/bin/env bash
# Pretrain Seed-OSS-36B-Base (ByteDance-Seed/Seed-OSS-36B-Base config.json; see examples/README.md): 64 layers, hidden 5120, FFN 27648, 80 heads / 8 KV heads, head dim 128, vocab 155136, rope theta 1e7, RMSNorm 1e-6, q/k/v bias only (attention_bias; no o_proj or MLP bias), untied embeddings.
# Layout: 2 node(s) x 8 devices, TP=8 PP=2.
#   bash examples/seed_oss/pretrain_seed_oss_36b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/seed_oss/pretrain_seed_oss_36b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/seed_oss/pretrain_seed_oss_36b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/seed-oss-36b-mcore (ckpt_convert_seed_oss_36b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/seed-oss-36b}
DATA_PATH=${DATA_PATH:-./dataset/seed_oss_text_document}    # data_convert_seed_oss_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Seed-OSS-36B-Base}

TP=${TP:-8} PP=${PP:-2}
NUM_LAYERS=64 HIDDEN_SIZE=5120 FFN_HIDDEN_SIZE=27648 NUM_HEADS=80 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=155136
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 524288
    --kv-channels "$KV_CHANNELS"
    --add-qkv-bias
    --position-embedding-type rope --rotary-base 10000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

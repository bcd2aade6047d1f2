#!/usr/bin/env bash
# Pretrain Solar-Open-100B (upstage/Solar-Open-100B config.json): 48 layers, all MoE, hidden 4096, 64 heads / 8 KV heads of dim 128, vocab 196608, rope theta 1000000, RMSNorm 1e-5, no biases, untied; 128 experts of FFN 1280, top-8 by sigmoid score + expert bias, renormalised, routed_scaling_factor 1.0, one shared expert of 1280 (--ffn-hidden-size 1280: no layer is dense).
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (DP16; 8 experts per EP rank).
#   bash examples/solar_open/pretrain_solar_open_100b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/solar_open/pretrain_solar_open_100b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/solar_open/pretrain_solar_open_100b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/solar-open-100b-mcore (ckpt_convert_solar_open_100b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/solar-open-100b}
DATA_PATH=${DATA_PATH:-./dataset/solar_open_text_document}    # data_convert_solar_open_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Solar-Open-100B}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
NUM_LAYERS=48 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=1280 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=196608
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 1280 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob --moe-aux-loss-coeff 0
ARGS

recipe_pretrain

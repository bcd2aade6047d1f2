#!/usr/bin/env bash
# Pretrain ERNIE-4.5-21B-A3B (baidu/ERNIE-4.5-21B-A3B-PT config.json): 28 layers (the first dense), hidden 2560, dense FFN 12288, 20 heads / 4 KV heads, vocab 103424, rope theta 500000 in interleaved pairs, RMSNorm 1e-5, no biases, tied embeddings; 64 experts of FFN 1536, softmax over all experts, top-6 by probability + expert bias (moe_statics.e_score_correction_bias), renormalised, two shared experts (2 x 1536), router aux loss coefficient 0.001.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (DP8; 8 experts per EP rank).
#   bash examples/ernie4_5_moe/pretrain_ernie45_moe_21b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ernie4_5_moe/pretrain_ernie45_moe_21b_a3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/ernie4_5_moe/pretrain_ernie45_moe_21b_a3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/ernie45-moe-21b-a3b-mcore (ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/ernie45-moe-21b-a3b}
DATA_PATH=${DATA_PATH:-./dataset/ernie45_moe_text_document}    # data_convert_ernie45_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-21B-A3B}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
NUM_LAYERS=28 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=12288 NUM_HEADS=20 NUM_KV_HEADS=4 VOCAB_SIZE=103424
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 500000
    --rope-interleaved
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1536 --n-shared-experts 2 --first-k-dense-replace 1
    --moe-router-pre-softmax --norm-topk-prob --moe-router-enable-expert-bias --moe-aux-loss-coeff 0.001
ARGS

recipe_pretrain

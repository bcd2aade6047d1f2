#!/usr/bin/env bash
# Pretrain granite-3.0-1b-a400m-base: 24 layers, hidden 1024, 16 heads / 8 KV heads, vocab 49155, rope theta 10000, RMSNorm 1e-6, tied embeddings; 32 experts of FFN 512, top-8 (softmax over the top-8 logits); embeddings x 12, residual branches x 0.22, attention scale 0.015625, logits / 6.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (DP8; 4 experts per EP rank).
#   bash examples/granitemoe/pretrain_granite30_moe_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoe/pretrain_granite30_moe_1b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/granitemoe/pretrain_granite30_moe_1b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/granite-3.0-1b-a400m-base-mcore-tp1pp1 (ckpt_convert_granite30_moe_1b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/granite30_moe-1b}
DATA_PATH=${DATA_PATH:-./dataset/granite30_moe_text_document}    # data_convert_granite30_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.0-1b-a400m-base}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
NUM_LAYERS=24 HIDDEN_SIZE=1024 FFN_HIDDEN_SIZE=512 NUM_HEADS=16 NUM_KV_HEADS=8 VOCAB_SIZE=49155
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --embedding-multiplier 12.0 --residual-multiplier 0.22 --softmax-scale 0.015625 --output-multiplier-scale 0.16666666666666666
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --num-experts 32 --moe-router-topk 8 --moe-aux-loss-coeff 0.001
ARGS

recipe_pretrain

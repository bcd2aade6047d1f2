#!/usr/bin/env bash
# Pretrain Mixtral-8x7B-v0.1 (mistralai/Mixtral-8x7B-v0.1 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32000, rope theta 1000000, RMSNorm 1e-5, untied embeddings; 8 experts of FFN 14336, top-2 (softmax over the top-2 logits), router aux loss coefficient 0.02.
# Layout: 2 node(s) x 8 devices, TP=2 PP=2 EP=4 (DP4; 2 experts per EP rank, each split over TP2).
#   bash examples/mixtral/pretrain_mixtral_8x7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mixtral/pretrain_mixtral_8x7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/mixtral/pretrain_mixtral_8x7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/mixtral-8x7b-mcore (ckpt_convert_mixtral_8x7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mixtral-8x7b}
DATA_PATH=${DATA_PATH:-./dataset/mixtral_text_document}    # data_convert_mixtral_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mixtral-8x7B-v0.1}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=32000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 0.02
ARGS

recipe_pretrain

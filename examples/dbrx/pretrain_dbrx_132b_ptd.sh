#!/usr/bin/env bash
# Pretrain dbrx-base: 40 layers, hidden 6144, 48 heads / 8 KV heads, vocab 100352, rope theta 500000, LayerNorm without bias (eps 1e-5), untied; fused Wqkv clamped to [-8, 8]; 16 experts of FFN 10752, top-4 of the softmax over all experts, renormalised, router aux loss coefficient 0.05.
# Layout: 8 node(s) x 8 devices, TP=4 PP=2 EP=8 (DP8; 2 experts per EP rank).
#   bash examples/dbrx/pretrain_dbrx_132b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/dbrx/pretrain_dbrx_132b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/dbrx/pretrain_dbrx_132b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/dbrx-base-mcore-tp8pp1 (ckpt_convert_dbrx_132b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/dbrx-132b}
DATA_PATH=${DATA_PATH:-./dataset/dbrx_text_document}    # data_convert_dbrx_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dbrx-base}

TP=${TP:-4} PP=${PP:-2} EP=${EP:-8}
NUM_LAYERS=40 HIDDEN_SIZE=6144 FFN_HIDDEN_SIZE=10752 NUM_HEADS=48 NUM_KV_HEADS=8 VOCAB_SIZE=100352
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 500000
    --normalization LayerNorm --no-layernorm-bias --norm-epsilon 1e-5 --swiglu --disable-bias-linear --qkv-clip 8
    --untie-embeddings-and-output-weights
    --num-experts 16 --moe-router-topk 4 --moe-router-pre-softmax --norm-topk-prob --moe-aux-loss-coeff 0.05
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain dots.llm1 (rednote-hilab/dots.llm1.base config.json): 62 layers (the first dense), hidden 4096, dense FFN 10944, 32 heads / 32 KV heads of dim 128, per-head q/k RMSNorm, vocab 152064, rope theta 10000000, RMSNorm 1e-5, no biases, untied; 128 experts of FFN 1408, top-6 by sigmoid score + expert bias, renormalised, times 2.5 (routed_scaling_factor), two shared experts (2 x 1408).
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (DP16; 8 experts per EP rank).
#   bash examples/dots1/pretrain_dots_llm1_142b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/dots1/pretrain_dots_llm1_142b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/dots1/pretrain_dots_llm1_142b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/dots-llm1-142b-mcore (ckpt_convert_dots_llm1_142b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/dots-llm1-142b}
DATA_PATH=${DATA_PATH:-./dataset/dots_llm1_text_document}    # data_convert_dots_llm1_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dots.llm1}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
NUM_LAYERS=62 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=10944 NUM_HEADS=32 NUM_KV_HEADS=32 KV_CHANNELS=128 VOCAB_SIZE=152064
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 10000000
    --qk-layernorm
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 128 --moe-router-topk 6 --moe-ffn-hidden-size 1408 --n-shared-experts 2 --first-k-dense-replace 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 2.5 --moe-aux-loss-coeff 0
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain moe-7b-1b-active-shared-experts: sizes UNVERIFIED (no copy of its config.json was found): transformers' GraniteMoeSharedConfig() defaults, which its docstring likens to this checkpoint, with an assumed shared expert of 1024: 32 layers, hidden 4096, 32 heads, vocab 32000, rope theta 10000, RMSNorm 1e-6, untied; 8 experts of FFN 11008, top-2, one ungated shared expert of 1024; multipliers 1 (attention scale 1.0, not 1/sqrt(head dim)).
# Layout: 2 node(s) x 8 devices, TP=2 PP=2 EP=4 (DP4; 2 experts per EP rank).
#   bash examples/granitemoeshared/pretrain_granite_moe_shared_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoeshared/pretrain_granite_moe_shared_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/granitemoeshared/pretrain_granite_moe_shared_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/moe-7b-1b-active-shared-experts-mcore-tp8pp1 (ckpt_convert_granite_moe_shared_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/granite_moe_shared-7b}
DATA_PATH=${DATA_PATH:-./dataset/granite_moe_shared_text_document}    # data_convert_granite_moe_shared_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/moe-7b-1b-active-shared-experts}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=11008 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=32000
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --embedding-multiplier 1.0 --residual-multiplier 1.0 --softmax-scale 1.0 --output-multiplier-scale 1.0
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 0.001 --moe-shared-expert-intermediate-size 1024
ARGS

recipe_pretrain

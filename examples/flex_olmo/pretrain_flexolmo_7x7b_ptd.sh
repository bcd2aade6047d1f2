#!/usr/bin/env bash
# Pretrain FlexOlmo-7x7B-1T: transformers' FlexOlmoConfig() defaults, whose docstring names this checkpoint: 32 layers, hidden 4096, 32 heads / 32 KV heads, vocab 100352, rope theta 500000, RMSNorm 1e-6, untied; norms after attention and MLP only, q/k RMSNorm over all heads' channels; 7 experts of FFN 11008, top-5 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 EP=1 (DP1; 7 experts: no EP above 1 divides them, so the experts split over TP like the MLP).
#   bash examples/flex_olmo/pretrain_flexolmo_7x7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/flex_olmo/pretrain_flexolmo_7x7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/flex_olmo/pretrain_flexolmo_7x7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/flexolmo-7x7b-1t-mcore-tp8pp1 (ckpt_convert_flexolmo_7x7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/flexolmo-7x7b}
DATA_PATH=${DATA_PATH:-./dataset/flexolmo_text_document}    # data_convert_flexolmo_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/FlexOlmo-7x7B-1T}

TP=${TP:-8} PP=${PP:-2} EP=${EP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=11008 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=100352
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-grouped-gemm
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --position-embedding-type rope --rotary-base 500000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --qk-layernorm --qk-layernorm-full-width --post-norm-only
    --untie-embeddings-and-output-weights
    --num-experts 7 --moe-router-topk 5 --moe-router-pre-softmax --moe-aux-loss-coeff 0.01
ARGS

recipe_pretrain

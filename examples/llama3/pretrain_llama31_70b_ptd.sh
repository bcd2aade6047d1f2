#!/usr/bin/env bash
# Pretrain Llama-3.1-70B (meta-llama/Llama-3.1-70B config.json): 80 layers, hidden 8192, FFN 28672, 64 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling (factor 8), RMSNorm 1e-5, untied embeddings.
# Layout: 4 node(s) x 8 devices, TP=8 PP=4.
#   bash examples/llama3/pretrain_llama31_70b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/pretrain_llama31_70b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/llama3/pretrain_llama31_70b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/llama31-70b-mcore (ckpt_convert_llama31_70b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama31-70b}
DATA_PATH=${DATA_PATH:-./dataset/llama31_text_document}    # data_convert_llama31_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-70B}

TP=${TP:-8} PP=${PP:-4}
NUM_LAYERS=80 HIDDEN_SIZE=8192 FFN_HIDDEN_SIZE=28672 NUM_HEADS=64 NUM_KV_HEADS=8 VOCAB_SIZE=128256
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-512} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 500000
    --rope-scaling-type llama3 --rope-scaling-factor 8 --low-freq-factor 1 --high-freq-factor 4
    --original-max-position-embeddings 8192
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

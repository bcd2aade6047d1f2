#!/usr/bin/env bash
# Pretrain falcon-40b (tiiuae/falcon-40b config.json): 60 layers, hidden 8192, FFN 32768, 128 heads / 8 KV heads (new decoder architecture: q/k/v fused per KV group), vocab 65024, rope theta 10000, two LayerNorms (bias, 1e-5) feeding attention and MLP in parallel, no linear bias, GELU, tied embeddings.
# Layout: 4 node(s) x 8 devices, TP=8 PP=4.
#   bash examples/falcon/pretrain_falcon_40b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon/pretrain_falcon_40b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/falcon/pretrain_falcon_40b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/falcon-40b-mcore (ckpt_convert_falcon_40b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/falcon-40b}
DATA_PATH=${DATA_PATH:-./dataset/falcon_text_document}    # data_convert_falcon_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-40b}

TP=${TP:-8} PP=${PP:-4}
NUM_LAYERS=60 HIDDEN_SIZE=8192 FFN_HIDDEN_SIZE=32768 NUM_HEADS=128 NUM_KV_HEADS=8 VOCAB_SIZE=65024
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-512} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1e-5 MIN_LR=1e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000
    --normalization LayerNorm --norm-epsilon 1e-5 --parallel-residual
    --disable-bias-linear
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain persimmon-8b-base (adept/persimmon-8b-base config.json): 36 layers, hidden 4096, FFN 16384, 64 heads (MHA), vocab 262144, rope theta 25000 on the first half of each head's dims, sequential LayerNorm (bias, 1e-5) layers, per-head q/k LayerNorms with bias, biases on every linear, ReLU squared, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/persimmon/pretrain_persimmon_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/persimmon/pretrain_persimmon_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/persimmon/pretrain_persimmon_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/persimmon-8b-mcore (ckpt_convert_persimmon_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/persimmon-8b}
DATA_PATH=${DATA_PATH:-./dataset/persimmon_text_document}    # data_convert_persimmon_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/persimmon-8b-base}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=36 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=64 NUM_KV_HEADS=64 VOCAB_SIZE=262144
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1e-5 MIN_LR=1e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 16384
    --position-embedding-type rope --rotary-base 25000 --rotary-percent 0.5
    --normalization LayerNorm --norm-epsilon 1e-5 --qk-layernorm --squared-relu
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

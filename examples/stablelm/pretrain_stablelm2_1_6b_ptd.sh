#!/usr/bin/env bash
# Pretrain stablelm-2-1_6b (stabilityai/stablelm-2-1_6b config.json): 24 layers, hidden 2048, FFN 5632, 32 heads (MHA), vocab 100352, rope theta 10000 on the first 25% of each head's dims, LayerNorm with bias 1e-5, q/k/v bias, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/stablelm/pretrain_stablelm2_1_6b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/stablelm/pretrain_stablelm2_1_6b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/stablelm/pretrain_stablelm2_1_6b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/stablelm2-1_6b-mcore (ckpt_convert_stablelm2_1_6b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/stablelm2-1_6b}
DATA_PATH=${DATA_PATH:-./dataset/stablelm2_text_document}    # data_convert_stablelm2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/stablelm-2-1_6b}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=5632 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=100352
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.25
    --normalization LayerNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear --add-qkv-bias
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain starcoder2-3b (bigcode/starcoder2-3b config.json: 30 layers, hidden 3072, FFN 12288, 24 heads / 2 KV heads, vocab 49152, rope theta 999999.4420358813, sliding window 4096, LayerNorm 1e-5 with bias, non-gated tanh GELU MLP, biases on every linear (use_bias), tied embeddings, 16384 positions).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/starcoder2/pretrain_starcoder2_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/starcoder2/pretrain_starcoder2_3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/starcoder2/pretrain_starcoder2_3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/starcoder2-3b-mcore (ckpt_convert_starcoder2_3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/starcoder2-3b}
DATA_PATH=${DATA_PATH:-./dataset/starcoder2_text_document}    # data_convert_starcoder2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/starcoder2-3b}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=30 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=12288 NUM_HEADS=24 NUM_KV_HEADS=2 VOCAB_SIZE=49152
SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=3.0e-5 MIN_LR=3.0e-6
INIT_METHOD_STD=0.018042

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 16384
    --sliding-window "$SLIDING_WINDOW"
    --position-embedding-type rope --rotary-base 999999.4420358813
    --normalization LayerNorm --norm-epsilon 1e-5 --gelu-tanh
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain Minitron-4B-Base (nvidia/Minitron-4B-Base (Nemotron-4 architecture): 32 layers, hidden 3072, FFN 9216, 32 heads / 8 KV heads, head dim 128, vocab 256000, rope theta 10000 on half of each head (partial_rotary_factor 0.5), LayerNorm1P 1e-5 (scale 1 + weight, with bias), non-gated ReLU-squared MLP, no linear biases, untied embeddings, 4096 positions (see examples/README.md for which numbers are verified)).
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/nemotron/pretrain_minitron_4b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron/pretrain_minitron_4b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/nemotron/pretrain_minitron_4b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/minitron-4b-mcore (ckpt_convert_minitron_4b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/minitron-4b}
DATA_PATH=${DATA_PATH:-./dataset/minitron_text_document}    # data_convert_minitron_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Minitron-4B-Base}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=9216 NUM_HEADS=32 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=256000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6
INIT_METHOD_STD=0.0134

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --kv-channels "$KV_CHANNELS"
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.5
    --normalization LayerNorm --norm-epsilon 1e-5 --apply-layernorm-1p --squared-relu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

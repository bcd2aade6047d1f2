#!/usr/bin/env bash
# Pretrain Jais-2-8B (inceptionai/Jais-2-8B: 32 layers, hidden 3328, FFN 26624, 26 heads (MHA, head dim 128), vocab 150272, rope theta 10000, LayerNorm 1e-5 with bias, non-gated ReLU-squared MLP, biases on every linear, untied embeddings, 8192 positions (see examples/README.md for which numbers are verified)).
# Layout: 1 node(s) x 8 devices, TP=2 PP=2.
#   bash examples/jais2/pretrain_jais2_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/jais2/pretrain_jais2_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/jais2/pretrain_jais2_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/jais2-8b-mcore (ckpt_convert_jais2_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/jais2-8b}
DATA_PATH=${DATA_PATH:-./dataset/jais2_text_document}    # data_convert_jais2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jais-2-8B}

TP=${TP:-2} PP=${PP:-2}
NUM_LAYERS=32 HIDDEN_SIZE=3328 FFN_HIDDEN_SIZE=26624 NUM_HEADS=26 NUM_KV_HEADS=26 VOCAB_SIZE=150272
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --position-embedding-type rope --rotary-base 10000
    --normalization LayerNorm --norm-epsilon 1e-5 --squared-relu
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

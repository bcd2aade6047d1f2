#!/usr/bin/env bash
# Pretrain AFM-4.5B (arcee-ai/AFM-4.5B config.json): 36 layers, hidden 2560, FFN 18432, 20 heads / 4 KV heads, vocab 128004, rope theta 10000 (unscaled; the published YaRN scaling is not modelled: see examples/README.md), RMSNorm 1e-5, non-gated ReLU-squared MLP (up/down only), no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/arcee/pretrain_afm_45b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/arcee/pretrain_afm_45b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/arcee/pretrain_afm_45b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/afm-45b-mcore (ckpt_convert_afm_45b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/afm-45b}
DATA_PATH=${DATA_PATH:-./dataset/afm_text_document}    # data_convert_afm_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/AFM-4.5B}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=36 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=18432 NUM_HEADS=20 NUM_KV_HEADS=4 VOCAB_SIZE=128004
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536
    --squared-relu
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-5 --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

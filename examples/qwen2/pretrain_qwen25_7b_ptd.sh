#!/usr/bin/env bash
# Pretrain Qwen2.5-7B (Qwen/Qwen2.5-7B config.json): 28 layers, hidden 3584, FFN 18944, 28 heads / 4 KV heads, vocab 152064, rope theta 1000000, RMSNorm 1e-6, untied embeddings, qkv bias.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/qwen2/pretrain_qwen25_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2/pretrain_qwen25_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen2/pretrain_qwen25_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen25-7b-mcore (ckpt_convert_qwen25_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen25-7b}
DATA_PATH=${DATA_PATH:-./dataset/qwen25_text_document}    # data_convert_qwen25_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-7B}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=28 HIDDEN_SIZE=3584 FFN_HIDDEN_SIZE=18944 NUM_HEADS=28 NUM_KV_HEADS=4 VOCAB_SIZE=152064
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear --add-qkv-bias
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

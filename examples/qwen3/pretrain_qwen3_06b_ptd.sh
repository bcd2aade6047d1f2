#!/usr/bin/env bash
# Pretrain Qwen3-0.6B (Qwen/Qwen3-0.6B config.json): 28 layers, hidden 1024, FFN 3072, 16 heads / 8 KV heads, head dim 128 (not hidden / heads), vocab 151936, rope theta 1000000, RMSNorm 1e-6, per-head q/k RMSNorm, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/qwen3/pretrain_qwen3_06b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3/pretrain_qwen3_06b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen3/pretrain_qwen3_06b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen3-06b-mcore (ckpt_convert_qwen3_06b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen3-06b}
DATA_PATH=${DATA_PATH:-./dataset/qwen3_text_document}    # data_convert_qwen3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-0.6B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=28 HIDDEN_SIZE=1024 FFN_HIDDEN_SIZE=3072 NUM_HEADS=16 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=151936
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 40960
    --kv-channels "$KV_CHANNELS" --qk-layernorm
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

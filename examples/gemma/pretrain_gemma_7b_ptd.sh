#!/usr/bin/env bash
# Pretrain gemma-7b (google/gemma-7b config.json): 28 layers, hidden 3072, FFN 24576, 16 heads (MHA), head dim 256 (16 x 256 = 4096 != hidden), vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6, embeddings times sqrt(hidden), gated GELU (tanh approximation, as transformers runs it), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/gemma/pretrain_gemma_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma/pretrain_gemma_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gemma/pretrain_gemma_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gemma-7b-mcore (ckpt_convert_gemma_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gemma-7b}
DATA_PATH=${DATA_PATH:-./dataset/gemma_text_document}    # data_convert_gemma_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-7b}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=28 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=24576 NUM_HEADS=16 NUM_KV_HEADS=16 KV_CHANNELS=256 VOCAB_SIZE=256000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --kv-channels "$KV_CHANNELS"
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p --input-embeds-norm
    --geglu --gelu-tanh --disable-bias-linear
ARGS

recipe_pretrain

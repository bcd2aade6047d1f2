#!/usr/bin/env bash
# Pretrain gpt-neox-japanese-2.7b (abeja/gpt-neox-japanese-2.7b config.json): 32 layers, hidden 2560, FFN 10240 (4 x hidden), 32 heads (MHA), vocab 32000, rope theta 10000 on every dim, sequential LayerNorm (bias, 1e-5) layers, no linear bias but the last layer's attention output projection, GELU, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/gpt_neox_japanese/pretrain_gpt_neox_japanese_2_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neox_japanese/pretrain_gpt_neox_japanese_2_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_neox_japanese/pretrain_gpt_neox_japanese_2_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gpt-neox-japanese-2-7b-mcore (ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gpt-neox-japanese-2-7b}
DATA_PATH=${DATA_PATH:-./dataset/gpt_neox_japanese_text_document}    # data_convert_gpt_neox_japanese_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neox-japanese-2.7b}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=10240 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=32000
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=2e-5 MIN_LR=2e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000
    --normalization LayerNorm --norm-epsilon 1e-5 --disable-bias-linear
    --dense-bias-layers "$(( NUM_LAYERS - 1 ))"
ARGS

recipe_pretrain

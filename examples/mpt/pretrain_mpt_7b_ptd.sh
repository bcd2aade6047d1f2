#!/usr/bin/env bash
# Pretrain mpt-7b (mosaicml/mpt-7b config.json: 32 layers, d_model 4096, FFN 16384 (expansion ratio 4), 32 heads (MHA), vocab 50432, ALiBi with alibi_bias_max 8 (no rotary), LayerNorm 1e-5 without bias, exact GELU, no linear biases, no q/k/v clipping, default softmax scale, tied embeddings, max_seq_len 2048).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/mpt/pretrain_mpt_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mpt/pretrain_mpt_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/mpt/pretrain_mpt_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/mpt-7b-mcore (ckpt_convert_mpt_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mpt-7b}
DATA_PATH=${DATA_PATH:-./dataset/mpt_text_document}    # data_convert_mpt_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mpt-7b}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=50432
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.2e-4 MIN_LR=1.2e-5

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type alibi --alibi-bias-max 8
    --normalization LayerNorm --norm-epsilon 1e-5 --no-layernorm-bias --disable-bias-linear
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain SantaCoder 1.1B (bigcode/gpt_bigcode-santacoder config.json): 24 layers, hidden 2048, FFN 8192, 16 heads with one shared KV head (multi_query), vocab 49280, 2048 learned positions, LayerNorm (eps 1e-5), GELU (tanh), biases on every linear, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/gpt_bigcode/pretrain_santacoder_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_bigcode/pretrain_santacoder_1b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_bigcode/pretrain_santacoder_1b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/santacoder-1b-mcore (ckpt_convert_santacoder_1b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/santacoder-1b}
DATA_PATH=${DATA_PATH:-./dataset/santacoder_text_document}    # data_convert_santacoder_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt_bigcode-santacoder}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=16 NUM_KV_HEADS=1 VOCAB_SIZE=49280
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type learned_absolute
    --normalization LayerNorm --norm-epsilon 1e-5 --gelu-tanh
ARGS

recipe_pretrain

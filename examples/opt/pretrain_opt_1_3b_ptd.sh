#!/usr/bin/env bash
# Pretrain OPT-1.3B (facebook/opt-1.3b config.json): 24 layers, hidden 2048, FFN 8192, 32 heads (MHA), vocab 50272, 2048 learned positions read at row position + 2, LayerNorm before attention and MLP (eps 1e-5), ReLU, biases on every linear, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/opt/pretrain_opt_1_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/opt/pretrain_opt_1_3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/opt/pretrain_opt_1_3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/opt-1_3b-mcore (ckpt_convert_opt_1_3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/opt-1_3b}
DATA_PATH=${DATA_PATH:-./dataset/opt_text_document}    # data_convert_opt_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/opt-1.3b}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=50272
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type learned_absolute --position-embedding-offset 2
    --normalization LayerNorm --norm-epsilon 1e-5 --relu
ARGS

recipe_pretrain

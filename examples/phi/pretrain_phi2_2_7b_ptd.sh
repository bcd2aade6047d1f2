#!/usr/bin/env bash
# Pretrain phi-2 (microsoft/phi-2 config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, rope theta 10000 on the first 40% of each head's dims, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear and the untied output layer, GELU (tanh).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/phi/pretrain_phi2_2_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi/pretrain_phi2_2_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/phi/pretrain_phi2_2_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/phi2-2-7b-mcore (ckpt_convert_phi2_2_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/phi2-2-7b}
DATA_PATH=${DATA_PATH:-./dataset/phi2_text_document}    # data_convert_phi2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/phi-2}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=10240 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=51200
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1e-5 MIN_LR=1e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.4
    --normalization LayerNorm --norm-epsilon 1e-5 --parallel-residual --parallel-residual-shared-norm
    --add-output-layer-bias --gelu-tanh --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

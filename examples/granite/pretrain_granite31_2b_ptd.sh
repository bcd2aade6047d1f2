#!/usr/bin/env bash
# Pretrain granite-3.1-2b-base (ibm-granite/granite-3.1-2b-base config.json): 40 layers, hidden 2048, FFN 8192, 32 heads / 8 KV heads, vocab 49155, rope theta 5000000, RMSNorm 1e-5, SwiGLU, no biases, embeddings x 12, residual branches x 0.22, attention scale 0.015625 (attention_multiplier), logits / 8 (logits_scaling), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/granite/pretrain_granite31_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granite/pretrain_granite31_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/granite/pretrain_granite31_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/granite31-2b-mcore (ckpt_convert_granite31_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/granite31-2b}
DATA_PATH=${DATA_PATH:-./dataset/granite31_text_document}    # data_convert_granite31_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.1-2b-base}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=40 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=49155
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --embedding-multiplier 12.0 --residual-multiplier 0.22 --softmax-scale 0.015625 --output-multiplier-scale 0.125
    --position-embedding-type rope --rotary-base 5000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

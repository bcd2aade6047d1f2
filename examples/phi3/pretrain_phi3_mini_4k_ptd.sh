#!/usr/bin/env bash
# Pretrain Phi-3-mini-4k-instruct (microsoft/Phi-3-mini-4k-instruct config.json): 32 layers, hidden 3072, FFN 8192, 32 heads (MHA), vocab 32064, rope theta 10000, RMSNorm 1e-5, sliding window 2047, untied embeddings (fused qkv_proj and gate_up_proj, split by the converter).
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/phi3/pretrain_phi3_mini_4k_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi3/pretrain_phi3_mini_4k_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/phi3/pretrain_phi3_mini_4k_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/phi3-mini-4k-mcore (ckpt_convert_phi3_mini_4k_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/phi3-mini-4k}
DATA_PATH=${DATA_PATH:-./dataset/phi3_text_document}    # data_convert_phi3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3-mini-4k-instruct}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=8192 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=32064
SLIDING_WINDOW=2047
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --position-embedding-type rope --rotary-base 10000
    --sliding-window "$SLIDING_WINDOW"
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

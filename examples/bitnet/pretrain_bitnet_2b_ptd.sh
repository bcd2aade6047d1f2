#!/usr/bin/env bash
# Pretrain bitnet-b1.58-2B-4T-bf16 (microsoft/bitnet-b1.58-2B-4T-bf16 config.json): 30 layers, hidden 2560, FFN 6912, 20 heads / 5 KV heads, vocab 128256, rope theta 500000, RMSNorm 1e-5, RMSNorm on the attention context before o_proj and on the activation before down_proj, gated ReLU-squared MLP, no biases, tied embeddings; trained unquantised (no ternary weights in the forward).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/bitnet/pretrain_bitnet_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bitnet/pretrain_bitnet_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/bitnet/pretrain_bitnet_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/bitnet-2b-mcore (ckpt_convert_bitnet_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/bitnet-2b}
DATA_PATH=${DATA_PATH:-./dataset/bitnet_text_document}    # data_convert_bitnet_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=30 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=6912 NUM_HEADS=20 NUM_KV_HEADS=5 VOCAB_SIZE=128256
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --gated-mlp --squared-relu --attn-sub-norm --ffn-sub-norm
    --position-embedding-type rope --rotary-base 500000
    --normalization RMSNorm --norm-epsilon 1e-5 --disable-bias-linear
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain Olmo-3-1025-7B (allenai/Olmo-3-1025-7B config.json; sizes seen in public copies, rope as remembered: see examples/README.md): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 100278, RMSNorm 1e-6 on the attention and MLP outputs only, q/k RMSNorm over all heads' channels, sliding window 4096 on 3 of every 4 layers (every 4th full), rope theta 500000 (unscaled on every layer: the pretraining stage, before the YaRN context extension), SwiGLU, no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/olmo3/pretrain_olmo3_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo3/pretrain_olmo3_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/olmo3/pretrain_olmo3_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/olmo3-7b-mcore (ckpt_convert_olmo3_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/olmo3-7b}
DATA_PATH=${DATA_PATH:-./dataset/olmo3_text_document}    # data_convert_olmo3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-3-1025-7B}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=11008 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=100278
SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536
    --qk-layernorm --qk-layernorm-full-width --post-norm-only
    --sliding-window "$SLIDING_WINDOW" --sliding-window-pattern 4
    --position-embedding-type rope --rotary-base 500000 --local-rotary-base 500000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

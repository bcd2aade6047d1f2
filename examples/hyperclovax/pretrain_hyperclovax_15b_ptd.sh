#!/usr/bin/env bash
# Pretrain HyperCLOVAX-SEED-Text-Instruct-1.5B (naver-hyperclovax/HyperCLOVAX-SEED-Text-Instruct-1.5B config.json): 24 layers, hidden 2048, FFN 7168, 16 heads / 8 KV heads, vocab 110592, rope theta 50000000, RMSNorm 1e-5 before and after attention and MLP (peri-norm, use_post_norm), SwiGLU, no biases, Granite-style multipliers all 1 (attention scale 128^-0.5), untied embeddings (sizes unverified: see examples/README.md).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/hyperclovax/pretrain_hyperclovax_15b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hyperclovax/pretrain_hyperclovax_15b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/hyperclovax/pretrain_hyperclovax_15b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/hyperclovax-15b-mcore (ckpt_convert_hyperclovax_15b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/hyperclovax-15b}
DATA_PATH=${DATA_PATH:-./dataset/hyperclovax_text_document}    # data_convert_hyperclovax_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HyperCLOVAX-SEED-Text-Instruct-1.5B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=7168 NUM_HEADS=16 NUM_KV_HEADS=8 VOCAB_SIZE=110592
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 16384
    --post-norm --embedding-multiplier 1.0 --residual-multiplier 1.0 --output-multiplier-scale 1.0
    --softmax-scale 0.08838834764831845
    --position-embedding-type rope --rotary-base 50000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

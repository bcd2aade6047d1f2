#!/usr/bin/env bash
# Pretrain Bamba-9B (ibm-ai-platform/Bamba-9B): 32 HF layers, each a mixer then a SwiGLU MLP (our 64 pattern letters): Mamba2 in 29, attention in layers 9, 18 and 27 (32 heads / 8 KV heads of 128, half of each head rotated, rope theta 10000); hidden 4096, MLP 14336; Mamba2 d_inner 8192 (expand 2) in 128 heads of 64, 1 B/C group, state 128, conv 4 with bias, SSD chunk 256, dt unclamped; no linear biases; RMSNorm 1e-5, vocab 128256, untied embeddings, 262144 positions.
# Figures: not read from the Hub file itself (see examples/README.md). Sizes, the attention layers (attn_layer_idx
# [9, 18, 27]), the heads, the rotated width (rotary_emb_dim 64 of 128), the vocabulary and untied embeddings are
# fms-fsdp's mamba_9.8b training config (the model Bamba-9B was trained as); the Mamba2 head dim 64, state 128,
# 1 group and RMSNorm 1e-5 are the values transformers' Bamba conversion script writes for it; expand 2, conv 4
# with bias, no projection bias, SSD chunk 256, unclamped dt, 262144 positions and rope theta 10000 are
# BambaConfig's defaults, which that script leaves in place.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1 (DP2; heads, KV heads and Mamba heads split over TP, the one B/C group
# replicated).
#   bash examples/bamba/pretrain_bamba_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bamba/pretrain_bamba_9b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/bamba/pretrain_bamba_9b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/bamba-9b-mcore-tp4pp1 (ckpt_convert_bamba_9b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/bamba-9b}
DATA_PATH=${DATA_PATH:-./dataset/bamba_text_document}    # data_convert_bamba_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Bamba-9B}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=64 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=128256
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# two letters per HF layer: its mixer (M Mamba2, * attention at HF layers 9, 18, 27), then its MLP (-)
HYBRID_PATTERN="M-M-M-M-M-M-M-M-M-*-M-M-M-M-M-M-M-M-*-M-M-M-M-M-M-M-M-*-M-M-M-M-"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        HYBRID_PATTERN=$(printf 'M-*-%.0s' $(seq "$PP")) NUM_LAYERS=$(( 4 * PP ))    # every kind in every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-state-dim 128 --mamba-head-dim 64 --mamba-num-groups 1 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 256
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.5
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

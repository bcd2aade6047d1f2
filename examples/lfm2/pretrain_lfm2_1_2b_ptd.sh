#!/usr/bin/env bash
# Pretrain LFM2-1.2B (LiquidAI/LFM2-1.2B): 16 layers, 10 gated short-convolution layers and 6 attention layers (full_attn_idxs [2, 5, 8, 10, 12, 14]), hidden 2048; attention 32 heads / 8 KV heads of 64 with per-head q/k RMSNorm, rope theta 1000000; short conv of width 3 (conv_L_cache) without biases; SwiGLU FFN 8192 (block_ff_dim 12288 adjusted as Lfm2MLP does: 2/3 of it, times block_ffn_dim_multiplier 1.0, rounded up to a multiple of 256); RMSNorm 1e-5, vocab 65536, tied embeddings, 128000 positions.
# Figures: a public verbatim copy of the model's config.json (hidden, layers, heads, full_attn_idxs, block_ff_dim and its
# adjustment, conv_L_cache, conv_bias, norm_eps, rope theta, vocab, positions; tie_embedding absent there, so
# Lfm2Config's default, tied), with transformers' Lfm2Config/Lfm2MLP for the FFN width; the Hub file itself was not
# read here (see examples/README.md).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 (DP8).
#   bash examples/lfm2/pretrain_lfm2_1_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/lfm2/pretrain_lfm2_1_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/lfm2/pretrain_lfm2_1_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/lfm2-1.2b-mcore-tp1pp1 (ckpt_convert_lfm2_1_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/lfm2-1.2b}
DATA_PATH=${DATA_PATH:-./dataset/lfm2_text_document}    # data_convert_lfm2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-1.2B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=16 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=65536
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# 1: a short-conv layer, 0: attention (layers 2, 5, 8, 10, 12 and 14)
LINEAR_ATTENTION_FREQ="[1,1,0]*3+[1,0]*3+[1]"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        LINEAR_ATTENTION_FREQ="[1,0]*$PP"    # a conv layer then an attention layer in every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --qk-layernorm
    --experimental-attention-variant short_conv --linear-attention-freq "$LINEAR_ATTENTION_FREQ"
    --short-conv-kernel-size 3
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 128000
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

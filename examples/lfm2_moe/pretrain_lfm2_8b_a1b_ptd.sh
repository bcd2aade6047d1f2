#!/usr/bin/env bash
# Pretrain LFM2-8B-A1B (LiquidAI/LFM2-8B-A1B): 24 layers, 18 gated short-convolution layers and 6 attention layers (layer_types: attention at 2, 6, 10, 14, 18, 21), hidden 2048; attention 32 heads / 8 KV heads of 64 with per-head q/k RMSNorm, rope theta 1000000; short conv of width 3 (conv_L_cache) without biases; the first 2 layers with a dense SwiGLU MLP of 7168 (num_dense_layers; intermediate_size, not adjusted), the other 22 a mixture of 32 experts of 1792 (top 4 by sigmoid score + expert bias, weighed by the unbiased scores renormalised, routed_scaling_factor 1.0, no shared expert); RMSNorm 1e-5, vocab 65536, tied embeddings, 128000 positions.
# Figures: a public trimmed copy of the model's config.json (sizes, layer_types, experts, top-k, dense layers,
# norm_topk_prob, use_expert_bias, routed_scaling_factor, conv_L_cache, conv_bias, norm_eps, rope theta, vocab,
# positions) that agrees with transformers' Lfm2MoeConfig defaults (documented for LiquidAI/LFM2-8B-A1B; a second
# public copy gives the same layer_types); tie_embedding is absent there: Lfm2MoeConfig's default, tied. The Hub
# file itself was not read here (see examples/README.md).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (DP8; 4 experts per EP rank), alltoall, grouped GEMM.
#   bash examples/lfm2_moe/pretrain_lfm2_8b_a1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/lfm2_moe/pretrain_lfm2_8b_a1b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/lfm2_moe/pretrain_lfm2_8b_a1b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/lfm2-8b-a1b-mcore-tp1pp1ep8 (ckpt_convert_lfm2_8b_a1b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/lfm2-8b-a1b}
DATA_PATH=${DATA_PATH:-./dataset/lfm2_moe_text_document}    # data_convert_lfm2_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-8B-A1B}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=7168 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=65536
MOE_FFN_HIDDEN_SIZE=1792 FIRST_K_DENSE=2
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# 1: a short-conv layer, 0: attention (layers 2, 6, 10, 14, 18 and 21)
LINEAR_ATTENTION_FREQ="[1,1,0]+[1,1,1,0]*4+[1,1,0,1,1]"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        LINEAR_ATTENTION_FREQ="[1,0]*$PP"    # a conv layer then an attention layer in every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --qk-layernorm
    --experimental-attention-variant short_conv --linear-attention-freq "$LINEAR_ATTENTION_FREQ"
    --short-conv-kernel-size 3
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 128000
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --num-experts 32 --moe-router-topk 4 --moe-router-score-function sigmoid --moe-router-enable-expert-bias
    --norm-topk-prob --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain HY-V3 (tencent/HY-V3 (transformers' HYV3Config defaults) config.json): 80 layers (the first dense), hidden 4096, dense FFN 13312, 64 heads / 8 KV heads of dim 128, per-head q/k RMSNorm before RoPE, vocab 120832, rope theta 11158840, RMSNorm 1e-5, no biases, untied; 192 experts of FFN 1536, top-8 by sigmoid score + expert bias, renormalised, times 2.826 (router_scaling_factor), one shared expert of 1536.
# Layout: 16 node(s) x 8 devices, TP=1 PP=4 EP=32 (DP32; 6 experts per EP rank, as MindSpeed-LLM's hunyuan3 recipe (TP1 PP4 EP32 on 128 devices)).
#   bash examples/hy_v3/pretrain_hy_v3_295b_a21b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hy_v3/pretrain_hy_v3_295b_a21b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/hy_v3/pretrain_hy_v3_295b_a21b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-16}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/hy-v3-295b-a21b-mcore (ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/hy-v3-295b-a21b}
DATA_PATH=${DATA_PATH:-./dataset/hy_v3_text_document}    # data_convert_hy_v3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HY-V3}

TP=${TP:-1} PP=${PP:-4} EP=${EP:-32}
NUM_LAYERS=80 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=13312 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=120832
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 11158840
    --qk-layernorm
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 192 --moe-router-topk 8 --moe-ffn-hidden-size 1536 --n-shared-experts 1 --first-k-dense-replace 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 2.826 --moe-aux-loss-coeff 0
ARGS

recipe_pretrain

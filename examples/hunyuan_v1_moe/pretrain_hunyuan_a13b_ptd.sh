#!/usr/bin/env bash
# Pretrain Hunyuan-A13B-Pretrain: 32 layers, hidden 4096, 32 heads / 8 KV heads (head dim 128), vocab 128167, rope theta 10000 with dynamic NTK alpha 1000, RMSNorm 1e-5, tied; per-head q/k RMSNorm after RoPE; 64 experts of FFN 3072, top-8 of the softmax over all experts, renormalised, plus one ungated shared expert of 3072.
# Layout: 4 node(s) x 8 devices, TP=2 PP=2 EP=8 (DP8; 8 experts per EP rank).
#   bash examples/hunyuan_v1_moe/pretrain_hunyuan_a13b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan_v1_moe/pretrain_hunyuan_a13b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/hunyuan_v1_moe/pretrain_hunyuan_a13b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/hunyuan-a13b-pretrain-mcore-tp8pp1 (ckpt_convert_hunyuan_a13b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/hunyuan-a13b}
DATA_PATH=${DATA_PATH:-./dataset/hunyuan_text_document}    # data_convert_hunyuan_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-A13B-Pretrain}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-8}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=3072 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=128167
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 10000 --rope-ntk-alpha 1000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --qk-layernorm --qk-layernorm-after-rope
    --num-experts 64 --moe-router-topk 8 --moe-router-pre-softmax --norm-topk-prob --moe-shared-expert-intermediate-size 3072
ARGS

recipe_pretrain

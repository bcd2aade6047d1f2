#!/usr/bin/env bash
# Pretrain Qwen1.5-MoE-A2.7B: (Qwen/Qwen1.5-MoE-A2.7B config.json) 24 layers, all MoE, hidden 2048, 16 heads / 16 KV heads, q/k/v bias, vocab 151936, rope theta 1000000, RMSNorm 1e-6, untied; 60 experts of FFN 1408, top-4 of the softmax over all experts (not renormalised), plus a shared expert of FFN 5632 scaled by sigmoid(gate), router aux loss coefficient 0.001.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=4 (DP8; 15 experts per EP rank).
#   bash examples/qwen2_moe/pretrain_qwen15_moe_a27b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2_moe/pretrain_qwen15_moe_a27b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen2_moe/pretrain_qwen15_moe_a27b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen15-moe-a27b-mcore (ckpt_convert_qwen15_moe_a27b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen15-moe-a27b}
DATA_PATH=${DATA_PATH:-./dataset/qwen15_moe_text_document}    # data_convert_qwen15_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen1.5-MoE-A2.7B}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-4}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=5632 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=151936
MOE_FFN_HIDDEN_SIZE=1408
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear --add-qkv-bias
    --untie-embeddings-and-output-weights
    --num-experts 60 --moe-router-topk 4 --moe-router-pre-softmax --moe-aux-loss-coeff 0.001
    --moe-shared-expert-intermediate-size 5632 --shared-expert-gate
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

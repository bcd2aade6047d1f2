#!/usr/bin/env bash
# Pretrain OLMoE-1B-7B-0924: (allenai/OLMoE-1B-7B-0924 config.json = transformers' OlmoeConfig() but FFN 1024, see examples/README.md) 16 layers, all MoE, hidden 2048, 16 heads / 16 KV heads, q/k RMSNorm over all heads' channels, vocab 50304, rope theta 10000, RMSNorm 1e-5, untied, no q/k/v clipping; 64 experts of FFN 1024, top-8 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (DP8; 8 experts per EP rank).
#   bash examples/olmoe/pretrain_olmoe_1b_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmoe/pretrain_olmoe_1b_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/olmoe/pretrain_olmoe_1b_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/olmoe-1b-7b-mcore (ckpt_convert_olmoe_1b_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/olmoe-1b-7b}
DATA_PATH=${DATA_PATH:-./dataset/olmoe_text_document}    # data_convert_olmoe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMoE-1B-7B-0924}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
NUM_LAYERS=16 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=1024 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=50304
MOE_FFN_HIDDEN_SIZE=1024
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --qk-layernorm --qk-layernorm-full-width
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 64 --moe-router-topk 8 --moe-router-pre-softmax --moe-aux-loss-coeff 0.01
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain Qwen3-30B-A3B: (Qwen/Qwen3-30B-A3B config.json; sizes as MindSpeed-LLM's recipe passes them) 48 layers, all MoE, hidden 2048, 32 heads / 4 KV heads of dim 128, per-head q/k RMSNorm, vocab 151936, rope theta 1000000, RMSNorm 1e-6, untied; 128 experts of FFN 768, top-8 of the softmax over all experts, renormalised (norm_topk_prob), router aux loss coefficient 0.001.
# Layout: 2 node(s) x 8 devices, TP=1 PP=2 EP=8 (DP8; 16 experts per EP rank), as MindSpeed-LLM's qwen3_moe 30B-A3B recipe.
#   bash examples/qwen3_moe/pretrain_qwen3_moe_30b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_moe/pretrain_qwen3_moe_30b_a3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen3_moe/pretrain_qwen3_moe_30b_a3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen3-moe-30b-a3b-mcore (ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen3-moe-30b-a3b}
DATA_PATH=${DATA_PATH:-./dataset/qwen3_moe_text_document}    # data_convert_qwen3_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-30B-A3B}

TP=${TP:-1} PP=${PP:-2} EP=${EP:-8}
NUM_LAYERS=48 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=6144 NUM_HEADS=32 NUM_KV_HEADS=4 KV_CHANNELS=128 VOCAB_SIZE=151936
MOE_FFN_HIDDEN_SIZE=768
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 40960
    --kv-channels "$KV_CHANNELS" --qk-layernorm
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 128 --moe-router-topk 8 --moe-router-pre-softmax --norm-topk-prob --moe-aux-loss-coeff 0.001
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json): 62 layers, all MoE, hidden 3072, 48 heads / 8 KV heads of dim 128, q/k RMSNorm over all heads' channels, rope theta 5000000 on 64 of 128 dims (rotary_dim), vocab 200064, RMSNorm 1e-6, no biases, untied; 256 experts of FFN 1536 (--ffn-hidden-size), top-8 by sigmoid score + expert bias, renormalised, no shared expert, router aux loss coefficient 0.001.
# Layout: 16 node(s) x 8 devices, TP=1 PP=2 EP=64 (DP64; 4 experts per EP rank, as MindSpeed-LLM's minimax27 recipe (TP1 PP2 EP64 on 128 devices)).
#   bash examples/minimax_m2/pretrain_minimax_m2_230b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minimax_m2/pretrain_minimax_m2_230b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/minimax_m2/pretrain_minimax_m2_230b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-16}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/minimax-m2-230b-mcore (ckpt_convert_minimax_m2_230b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/minimax-m2-230b}
DATA_PATH=${DATA_PATH:-./dataset/minimax_m2_text_document}    # data_convert_minimax_m2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-M2}

TP=${TP:-1} PP=${PP:-2} EP=${EP:-64}
NUM_LAYERS=62 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=1536 NUM_HEADS=48 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=200064
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 196608
    --position-embedding-type rope --rotary-base 5000000
    --qk-layernorm --qk-layernorm-full-width --rotary-percent 0.5
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 8
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob --moe-aux-loss-coeff 0.001
ARGS

recipe_pretrain

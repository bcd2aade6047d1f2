#!/usr/bin/env bash
# Pretrain gpt-oss-20b (openai/gpt-oss-20b config.json): 24 layers, hidden 2880, 64 heads / 8 KV heads of head dim 64, vocab 201088, RMSNorm 1e-5, untied embeddings; q/k/v/o, expert and router biases (--add-bias-linear); learned attention sinks (--softmax-type learnable); sliding window 128 on every other layer (from layer 0); YaRN rope theta 150000 (factor 32, original 4096, beta 32/1, ramp bounds not rounded); 32 experts of FFN 2880, top-4 (softmax over the top-4 logits), clamped SwiGLU (--quick-geglu --activation-func-clamp-value 7 --glu-linear-offset 1), router aux loss coefficient 0.9.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 EP=4 (DP4; 8 experts per EP rank).
#   bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gpt-oss-20b-mcore (ckpt_convert_gpt_oss_20b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gpt-oss-20b}
DATA_PATH=${DATA_PATH:-./dataset/gpt_oss_text_document}    # data_convert_gpt_oss_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-oss-20b}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}
NUM_LAYERS=24 HIDDEN_SIZE=2880 FFN_HIDDEN_SIZE=2880 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=64 VOCAB_SIZE=201088
SLIDING_WINDOW=128
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
SAVE_INTERVAL=1000 EVAL_INTERVAL=1000 EVAL_ITERS=0
PRECISION=(--bf16)
pretrain_setup

GPT_ARGS=(
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP"
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --sliding-window "$SLIDING_WINDOW" --sliding-window-pattern 2 --softmax-type learnable
    --position-embedding-type rope --rotary-base 150000
    --rope-scaling-type yarn --rope-scaling-factor 32 --original-max-position-embeddings 4096
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --no-yarn-correction-range-round-to-int
    --normalization RMSNorm --norm-epsilon 1e-5
    --quick-geglu --activation-func-clamp-value 7.0 --glu-linear-offset 1.0
    --untie-embeddings-and-output-weights
    --num-experts 32 --moe-router-topk 4 --moe-aux-loss-coeff 0.9
    --vocab-size "$VOCAB_SIZE" --make-vocab-size-divisible-by 1
    --attention-dropout 0 --hidden-dropout 0 --init-method-std 0.02
    --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
    --lr 1.25e-6 --min-lr 1.25e-7 --lr-decay-style cosine --lr-warmup-fraction 0.01
    --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    --use-distributed-optimizer "${PRECISION[@]}"
)
DATA_ARGS=(
    --data-path "$DATA_PATH" --split 100,0,0
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
)
OUTPUT_ARGS=(
    --log-interval 1 --save-interval "$SAVE_INTERVAL" --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS"
    --save "$CKPT_SAVE_DIR" ${CKPT_LOAD_DIR:+--load "$CKPT_LOAD_DIR"}
)

run_pretrain

#!/usr/bin/env bash
# Long-context pretraining of Llama-3-8B at 32k tokens with context parallelism, on the Llama-3.1-8B config (meta-llama/Llama-3.1-8B config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling (factor 8, 8192 original positions, 131072 in all), RMSNorm 1e-5, untied embeddings.
# Layout: 4 node(s) x 8 devices, TP=8 (sequence parallel) PP=1 CP=4: each 32768-token sample is split over 4 CP
# ranks (8192 tokens each); ring attention (megatron_cp_algo: causally load-balanced chunks, K/V exchange
# overlapped with compute) and full recompute of every layer, so a rank keeps only the layer inputs.
# The checkpoint is the TP=8 PP=1 one of examples/llama3/ckpt_convert_llama31_8b_hf2mcore.sh (CP splits tokens, not weights).
#   bash examples/llama3/pretrain_llama31_8b_32k_ptd.sh                        # the real run (set the paths below)
#   CP_ALGO=ulysses_cp_algo bash examples/llama3/pretrain_llama31_8b_32k_ptd.sh  # or kvallgather_cp_algo, or
#                                  # hybrid_cp_algo with ULYSSES_DEGREE (Ulysses ranks per CP group, default 2)
#   SMOKE=1 bash examples/llama3/pretrain_llama31_8b_32k_ptd.sh                # seconds on the CPU: CP=2, same behaviour flags
#   DRY_RUN=1 bash examples/llama3/pretrain_llama31_8b_32k_ptd.sh              # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/llama31-8b-mcore (ckpt_convert_llama31_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama31-8b-32k}
DATA_PATH=${DATA_PATH:-./dataset/llama31_text_document}    # data_convert_llama31_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}

TP=${TP:-8} PP=${PP:-1} CP=${CP:-4} CP_ALGO=${CP_ALGO:-megatron_cp_algo}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=128256
SEQ_LENGTH=${SEQ_LENGTH:-32768} MBS=${MBS:-1} GBS=${GBS:-16} TRAIN_ITERS=${TRAIN_ITERS:-2000}
SAVE_INTERVAL=500 EVAL_INTERVAL=500 EVAL_ITERS=0

arg_group PARALLEL_ARGS <<'ARGS'
    --tensor-model-parallel-size "$TP" --sequence-parallel --pipeline-model-parallel-size "$PP"
ARGS
arg_group MODEL_ARGS <<'ARGS'
    "${CP_ARGS[@]}"
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 500000
    --rope-scaling-type llama3 --rope-scaling-factor 8 --low-freq-factor 1 --high-freq-factor 4
    --original-max-position-embeddings 8192
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS
arg_group TRAIN_ARGS <<'ARGS'
    --vocab-size "$VOCAB_SIZE" --make-vocab-size-divisible-by 1
    --attention-dropout 0 --hidden-dropout 0 --init-method-std 0.02
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
    --lr 1.25e-6 --min-lr 1.25e-7 --lr-decay-style cosine --lr-warmup-fraction 0.01
    --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    --use-distributed-optimizer "${PRECISION[@]}"
ARGS

recipe_pretrain

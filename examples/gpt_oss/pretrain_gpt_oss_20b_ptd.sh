#!/usr/bin/env bash
# Pretrain gpt-oss-20b (openai/gpt-oss-20b config.json): 24 layers, hidden 2880, 64 heads / 8 KV heads of head dim 64, vocab 201088, RMSNorm 1e-5, untied embeddings; q/k/v/o, expert and router biases (--add-bias-linear); learned attention sinks (--softmax-type learnable); sliding window 128 on every other layer (from layer 0); YaRN rope theta 150000 (factor 32, original 4096, beta 32/1, ramp bounds not rounded); 32 experts of FFN 2880, top-4 (softmax over the top-4 logits), clamped SwiGLU (--quick-geglu --activation-func-clamp-value 7 --glu-linear-offset 1), router aux loss coefficient 0.9.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 EP=4 (DP4; 8 experts per EP rank).
#   bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_oss/pretrain_gpt_oss_20b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gpt-oss-20b-mcore (ckpt_convert_gpt_oss_20b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gpt-oss-20b}
DATA_PATH=${DATA_PATH:-./dataset/gpt_oss_text_document}    # data_convert_gpt_oss_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-oss-20b}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}
NUM_LAYERS=24 HIDDEN_SIZE=2880 FFN_HIDDEN_SIZE=2880 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=64 VOCAB_SIZE=201088
SLIDING_WINDOW=128
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
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
ARGS

recipe_pretrain

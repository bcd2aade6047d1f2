#!/usr/bin/env bash
# Pretrain gemma-2-9b (google/gemma-2-9b config.json): 42 layers, hidden 3584, FFN 14336, 16 heads / 8 KV heads, head dim 256, vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6 before and after attention and MLP, embeddings times sqrt(hidden), gated GELU (tanh), attention softcap 50, final softcap 30, softmax scale 256^-0.5, sliding window 4096 on even layers (every 2nd layer full), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/gemma2/pretrain_gemma2_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma2/pretrain_gemma2_9b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gemma2/pretrain_gemma2_9b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gemma2-9b-mcore (ckpt_convert_gemma2_9b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gemma2-9b}
DATA_PATH=${DATA_PATH:-./dataset/gemma2_text_document}    # data_convert_gemma2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-2-9b}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=42 HIDDEN_SIZE=3584 FFN_HIDDEN_SIZE=14336 NUM_HEADS=16 NUM_KV_HEADS=8 KV_CHANNELS=256 VOCAB_SIZE=256000
SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --kv-channels "$KV_CHANNELS" --query-pre-attn-scalar 256
    --attn-logit-softcapping 50.0 --output-logit-softcapping 30.0
    --sliding-window "$SLIDING_WINDOW" --sliding-window-pattern 2
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p --post-norm --input-embeds-norm
    --geglu --gelu-tanh --disable-bias-linear
ARGS

recipe_pretrain

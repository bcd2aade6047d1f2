#!/usr/bin/env bash
# Pretrain gemma-3-1b-pt (google/gemma-3-1b-pt config.json (gemma3_text)): 26 layers, hidden 1152, FFN 6912, 4 heads / 1 KV head, head dim 256, vocab 262144, RMSNorm(1 + w) 1e-6 before and after attention and MLP, per-head q/k RMSNorm(1 + w), embeddings times sqrt(hidden), gated GELU (tanh), softmax scale 256^-0.5, sliding window 512 on 5 of every 6 layers (every 6th full), rope theta 1000000 on full layers and 10000 on sliding ones, no softcaps, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/gemma3/pretrain_gemma3_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma3/pretrain_gemma3_1b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gemma3/pretrain_gemma3_1b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gemma3-1b-mcore (ckpt_convert_gemma3_1b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gemma3-1b}
DATA_PATH=${DATA_PATH:-./dataset/gemma3_text_document}    # data_convert_gemma3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-3-1b-pt}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=26 HIDDEN_SIZE=1152 FFN_HIDDEN_SIZE=6912 NUM_HEADS=4 NUM_KV_HEADS=1 KV_CHANNELS=256 VOCAB_SIZE=262144
SLIDING_WINDOW=512
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --kv-channels "$KV_CHANNELS" --query-pre-attn-scalar 256 --qk-layernorm
    --sliding-window "$SLIDING_WINDOW" --sliding-window-pattern 6
    --position-embedding-type rope --rotary-base 1000000 --local-rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p --post-norm --input-embeds-norm
    --geglu --gelu-tanh --disable-bias-linear
ARGS

recipe_pretrain

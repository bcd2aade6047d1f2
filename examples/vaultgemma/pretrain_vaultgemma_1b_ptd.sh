#!/usr/bin/env bash
# Pretrain vaultgemma-1b (google/vaultgemma-1b config.json): 26 layers, hidden 1152, FFN 6912, 4 heads / 4 KV heads, head dim 256, vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6 before attention and MLP only (no output norms), embeddings times sqrt(hidden), gated GELU (tanh), softmax scale 256^-0.5, sliding window 512 on even layers (every 2nd layer full), no softcaps, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/vaultgemma/pretrain_vaultgemma_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/vaultgemma/pretrain_vaultgemma_1b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/vaultgemma/pretrain_vaultgemma_1b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/vaultgemma-1b-mcore (ckpt_convert_vaultgemma_1b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/vaultgemma-1b}
DATA_PATH=${DATA_PATH:-./dataset/vaultgemma_text_document}    # data_convert_vaultgemma_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/vaultgemma-1b}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=26 HIDDEN_SIZE=1152 FFN_HIDDEN_SIZE=6912 NUM_HEADS=4 NUM_KV_HEADS=4 KV_CHANNELS=256 VOCAB_SIZE=256000
SLIDING_WINDOW=512
SEQ_LENGTH=${SEQ_LENGTH:-1024} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1024
    --kv-channels "$KV_CHANNELS" --query-pre-attn-scalar 256
    --sliding-window "$SLIDING_WINDOW" --sliding-window-pattern 2
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p --input-embeds-norm
    --geglu --gelu-tanh --disable-bias-linear
ARGS

recipe_pretrain

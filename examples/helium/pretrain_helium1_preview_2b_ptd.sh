#!/usr/bin/env bash
# Pretrain helium-1-preview-2b (kyutai/helium-1-preview-2b config.json): 24 layers, hidden 2560, FFN 7040, 20 heads (MHA), head dim 128 (= hidden / heads, which Helium's o_proj requires), vocab 48000, interleaved RoPE theta 100000, RMSNorm 1e-8, no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/helium/pretrain_helium1_preview_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/helium/pretrain_helium1_preview_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/helium/pretrain_helium1_preview_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/helium1-preview-2b-mcore (ckpt_convert_helium1_preview_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/helium1-preview-2b}
DATA_PATH=${DATA_PATH:-./dataset/helium1_preview_text_document}    # data_convert_helium1_preview_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/helium-1-preview-2b}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=7040 NUM_HEADS=20 NUM_KV_HEADS=20 VOCAB_SIZE=48000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096
    --position-embedding-type rope --rotary-base 100000 --rope-interleaved
    --normalization RMSNorm --norm-epsilon 1e-8 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

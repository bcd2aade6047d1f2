#!/usr/bin/env bash
# Pretrain MiniCPM3-4B: (transformers' MiniCPM3Config() defaults, whose docstring names openbmb/MiniCPM3-4B; see examples/README.md) 62 layers, hidden 2560, FFN 6400, 40 heads (MLA: q latent 768, kv latent 256, q/k 64 + rope 32, v 64), vocab 73448, rope theta 10000, RMSNorm 1e-5 (latent norms 1e-6), tied embeddings; embeddings x 12 (scale_emb), residual branches x 1.4 / sqrt(62) (scale_depth), logits x 256 / 2560 (dim_model_base). The published LongRoPE scaling is not supported (the converter refuses it), so this recipe trains from scratch with plain RoPE.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 (DP8; dense).
#   bash examples/minicpm3/pretrain_minicpm3_4b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minicpm3/pretrain_minicpm3_4b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/minicpm3/pretrain_minicpm3_4b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/minicpm3-4b-mcore (ckpt_convert_minicpm3_4b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/minicpm3-4b}
DATA_PATH=${DATA_PATH:-./dataset/minicpm3_text_document}    # data_convert_minicpm3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniCPM3-4B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=62 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=6400 NUM_HEADS=40 VOCAB_SIZE=73448 NUM_KV_HEADS=40
Q_LORA_RANK=768 KV_LORA_RANK=256 QK_HEAD_DIM=64 QK_POS_EMB_HEAD_DIM=32 V_HEAD_DIM=64
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
INIT_METHOD_STD=0.1

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-5 --mla-latent-norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --embedding-multiplier 12 --residual-multiplier 0.1778001778002667 --output-multiplier-scale 0.1
ARGS

recipe_pretrain

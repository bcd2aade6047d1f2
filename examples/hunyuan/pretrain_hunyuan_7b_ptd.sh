#!/usr/bin/env bash
# Pretrain Hunyuan-7B-Pretrain (tencent/Hunyuan-7B-Pretrain config.json; see examples/README.md): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128167, RMSNorm 1e-5, per-head q/k RMSNorm after RoPE, rope theta 10000 with NTK alpha 1000 (dynamic with a fixed alpha: base 10000 x 1000 ** (128 / 126)), no biases, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/hunyuan/pretrain_hunyuan_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan/pretrain_hunyuan_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/hunyuan/pretrain_hunyuan_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/hunyuan-7b-mcore (ckpt_convert_hunyuan_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/hunyuan-7b}
DATA_PATH=${DATA_PATH:-./dataset/hunyuan_text_document}    # data_convert_hunyuan_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-7B-Pretrain}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=128167
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --qk-layernorm --qk-layernorm-after-rope --rope-ntk-alpha 1000
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

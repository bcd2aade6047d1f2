#!/usr/bin/env bash
# Pretrain Ministral-3-8B-Base-2512 (text model) (mistralai/Ministral-3-8B-Base-2512 config.json; see examples/README.md): 34 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 131072, rope theta 1e6 with YaRN (factor 16, original 16384, beta 32 / 1, mscale 1 / 1), Llama-4 query temperature 0.1 per 16384 positions, RMSNorm 1e-5, no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/ministral3/pretrain_ministral3_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ministral3/pretrain_ministral3_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/ministral3/pretrain_ministral3_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/ministral3-8b-mcore (ckpt_convert_ministral3_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/ministral3-8b}
DATA_PATH=${DATA_PATH:-./dataset/ministral3_text_document}    # data_convert_ministral3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-3-8B-Base-2512-text}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=34 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=131072
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --rope-scaling-type yarn --rope-scaling-factor 16 --original-max-position-embeddings 16384
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --rope-scaling-mscale 1 --rope-scaling-mscale-all-dim 1
    --attn-temperature-beta 0.1 --attn-temperature-length 16384
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

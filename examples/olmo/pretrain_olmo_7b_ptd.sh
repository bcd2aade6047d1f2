#!/usr/bin/env bash
# Pretrain OLMo-7B-hf (allenai/OLMo-7B-hf config.json = transformers' OlmoConfig() defaults): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 50304, rope theta 10000, LayerNorm without weight or bias (eps 1e-5), SwiGLU, no biases, no q/k/v clipping (clip_qkv null), untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/olmo/pretrain_olmo_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo/pretrain_olmo_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/olmo/pretrain_olmo_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/olmo-7b-mcore (ckpt_convert_olmo_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/olmo-7b}
DATA_PATH=${DATA_PATH:-./dataset/olmo_text_document}    # data_convert_olmo_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-7B-hf}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=11008 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=50304
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000
    --normalization LayerNorm --norm-epsilon 1e-5 --non-parametric-norm --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

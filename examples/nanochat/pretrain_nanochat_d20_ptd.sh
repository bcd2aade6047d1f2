#!/usr/bin/env bash
# Pretrain nanochat-d20 (nanochat-students/nanochat-d20 config.json): 20 layers, hidden 1280, FFN 5120, 10 heads / 10 KV heads (head dim 128), vocab 65536, rope theta 10000, RMSNorm 1e-6 without weights on the embeddings, before attention and MLP, on q/k and at the end, non-gated ReLU-squared MLP, final logit softcap 15, no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/nanochat/pretrain_nanochat_d20_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nanochat/pretrain_nanochat_d20_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/nanochat/pretrain_nanochat_d20_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/nanochat-d20-mcore (ckpt_convert_nanochat_d20_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/nanochat-d20}
DATA_PATH=${DATA_PATH:-./dataset/nanochat_text_document}    # data_convert_nanochat_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/nanochat-d20}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=20 HIDDEN_SIZE=1280 FFN_HIDDEN_SIZE=5120 NUM_HEADS=10 NUM_KV_HEADS=10 VOCAB_SIZE=65536
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --squared-relu --embed-layernorm --non-parametric-norm --qk-layernorm --non-parametric-qk-norm
    --output-logit-softcapping 15.0
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-6 --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

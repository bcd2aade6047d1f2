#!/usr/bin/env bash
# Pretrain pythia-1.4b (EleutherAI/pythia-1.4b config.json): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50304, rope theta 10000 on the first 25% of each head's dims, two LayerNorms (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear, GELU, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/gpt_neox/pretrain_pythia_1_4b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neox/pretrain_pythia_1_4b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_neox/pretrain_pythia_1_4b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/pythia-1-4b-mcore (ckpt_convert_pythia_1_4b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/pythia-1-4b}
DATA_PATH=${DATA_PATH:-./dataset/pythia_text_document}    # data_convert_pythia_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/pythia-1.4b}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=50304
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=2e-5 MIN_LR=2e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.25
    --normalization LayerNorm --norm-epsilon 1e-5 --parallel-residual
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain gpt-j-6b (EleutherAI/gpt-j-6b config.json): 28 layers, hidden 4096, FFN 16384, 16 heads (MHA), vocab 50400, interleaved rope (base 10000) on the first 64 of 256 dims per head, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, biases on the MLP and the untied output layer only, GELU (tanh).
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/gptj/pretrain_gptj_6b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gptj/pretrain_gptj_6b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gptj/pretrain_gptj_6b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gptj-6b-mcore (ckpt_convert_gptj_6b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gptj-6b}
DATA_PATH=${DATA_PATH:-./dataset/gptj_text_document}    # data_convert_gptj_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-j-6b}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=28 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=50400
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1e-5 MIN_LR=1e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.25 --rope-interleaved
    --normalization LayerNorm --norm-epsilon 1e-5 --parallel-residual --parallel-residual-shared-norm
    --disable-bias-linear --add-mlp-bias --add-output-layer-bias --gelu-tanh
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

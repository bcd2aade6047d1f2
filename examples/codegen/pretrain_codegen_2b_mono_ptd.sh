#!/usr/bin/env bash
# Pretrain codegen-2B-mono (Salesforce/codegen-2B-mono config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, interleaved rope (base 10000) on the first 64 of 80 dims per head, GPT-J's parallel layer (one LayerNorm, bias, 1e-5), biases on the MLP and the untied output layer only, GELU (tanh); q/v/k fused in 4 blocks (the converter reorders them).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1.
#   bash examples/codegen/pretrain_codegen_2b_mono_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/codegen/pretrain_codegen_2b_mono_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/codegen/pretrain_codegen_2b_mono_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/codegen-2b-mono-mcore (ckpt_convert_codegen_2b_mono_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/codegen-2b-mono}
DATA_PATH=${DATA_PATH:-./dataset/codegen_text_document}    # data_convert_codegen_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/codegen-2B-mono}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=10240 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=51200
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1e-5 MIN_LR=1e-6

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.8 --rope-interleaved
    --normalization LayerNorm --norm-epsilon 1e-5 --parallel-residual --parallel-residual-shared-norm
    --disable-bias-linear --add-mlp-bias --add-output-layer-bias --gelu-tanh
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

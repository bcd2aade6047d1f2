#!/usr/bin/env bash
# Pretrain cwm (facebook/cwm config.json; see examples/README.md): 64 layers, hidden 6144, FFN 21504, 48 heads / 8 KV heads, vocab 128256, rope theta 1e6 with llama3 scaling (factor 16, low 1, high 4, original 8192), sliding window 8192 on every layer but 0, 4, ..., 60, RMSNorm 1e-5, no biases, untied embeddings.
# Layout: 2 node(s) x 8 devices, TP=8 PP=2.
#   bash examples/cwm/pretrain_cwm_32b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cwm/pretrain_cwm_32b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/cwm/pretrain_cwm_32b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/cwm-32b-mcore (ckpt_convert_cwm_32b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/cwm-32b}
DATA_PATH=${DATA_PATH:-./dataset/cwm_text_document}    # data_convert_cwm_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/cwm}

TP=${TP:-8} PP=${PP:-2}
NUM_LAYERS=64 HIDDEN_SIZE=6144 FFN_HIDDEN_SIZE=21504 NUM_HEADS=48 NUM_KV_HEADS=8 VOCAB_SIZE=128256
SLIDING_WINDOW=8192
SEQ_LENGTH=${SEQ_LENGTH:-16384} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    FULL_ATTENTION_LAYERS=($(seq 0 4 $(( NUM_LAYERS - 1 ))))    # every 4th layer from 0 attends fully
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --rope-scaling-type llama3 --rope-scaling-factor 16 --low-freq-factor 1 --high-freq-factor 4 --original-max-position-embeddings 8192
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_ATTENTION_LAYERS[@]}"
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

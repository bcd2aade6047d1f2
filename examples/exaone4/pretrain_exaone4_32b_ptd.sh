#!/usr/bin/env bash
# Pretrain EXAONE-4.0-32B (LGAI-EXAONE/EXAONE-4.0-32B config.json): 64 layers, hidden 5120, FFN 27392, 40 heads / 8 KV heads (head dim 128), vocab 102400, rope theta 1000000 with llama3 scaling (factor 16, original 8192) on the sliding-window layers only, RMSNorm 1e-5 after attention and MLP only (no norms before them), per-head q/k RMSNorm, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers (layers 3, 7, ..., 63 attend fully and without RoPE), untied embeddings.
# Layout: 2 node(s) x 8 devices, TP=8 PP=2.
#   bash examples/exaone4/pretrain_exaone4_32b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/exaone4/pretrain_exaone4_32b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/exaone4/pretrain_exaone4_32b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/exaone4-32b-mcore (ckpt_convert_exaone4_32b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/exaone4-32b}
DATA_PATH=${DATA_PATH:-./dataset/exaone4_text_document}    # data_convert_exaone4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/EXAONE-4.0-32B}

TP=${TP:-8} PP=${PP:-2}
NUM_LAYERS=64 HIDDEN_SIZE=5120 FFN_HIDDEN_SIZE=27392 NUM_HEADS=40 NUM_KV_HEADS=8 VOCAB_SIZE=102400
SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# full-attention layers (3 of every 4 slide): 3, 7, ..., counted on the layers this run has
after_setup() {
    FULL_LAYERS=($(seq 3 4 $(( NUM_LAYERS - 1 ))))
    if (( ${#FULL_LAYERS[@]} == 0 )); then FULL_LAYERS=($(( NUM_LAYERS - 1 ))); fi    # SMOKE=1 (2 layers)
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_LAYERS[@]}" --no-rope-layers "${FULL_LAYERS[@]}"
    --qk-layernorm --post-norm-only
    --position-embedding-type rope --rotary-base 1000000
    --rope-scaling-type llama3 --rope-scaling-factor 16 --low-freq-factor 1 --high-freq-factor 4 --original-max-position-embeddings 8192
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

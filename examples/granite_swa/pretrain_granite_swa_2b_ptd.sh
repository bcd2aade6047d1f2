#!/usr/bin/env bash
# Pretrain granite-swash-2b (ibm-granite/granite-swash-2b config.json): 24 layers, hidden 2560, FFN 8192, 20 heads / 4 KV heads, vocab 100352, rope theta 10000 on every layer, RMSNorm 1e-5, SwiGLU, no biases, sliding window 128 except on layers 0, 4, ..., 20 (full attention), a learnable attention sink per head (--softmax-type learnable), Granite's multipliers all 1 (attention scale 1), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1.
#   bash examples/granite_swa/pretrain_granite_swa_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granite_swa/pretrain_granite_swa_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/granite_swa/pretrain_granite_swa_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/granite_swa-2b-mcore (ckpt_convert_granite_swa_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/granite_swa-2b}
DATA_PATH=${DATA_PATH:-./dataset/granite_swa_text_document}    # data_convert_granite_swa_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-swash-2b}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=8192 NUM_HEADS=20 NUM_KV_HEADS=4 VOCAB_SIZE=100352
SLIDING_WINDOW=128
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# full-attention layers: 0, 4, 8, ... (transformers' default layer_types), counted on the layers this run has
after_setup() {
    FULL_LAYERS=($(seq 0 4 $(( NUM_LAYERS - 1 ))))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_LAYERS[@]}" --softmax-type learnable
    --embedding-multiplier 1.0 --residual-multiplier 1.0 --output-multiplier-scale 1.0 --softmax-scale 1.0
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

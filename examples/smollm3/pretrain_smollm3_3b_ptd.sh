#!/usr/bin/env bash
# Pretrain SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): 36 layers, hidden 2048, FFN 11008, 16 heads / 4 KV heads, vocab 128256, rope theta 5000000 on 3 of every 4 layers (every 4th layer, 3, 7, ..., 35, is NoPE), RMSNorm 1e-6, SwiGLU, no biases, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/smollm3/pretrain_smollm3_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/smollm3/pretrain_smollm3_3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/smollm3/pretrain_smollm3_3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/smollm3-3b-mcore (ckpt_convert_smollm3_3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/smollm3-3b}
DATA_PATH=${DATA_PATH:-./dataset/smollm3_text_document}    # data_convert_smollm3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/SmolLM3-3B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=36 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=11008 NUM_HEADS=16 NUM_KV_HEADS=4 VOCAB_SIZE=128256
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# NoPE layers: every 4th (no_rope_layer_interval 4), i.e. 3, 7, ..., counted on the layers this run has
after_setup() {
    NO_ROPE_LAYERS=($(seq 3 4 $(( NUM_LAYERS - 1 ))))
    if (( ${#NO_ROPE_LAYERS[@]} == 0 )); then NO_ROPE_LAYERS=($(( NUM_LAYERS - 1 ))); fi    # SMOKE=1 (2 layers): the last one
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536
    --no-rope-layers "${NO_ROPE_LAYERS[@]}"
    --position-embedding-type rope --rotary-base 5000000
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

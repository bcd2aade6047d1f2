#!/usr/bin/env bash
# Pretrain Mamba-2.8B (state-spaces/mamba-2.8b-hf): 64 Mamba layers (no attention, no MLP), hidden 2560, d_inner 5120 (expand 2), state 16, conv 4, dt rank 160, vocab 50280, RMSNorm 1e-5, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 (DP4): the 5120 inner channels split over TP.
#   bash examples/mamba/pretrain_mamba_28b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mamba/pretrain_mamba_28b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/mamba/pretrain_mamba_28b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/mamba-2.8b-mcore-tp2pp1 (ckpt_convert_mamba_28b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mamba-2.8b}
DATA_PATH=${DATA_PATH:-./dataset/mamba_text_document}    # data_convert_mamba_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mamba-2.8b-hf}

TP=${TP:-2} PP=${PP:-1}
# NUM_HEADS: no attention; 1, as the converter records for an all-Mamba model
NUM_LAYERS=64 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=10240 NUM_HEADS=1 NUM_KV_HEADS=1 VOCAB_SIZE=50280
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=3e-4 MIN_LR=3e-5
INIT_METHOD_STD=0.1    # config.json's initializer_range

after_setup() {
    HYBRID_PATTERN=$(printf 'M%.0s' $(seq "$NUM_LAYERS"))    # every layer a Mamba layer
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --num-attention-heads "$NUM_HEADS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 1
    --mamba-state-dim 16 --mamba-expand 2 --mamba-d-conv 4
    --mamba-dt-rank 160    # config.json's time_step_rank (= ceil(2560 / 16)); kept as is under SMOKE=1
    --fp32-residual-connection    # HF's residual_in_fp32 (true): the converted checkpoint records it
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --disable-bias-linear
ARGS

recipe_pretrain

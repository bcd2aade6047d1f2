#!/usr/bin/env bash
# Pretrain FalconMamba-7B (tiiuae/falcon-mamba-7b): 64 Mamba layers (no attention, no MLP), hidden 4096, d_inner 8192 (expand 2), state 16, conv 4, dt rank 256, weightless RMS norms on dt, B and C (eps 1e-6), vocab 65024, RMSNorm 1e-5, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1 (DP2): the 8192 inner channels split over TP.
#   bash examples/falcon_mamba/pretrain_falcon_mamba_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon_mamba/pretrain_falcon_mamba_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/falcon_mamba/pretrain_falcon_mamba_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/falcon-mamba-7b-mcore-tp4pp1 (ckpt_convert_falcon_mamba_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/falcon-mamba-7b}
DATA_PATH=${DATA_PATH:-./dataset/falcon_mamba_text_document}    # data_convert_falcon_mamba_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-mamba-7b}

TP=${TP:-4} PP=${PP:-1}
# NUM_HEADS: no attention; 1, as the converter records for an all-Mamba model
NUM_LAYERS=64 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=1 NUM_KV_HEADS=1 VOCAB_SIZE=65024
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=3e-4 MIN_LR=3e-5
INIT_METHOD_STD=0.1    # config.json's initializer_range

after_setup() {
    HYBRID_PATTERN=$(printf 'M%.0s' $(seq "$NUM_LAYERS"))    # every layer a Mamba layer
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --num-attention-heads "$NUM_HEADS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 1
    --mamba-state-dim 16 --mamba-expand 2 --mamba-d-conv 4    # d_inner = config.json's intermediate_size 8192
    --mamba-dt-rank 256    # config.json's time_step_rank; kept as is under SMOKE=1
    --mamba-mixer-rms-eps 1e-6    # FalconMamba's norms on dt, B and C (transformers' mixer_rms_eps default)
    --fp32-residual-connection    # HF's residual_in_fp32 (true): the converted checkpoint records it
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

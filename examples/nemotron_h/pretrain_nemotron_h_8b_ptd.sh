#!/usr/bin/env bash
# Pretrain Nemotron-H-8B-Base-8K (nvidia/Nemotron-H-8B-Base-8K): 52 layers in Megatron-core's hybrid layout (24 Mamba2 'M', 4 attention '*', 24 squared-ReLU MLP '-'), hidden 4096, FFN 21504, 32 heads / 8 KV heads of 128 without position embedding, Mamba2 d_inner 8192 (expand 2) in 128 heads of 64, 8 B/C groups, state 128, conv 4, SSD chunk 128, dt clamped below at 0.001, vocab 131072, RMSNorm 1e-5, no linear biases, untied embeddings, 8192 positions.
# The pattern: Megatron-Bridge's NemotronHModel8BProvider, transformers' NemotronHConfig default and public copies of
# the model's config.json agree on it (the Hub file itself was not read here; see examples/README.md).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 (DP4): attention heads, KV heads, Mamba heads and groups split over TP.
#   bash examples/nemotron_h/pretrain_nemotron_h_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron_h/pretrain_nemotron_h_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/nemotron_h/pretrain_nemotron_h_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/nemotron-h-8b-mcore-tp2pp1 (ckpt_convert_nemotron_h_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/nemotron-h-8b}
DATA_PATH=${DATA_PATH:-./dataset/nemotron_h_text_document}    # data_convert_nemotron_h_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-8B-Base-8K}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=52 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=21504 NUM_HEADS=32 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=131072
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6
HYBRID_PATTERN="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"    # one letter per layer

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # every block kind once per stage (Mamba, MLP, attention, MLP), and hidden 256 so that the 8 groups
        # still fit the Mamba heads (expand 2 x 256 / head dim 64 = 8 heads)
        HYBRID_PATTERN=$(printf 'M-*-%.0s' $(seq "$PP")) NUM_LAYERS=$(( 4 * PP )) HIDDEN_SIZE=256
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-state-dim 128 --mamba-head-dim 64 --mamba-num-groups 8 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 128 --mamba-dt-limit-min 0.001
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --squared-relu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

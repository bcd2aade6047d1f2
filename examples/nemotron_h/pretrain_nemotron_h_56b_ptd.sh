#!/usr/bin/env bash
# Pretrain Nemotron-H-56B-Base-8K (nvidia/Nemotron-H-56B-Base-8K): 118 layers in Megatron-core's hybrid layout (54 Mamba2 'M', 10 attention '*', 54 squared-ReLU MLP '-'), hidden 8192, FFN 32768, 64 heads / 8 KV heads of 128 without position embedding, Mamba2 d_inner 16384 (expand 2) in 256 heads of 64, 8 B/C groups, state 256, conv 4, SSD chunk 128, dt clamped below at 0.001, vocab 131072, RMSNorm 1e-5, no linear biases, untied embeddings, 8192 positions.
# The pattern is Megatron-Bridge's NemotronHModel56BProvider's (not checked here against the published config.json).
# Layout: 4 node(s) x 8 devices, TP=8 PP=2 (DP2) with sequence parallelism: 59 layers per stage; heads, KV heads,
# Mamba heads and the 8 groups (one per rank) split over TP.
#   bash examples/nemotron_h/pretrain_nemotron_h_56b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron_h/pretrain_nemotron_h_56b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/nemotron_h/pretrain_nemotron_h_56b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/nemotron-h-56b-mcore-tp8pp2 (ckpt_convert_nemotron_h_56b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/nemotron-h-56b}
DATA_PATH=${DATA_PATH:-./dataset/nemotron_h_text_document}    # data_convert_nemotron_h_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-56B-Base-8K}

TP=${TP:-8} PP=${PP:-2}
NUM_LAYERS=118 HIDDEN_SIZE=8192 FFN_HIDDEN_SIZE=32768 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=131072
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6
HYBRID_PATTERN="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"    # one letter per layer

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
    --mamba-state-dim 256 --mamba-head-dim 64 --mamba-num-groups 8 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 128 --mamba-dt-limit-min 0.001
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --squared-relu --disable-bias-linear
    --untie-embeddings-and-output-weights --sequence-parallel
ARGS

recipe_pretrain

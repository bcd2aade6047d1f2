#!/usr/bin/env bash
# Long-context pretraining of Nemotron-H-8B at 64k tokens with context parallelism, on the Nemotron-H-8B-Base-8K config (nvidia/Nemotron-H-8B-Base-8K): 52 layers in Megatron-core's hybrid layout (24 Mamba2 'M', 4 attention '*', 24 squared-ReLU MLP '-'), hidden 4096, FFN 21504, 32 heads / 8 KV heads of 128 without position embedding, Mamba2 d_inner 8192 (expand 2) in 128 heads of 64, 8 B/C groups, state 128, conv 4, SSD chunk 128, dt clamped below at 0.001, vocab 131072, RMSNorm 1e-5, no linear biases, untied embeddings.
# Layout: 2 node(s) x 8 devices, TP=2 (sequence parallel) PP=1 CP=8: each 65536-token sample is split over 8 CP
# ranks (8192 tokens each, the model's trained length); the attention layers run ring attention (megatron_cp_algo:
# causally load-balanced chunks), the Mamba2 layers pass their conv inputs and fp32 SSM state from CP rank to CP
# rank (the chain runs the ranks in sequence order: CP splits their memory, not their time; see
# bench/linear_attention.py's CP rows); full recompute of every layer. Attention has no positions, so the context
# can grow past the 8192 the base model saw; a model that is to use it needs this continued pretraining.
# The checkpoint is the TP=2 PP=1 one of ckpt_convert_nemotron_h_8b_hf2mcore.sh (CP splits tokens, not weights).
#   bash examples/nemotron_h/pretrain_nemotron_h_8b_64k_ptd.sh                        # the real run (set the paths below)
#   CP_ALGO=ulysses_cp_algo bash examples/nemotron_h/pretrain_nemotron_h_8b_64k_ptd.sh  # or hybrid_cp_algo with ULYSSES_DEGREE
#   SMOKE=1 bash examples/nemotron_h/pretrain_nemotron_h_8b_64k_ptd.sh                # seconds on the CPU: CP=2, same behaviour flags
#   DRY_RUN=1 bash examples/nemotron_h/pretrain_nemotron_h_8b_64k_ptd.sh              # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/nemotron-h-8b-mcore-tp2pp1 (ckpt_convert_nemotron_h_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/nemotron-h-8b-64k}
DATA_PATH=${DATA_PATH:-./dataset/nemotron_h_text_document}    # data_convert_nemotron_h_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-8B-Base-8K}

TP=${TP:-2} PP=${PP:-1} CP=${CP:-8} CP_ALGO=${CP_ALGO:-megatron_cp_algo}
NUM_LAYERS=52 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=21504 NUM_HEADS=32 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=131072
SEQ_LENGTH=${SEQ_LENGTH:-65536} MBS=${MBS:-1} GBS=${GBS:-16} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6
HYBRID_PATTERN="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"    # one letter per layer

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # every block kind once per stage (Mamba, MLP, attention, MLP), and hidden 256 so that the 8 groups
        # still fit the Mamba heads (expand 2 x 256 / head dim 64 = 8 heads)
        HYBRID_PATTERN=$(printf 'M-*-%.0s' $(seq "$PP")) NUM_LAYERS=$(( 4 * PP )) HIDDEN_SIZE=256
    fi
}
arg_group PARALLEL_ARGS <<'ARGS'
    --tensor-model-parallel-size "$TP" --sequence-parallel --pipeline-model-parallel-size "$PP"
ARGS
arg_group MODEL_ARGS <<'ARGS'
    "${CP_ARGS[@]}"
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-state-dim 128 --mamba-head-dim 64 --mamba-num-groups 8 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 128 --mamba-dt-limit-min 0.001
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --squared-relu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
ARGS

recipe_pretrain

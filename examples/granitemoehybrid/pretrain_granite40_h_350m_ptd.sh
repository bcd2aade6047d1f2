#!/usr/bin/env bash
# Pretrain Granite-4.0-H-350M (ibm-granite/granite-4.0-h-350m): 32 HF layers, each a mixer then a SwiGLU MLP (our 64 pattern letters): Mamba2 in 28, NoPE attention in layers 10, 13, 17 and 27 (12 heads / 4 KV heads of 64); hidden 768, MLP (shared_intermediate_size) 2048, no experts; Mamba2 d_inner 1536 (expand 2) in 48 heads of 32, 1 B/C group, state 128, conv 4; embeddings x 12, every branch x 0.246, attention scale 0.015625, logits / 3; RMSNorm 1e-5, vocab 100352, tied embeddings, 32768 positions.
# Figures: a public copy of the model's config.json (a quantised conversion's, architecture fields unchanged); its
# mamba_chunk_size is not in that copy: transformers' default 256 (it changes the speed, not the result); the Hub file
# itself was not read here (see examples/README.md).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 (DP8).
#   bash examples/granitemoehybrid/pretrain_granite40_h_350m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoehybrid/pretrain_granite40_h_350m_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/granitemoehybrid/pretrain_granite40_h_350m_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/granite-4.0-h-350m-mcore-tp1pp1 (ckpt_convert_granite40_h_350m_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/granite-4.0-h-350m}
DATA_PATH=${DATA_PATH:-./dataset/granite40_h_text_document}    # data_convert_granite40_h_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-4.0-h-350m}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=64 HIDDEN_SIZE=768 FFN_HIDDEN_SIZE=2048 NUM_HEADS=12 NUM_KV_HEADS=4 KV_CHANNELS=64 VOCAB_SIZE=100352
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# two letters per HF layer: its mixer (M Mamba2, * attention), then its MLP (-)
HYBRID_PATTERN="M-M-M-M-M-M-M-M-M-M-*-M-M-*-M-M-M-*-M-M-M-M-M-M-M-M-M-*-M-M-M-M-"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        HYBRID_PATTERN=$(printf 'M-*-%.0s' $(seq "$PP")) NUM_LAYERS=$(( 4 * PP ))    # every kind in every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-state-dim 128 --mamba-head-dim 32 --mamba-num-groups 1 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 256
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 32768 --position-embedding-type none
    --embedding-multiplier 12.0 --residual-multiplier 0.246 --softmax-scale 0.015625 --output-multiplier-scale 0.3333333333333333
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

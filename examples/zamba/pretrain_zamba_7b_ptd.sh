#!/usr/bin/env bash
# Pretrain Zamba-7B-v1 (Zyphra/Zamba-7B-v1): 76 Mamba1 layers, 13 of them (layers 2, 7, 13, ..., 67, 73) first running the one shared attention block on [hidden; word embeddings] (16 heads of 464 over 2 x 3712 channels, softmax scale (464/2)^-0.5, no positions; a GeGLU MLP of 14848) and a 3712 x 3712 projection of their own; hidden 3712; Mamba1 d_inner 7424 (expand 2) as 2 independent SSMs of 3712 channels (each its own x_proj and dt_proj), state 16, dt rank 232, conv 4 with bias; no linear biases; RMSNorm 1e-5, vocab 32000 (the Mistral v0.1 tokenizer), tied embeddings, 4096 positions.
# Figures: not read from the Hub file itself (see examples/README.md): transformers' ZambaConfig defaults, which
# its documentation gives as Zamba-7B-v1's configuration.
# Layout: 1 node(s) x 8 devices, TP=2 PP=2 (DP2; attention heads and the 2 SSMs split over TP, the shared block held
# by both stages, its gradients summed over the pipeline).
#   bash examples/zamba/pretrain_zamba_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/zamba/pretrain_zamba_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/zamba/pretrain_zamba_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/zamba-7b-mcore-tp2pp1 (ckpt_convert_zamba_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/zamba-7b}
DATA_PATH=${DATA_PATH:-./dataset/zamba_text_document}    # data_convert_zamba_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba-7B-v1}

TP=${TP:-2} PP=${PP:-2}
NUM_LAYERS=76 HIDDEN_SIZE=3712 FFN_HIDDEN_SIZE=14848 NUM_HEADS=16 NUM_KV_HEADS=16 KV_CHANNELS=464 VOCAB_SIZE=32000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# one letter per layer: M Mamba1, Z the shared block then Mamba1
HYBRID_PATTERN="MMZMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMM"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        HYBRID_PATTERN=$(printf 'MZ%.0s' $(seq $(( 2 * PP )))) NUM_LAYERS=$(( 4 * PP ))    # the block on every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 1 --mamba-num-heads 2 --mamba-head-dim $HIDDEN_SIZE
    --mamba-state-dim 16 --mamba-dt-rank 232 --mamba-d-conv 4
    --num-shared-blocks 1 --query-pre-attn-scalar 232
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --geglu --disable-bias-linear
ARGS

recipe_pretrain

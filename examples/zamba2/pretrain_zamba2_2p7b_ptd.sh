#!/usr/bin/env bash
# Pretrain Zamba2-2.7B (Zyphra/Zamba2-2.7B): 54 Mamba2 layers, 9 of them (layers 6, 12, ..., 42, 47, 51) first running one of 2 shared attention blocks (ABAB) on [hidden; word embeddings] (32 heads of 160 over 2 x 2560 channels, softmax scale (160/2)^-0.5, no positions; a GeGLU MLP of 10240) with per-depth MLP adapters of rank 128 and a 2560 x 2560 projection of their own; hidden 2560; Mamba2 d_inner 5120 (expand 2) in 80 heads of 64, 1 B/C group, state 64, conv 4 with bias, SSD chunk 256, dt clamped below at 0.001; no linear biases; RMSNorm 1e-5, vocab 32000 (the Mistral v0.1 tokenizer), tied embeddings, 4096 positions.
# Figures: not read from the Hub file itself (see examples/README.md). Layers, hidden size, the state, conv and
# expansion, the 32 attention heads, the 2 shared blocks and the MLP adapters of rank 128 (use_shared_block_lora,
# no attention adapters) and the hybrid layers (layer_mapping) are Zyphra's standalone Zamba2 config.json (the
# 2.7B model); the Mamba2 head dim 64 is that implementation's default; the MLP width 4 x hidden, GeGLU, no
# positions in the shared attention (use_mem_rope false), RMSNorm 1e-5, the dt floor 0.001, 4096 positions and tied
# embeddings are Zamba2Config's defaults, which describe the 2.7B model.
# Layout: 1 node(s) x 8 devices, TP=2 PP=2 (DP2; heads and Mamba heads split over TP, the one B/C group replicated;
# the shared blocks held by both stages, their gradients summed over the pipeline).
#   bash examples/zamba2/pretrain_zamba2_2p7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/zamba2/pretrain_zamba2_2p7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/zamba2/pretrain_zamba2_2p7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/zamba2-2p7b-mcore-tp2pp1 (ckpt_convert_zamba2_2p7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/zamba2-2p7b}
DATA_PATH=${DATA_PATH:-./dataset/zamba2_text_document}    # data_convert_zamba2_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba2-2.7B}

TP=${TP:-2} PP=${PP:-2}
NUM_LAYERS=54 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=10240 NUM_HEADS=32 NUM_KV_HEADS=32 KV_CHANNELS=160 VOCAB_SIZE=32000
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# one letter per layer: M Mamba2, Z a shared block (blocks 0, 1, 0, 1, ...) then Mamba2
HYBRID_PATTERN="MMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMMZMMMMZMMMZMM"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        HYBRID_PATTERN=$(printf 'MZ%.0s' $(seq $(( 2 * PP )))) NUM_LAYERS=$(( 4 * PP ))    # both blocks on every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-state-dim 64 --mamba-head-dim 64 --mamba-num-groups 1 --mamba-expand 2 --mamba-d-conv 4
    --mamba-chunk-size 256 --mamba-dt-limit-min 0.001
    --num-shared-blocks 2 --shared-block-adapter-rank 128 --query-pre-attn-scalar 80
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --geglu --disable-bias-linear
ARGS

recipe_pretrain

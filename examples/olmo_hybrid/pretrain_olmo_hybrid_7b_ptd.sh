#!/usr/bin/env bash
# Pretrain Olmo-Hybrid-7B (allenai/Olmo-Hybrid-7B): 32 layers, every 4th softmax attention (8), the others gated DeltaNet (24), each with a SwiGLU MLP of 11008, hidden 3840; attention 30 heads of 128 (no GQA), Olmo3's output norms only and q/k RMSNorm over all heads' channels, no positions (rope_theta null); DeltaNet layers with Llama's pre-norms, 30 key / 30 value heads of 96 / 192, conv 4, beta in (0, 2) (linear_allow_neg_eigval), gated output norm eps 1e-5; RMSNorm 1e-6, vocab 100352, untied, 65536 positions.
# Figures: not read from the Hub file itself (see examples/README.md ²⁹): transformers' OlmoHybridConfig, whose
# docstring names allenai/Olmo-Hybrid-7B, gives the sizes, heads, DeltaNet sizes (key dim 0.75 x hidden / heads,
# value dim twice it), the every-4th-layer attention, beta doubling, eps, vocab and positions as its defaults; its
# model code says the released checkpoints use no RoPE, and fixes the DeltaNet output norm's eps at 1e-5.
# Layout: 1 node(s) x 8 devices, TP=2 PP=2 (DP2; 16 layers per stage; attention and DeltaNet heads split over TP,
# 30 heads allow TP 2, 3, 5, 6 but not 4 or 8).
#   bash examples/olmo_hybrid/pretrain_olmo_hybrid_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo_hybrid/pretrain_olmo_hybrid_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/olmo_hybrid/pretrain_olmo_hybrid_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/olmo-hybrid-7b-mcore-tp2pp2 (ckpt_convert_olmo_hybrid_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/olmo-hybrid-7b}
DATA_PATH=${DATA_PATH:-./dataset/olmo_hybrid_text_document}    # data_convert_olmo_hybrid_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-Hybrid-7B}

TP=${TP:-2} PP=${PP:-2}
NUM_LAYERS=32 HIDDEN_SIZE=3840 FFN_HIDDEN_SIZE=11008 NUM_HEADS=30 NUM_KV_HEADS=30 VOCAB_SIZE=100352
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        NUM_LAYERS=$(( 4 * PP ))    # one attention layer per stage: --linear-attention-freq 4
    fi
    # OlmoHybridConfig's DeltaNet sizes follow the attention heads and hidden size (so they shrink with them)
    LINEAR_KEY_DIM=$(( 3 * HIDDEN_SIZE / (4 * NUM_HEADS) )) LINEAR_VALUE_DIM=$(( 3 * HIDDEN_SIZE / (2 * NUM_HEADS) ))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --qk-layernorm --qk-layernorm-full-width --post-norm-only
    --experimental-attention-variant gated_delta_net --linear-attention-freq 4 --linear-attention-pre-norm
    --linear-conv-kernel-dim 4 --linear-key-head-dim "$LINEAR_KEY_DIM" --linear-value-head-dim "$LINEAR_VALUE_DIM"
    --linear-num-key-heads "$NUM_HEADS" --linear-num-value-heads "$NUM_HEADS"
    --linear-allow-neg-eigval --linear-norm-epsilon 1e-5
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain xLSTM-7B (NX-AI/xLSTM-7b): 32 blocks, each an mLSTM (8 heads, q/k 256 and v 512 wide per head: a matrix memory with exponential input and sigmoid forget gates capped at 15, a per-head LayerNorm, a sigmoid output gate) then a SwiGLU MLP of 10944; hidden 4096, RMSNorm 1e-6, no positions, vocab 50304, untied, logits capped at 30.
# Figures: the xLSTM-7B config.json (embedding_dim 4096, num_blocks 32, num_heads 8, vocab 50304, qk_dim_factor 0.5,
# v_dim_factor 1.0, ffn_proj_factor 2.667 rounded up to 64, gate_soft_cap 15, output_logit_soft_cap 30), as quoted
# in public notes on the checkpoint; see examples/README.md ³².
# Layout: 1 node(s) x 8 devices, TP=2 PP=2 (DP2; TP splits the 8 mLSTM heads, 4 per rank, and the MLP).
#   bash examples/xlstm/pretrain_xlstm_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xlstm/pretrain_xlstm_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/xlstm/pretrain_xlstm_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/xlstm-7b-mcore-tp2pp2 (ckpt_convert_xlstm_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/xlstm-7b}
DATA_PATH=${DATA_PATH:-./dataset/xlstm_text_document}    # data_convert_xlstm_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xLSTM-7b}

TP=${TP:-2} PP=${PP:-2}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=10944 NUM_HEADS=8 NUM_KV_HEADS=8 VOCAB_SIZE=50304
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-128} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    # every layer an mLSTM with its MLP; q/k and v head widths follow the hidden size (1/2 and 1 of it over 8 heads)
    MLSTM_FREQ="[1]*$NUM_LAYERS" QK_HEAD_DIM=$(( HIDDEN_SIZE / 2 / NUM_HEADS )) V_HEAD_DIM=$(( HIDDEN_SIZE / NUM_HEADS ))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --experimental-attention-variant mlstm --linear-attention-freq "$MLSTM_FREQ"
    --linear-num-key-heads "$NUM_HEADS" --linear-num-value-heads "$NUM_HEADS"
    --linear-key-head-dim "$QK_HEAD_DIM" --linear-value-head-dim "$V_HEAD_DIM" --linear-chunk-size 64
    --mlstm-gate-soft-cap 15 --mlstm-eps 1e-6 --output-logit-softcapping 30
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 4096 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

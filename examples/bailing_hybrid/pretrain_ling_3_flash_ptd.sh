#!/usr/bin/env bash
# Pretrain Ling-3.0-Flash (inclusionAI/Ling-3.0-Flash): 42 layers in groups of 6, Kimi Delta Attention in the first 5 of each and multi-latent attention in the 6th (layers 6, 12, ..., 42); hidden 2560; KDA 32 heads of 128 (key and value), a short conv of 4, full-rank forget and output gates, the forget gate bounded at -5 (kda_safe_gate); MLA 32 heads, kv_lora_rank 512, q from one projection, nope 128 / rope 64 (interleaved, base 6e6) / v 128, a sigmoid gate per head on its output; the first 2 layers a dense SwiGLU MLP of 6144, then MoE: 512 experts of 768, top-8 of the sigmoid scores with the selection bias from the best 4 of 8 groups, renormalised, times 2.5, one shared expert; RMSNorm 1e-6, vocab 157184, untied, 262144 positions.
# Figures: transformers' BailingHybridConfig defaults, documented for inclusionAI/Ling-3.0-Flash (hidden, layers,
# heads, the group of 6, MLA ranks and head dims, experts, groups, top-k, expert and dense widths, scaling factor, the
# bounded gate, rope base, eps, vocab, positions); the Hub file itself was not read here (examples/README.md ³³).
# Layout: 3 node(s) x 8 devices, TP=1 PP=3 EP=8 (DP8; 14 layers per stage, 64 experts per EP rank), alltoall,
# grouped GEMM, full recompute.
#   bash examples/bailing_hybrid/pretrain_ling_3_flash_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bailing_hybrid/pretrain_ling_3_flash_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/bailing_hybrid/pretrain_ling_3_flash_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-3}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/ling-3-flash-mcore-tp1pp3ep8 (ckpt_convert_ling_3_flash_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/ling-3-flash}
DATA_PATH=${DATA_PATH:-./dataset/ling_text_document}    # data_convert_ling_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ling-3.0-Flash}

TP=${TP:-1} PP=${PP:-3} EP=${EP:-8}
NUM_LAYERS=42 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=6144 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=157184
KV_LORA_RANK=512 QK_HEAD_DIM=128 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
MOE_FFN_HIDDEN_SIZE=768 FIRST_K_DENSE=2
# KDA (1) and MLA (0) per layer: MLA every 6th layer (layer_group_size 6)
LINEAR_ATTENTION_FREQ='[1,1,1,1,1,0]*7'
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # three KDA layers then one MLA layer
        LINEAR_ATTENTION_FREQ="[1,1,1,0]*$(( NUM_LAYERS / 4 ))+[1]*$(( NUM_LAYERS % 4 ))"
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --experimental-attention-variant kda --linear-attention-freq "$LINEAR_ATTENTION_FREQ"
    --linear-conv-kernel-dim 4 --linear-key-head-dim 128 --linear-value-head-dim 128
    --linear-num-key-heads "$NUM_HEADS" --linear-num-value-heads "$NUM_HEADS"
    --kda-full-rank-gates --kda-gate-lower-bound -5
    --multi-latent-attention --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --attention-output-gate --attention-output-gate-per-head
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144 --position-embedding-type rope
    --rotary-base 6000000 --rope-interleaved
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 512 --moe-router-topk 8 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-num-groups 8 --moe-router-group-topk 4 --moe-router-group-score-topk 2
    --moe-router-topk-scaling-factor 2.5
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain Kimi-Linear-48B-A3B (moonshotai/Kimi-Linear-48B-A3B-Instruct): 27 layers, Kimi Delta Attention in all but the 1-based layers 4, 8, 12, 16, 20, 24 and 27, which are multi-latent attention without positions (mla_use_nope); hidden 2304; KDA 32 heads of 128 (key and value), a short conv of 4, low-rank forget and output gates; MLA 32 heads, kv_lora_rank 512, q from one projection, nope 128 / rope 64 (unrotated) / v 128; the first layer a dense SwiGLU MLP of 9216, then MoE: 256 experts of 1024, top-8 of the sigmoid scores with the selection bias, renormalised, times 2.446, one shared expert; RMSNorm 1e-5, vocab 163840, untied, 1048576 positions.
# Figures: transformers' KimiLinearConfig defaults, documented for moonshotai/Kimi-Linear-48B-A3B-Instruct (hidden, layers,
# heads, MLA ranks and head dims, experts, top-k, expert and dense widths, scaling factor, eps, vocab, positions), the
# KDA sizes and full-attention layers as torchtitan's Kimi Linear model args give them (linear_attn_config: 32 heads
# of 128, conv 4, full_attn_layers [4, 8, 12, 16, 20, 24, 27]); the Hub file itself was not read here.
# The tokenizer is Moonshot's tiktoken tokenizer (tokenization_kimi.py, trust_remote_code): point TOKENIZER_PATH at a
# directory whose tokenizer loads with transformers' AutoTokenizer.
# Layout: 3 node(s) x 8 devices, TP=1 PP=3 EP=8 (DP8; 9 layers per stage, 32 experts per EP rank), alltoall,
# grouped GEMM, full recompute.
#   bash examples/kimi_linear/pretrain_kimi_linear_48b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/kimi_linear/pretrain_kimi_linear_48b_a3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/kimi_linear/pretrain_kimi_linear_48b_a3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-3}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/kimi-linear-48b-a3b-mcore-tp1pp3ep8 (ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/kimi-linear-48b-a3b}
DATA_PATH=${DATA_PATH:-./dataset/kimi_linear_text_document}    # data_convert_kimi_linear_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Kimi-Linear-48B-A3B-Instruct}

TP=${TP:-1} PP=${PP:-3} EP=${EP:-8}
NUM_LAYERS=27 HIDDEN_SIZE=2304 FFN_HIDDEN_SIZE=9216 NUM_HEADS=32 NUM_KV_HEADS=32 VOCAB_SIZE=163840
KV_LORA_RANK=512 QK_HEAD_DIM=128 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
MOE_FFN_HIDDEN_SIZE=1024 FIRST_K_DENSE=1
# KDA (1) and MLA (0) per layer: MLA at the 1-based layers 4, 8, ..., 24 and 27
LINEAR_ATTENTION_FREQ='[1,1,1,0]*6+[1,1,0]'
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # three KDA layers then one MLA layer, as every four layers of the real model
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
    --linear-num-key-heads 32 --linear-num-value-heads 32
    --multi-latent-attention --kv-lora-rank "$KV_LORA_RANK" --mla-latent-norm-epsilon 1e-6
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1048576 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 8 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 2.446
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

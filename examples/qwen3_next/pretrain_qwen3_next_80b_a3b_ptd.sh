#!/usr/bin/env bash
# Pretrain Qwen3-Next-80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct): 48 layers, every 4th gated softmax attention (full_attention_interval 4: 36 gated DeltaNet, 12 attention), all MoE, hidden 2048; attention 16 heads / 2 KV heads of 256, a sigmoid output gate, zero-centred per-head q/k RMSNorm, a quarter of each head rotated (partial_rotary_factor 0.25), rope theta 10000000; gated DeltaNet 16 key heads / 32 value heads of 128, conv 4; 512 experts of FFN 512, top-10 of the softmax over all experts, renormalised (norm_topk_prob), a shared expert of 512 gated by sigmoid, aux loss 0.001; zero-centred RMSNorm 1e-6, vocab 151936, untied, 262144 positions.
# Figures: transformers' Qwen3NextConfig defaults (documented for Qwen/Qwen3-Next-80B-A3B-Instruct: hidden, layers,
# heads, head dim, partial rotary, the DeltaNet sizes, experts, top-k, expert and shared-expert widths, norm_topk_prob,
# eps, vocab, untied, the layer pattern) and public copies of the model's config.json (rope theta 10000000, 262144
# positions, intermediate_size 5120 (unused: every layer is MoE), where the transformers defaults say 10000 / 32768
# / 5632); the Hub file itself was not read here (see examples/README.md).
# Layout: 4 node(s) x 8 devices, TP=1 PP=4 EP=8 (DP8; 12 layers per stage, 64 experts per EP rank), alltoall,
# grouped GEMM, full recompute.
#   bash examples/qwen3_next/pretrain_qwen3_next_80b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_next/pretrain_qwen3_next_80b_a3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen3_next/pretrain_qwen3_next_80b_a3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen3-next-80b-a3b-mcore-tp1pp4ep8 (ckpt_convert_qwen3_next_80b_a3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen3-next-80b-a3b}
DATA_PATH=${DATA_PATH:-./dataset/qwen3_next_text_document}    # data_convert_qwen3_next_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-Next-80B-A3B-Instruct}

TP=${TP:-1} PP=${PP:-4} EP=${EP:-8}
NUM_LAYERS=48 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=5120 NUM_HEADS=16 NUM_KV_HEADS=2 KV_CHANNELS=256 VOCAB_SIZE=151936
MOE_FFN_HIDDEN_SIZE=512
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # one attention layer per stage: --linear-attention-freq 4 makes every 4th layer attention
        NUM_LAYERS=$(( 4 * PP ))
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS" --qk-layernorm --attention-output-gate --apply-layernorm-1p
    --experimental-attention-variant gated_delta_net --linear-attention-freq 4
    --linear-conv-kernel-dim 4 --linear-key-head-dim 128 --linear-value-head-dim 128
    --linear-num-key-heads 16 --linear-num-value-heads 32
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 10000000 --rotary-percent 0.25
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 512 --moe-router-topk 10 --moe-router-pre-softmax --norm-topk-prob --moe-aux-loss-coeff 0.001
    --moe-shared-expert-intermediate-size 512 --shared-expert-gate
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

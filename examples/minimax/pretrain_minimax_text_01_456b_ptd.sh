#!/usr/bin/env bash
# Pretrain MiniMax-Text-01 (MiniMaxAI/MiniMax-Text-01, 456B total, 45.9B active): 80 layers, lightning attention in all but every eighth layer (1-based 8, 16, ..., 80), which is softmax attention; hidden 6144; 64 heads of 128 (lightning: the same heads, q/k/v by SiLU, fixed per-head decays, an all-heads RMSNorm and a sigmoid output gate; attention: 8 KV heads, RoPE over half the head, theta 10000000); every layer a Mixtral MoE: 32 experts of 9216, top-2 of the softmax, renormalised; post-norm weighed residuals (each add keeps the normed input times 3.5566); RMSNorm 1e-5, vocab 200064, untied.
# Figures: a public copy of the model's config.json (MiniMax-M1's, the same architecture: hidden, layers, heads, KV
# heads, head_dim, rotary_dim 64, rope theta, experts, top-k, intermediate size, the layernorm alpha/beta factors,
# postnorm, rms eps, vocab, attn_type_list) and transformers' MiniMaxConfig (block_size 256); the Hub file itself
# was not read here (see examples/README.md).
# Layout: 32 node(s) x 8 devices, TP=4 PP=8 EP=8 (DP8; 10 layers per stage, 4 experts per EP rank), sequence
# parallel, alltoall, grouped GEMM, full recompute.
#   bash examples/minimax/pretrain_minimax_text_01_456b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minimax/pretrain_minimax_text_01_456b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/minimax/pretrain_minimax_text_01_456b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-32}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/minimax-text-01-mcore-tp4pp8ep8 (ckpt_convert_minimax_text_01_456b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/minimax-text-01}
DATA_PATH=${DATA_PATH:-./dataset/minimax_text_document}    # data_convert_minimax_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-Text-01}

TP=${TP:-4} PP=${PP:-8} EP=${EP:-8}
NUM_LAYERS=80 HIDDEN_SIZE=6144 FFN_HIDDEN_SIZE=9216 NUM_HEADS=64 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=200064
# the lightning layers have the attention layers' 64 heads of 128 (their sizes follow NUM_HEADS and KV_CHANNELS
# under SMOKE=1); lightning attention (1) and softmax attention (0) per layer: softmax at every eighth layer
LINEAR_ATTENTION_FREQ='[1,1,1,1,1,1,1,0]*10'
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-512} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # three lightning layers then one softmax layer, as the real model's pattern shrunk
        LINEAR_ATTENTION_FREQ="[1,1,1,0]*$(( NUM_LAYERS / 4 ))+[1]*$(( NUM_LAYERS % 4 ))"
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" --sequence-parallel
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --experimental-attention-variant lightning --linear-attention-freq "$LINEAR_ATTENTION_FREQ"
    --linear-key-head-dim "$KV_CHANNELS" --linear-value-head-dim "$KV_CHANNELS"
    --linear-num-key-heads "$NUM_HEADS" --linear-num-value-heads "$NUM_HEADS" --linear-chunk-size 256
    --apply-residual-connection-post-layernorm --residual-alpha 3.5565588200778455
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 10240000
    --position-embedding-type rope --rotary-base 10000000 --rotary-percent 0.5
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 32 --moe-router-topk 2 --moe-ffn-hidden-size "$FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

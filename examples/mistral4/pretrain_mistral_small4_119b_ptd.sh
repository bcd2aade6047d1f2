#!/usr/bin/env bash
# Pretrain Mistral-Small-4-119B (mistralai/Mistral-Small-4-119B-2603 (text model) config.json; see examples/README.md): 36 layers, hidden 4096, 32 heads (MLA: q latent 1024, kv latent 256, q/k 64 + rope 64, v 128), vocab 131072, rope theta 10000 with YaRN (factor 128, original 8192, beta 32 / 1, mscale 1 / 1) over the rope dims, interleaved RoPE, Llama-4 query temperature 0.1 per 8192 positions, RMSNorm 1e-6, untied; every layer MoE: 128 experts of FFN 2048, top-4 (softmax over all experts, renormalised), 1 shared expert.
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (DP16; 8 experts per EP rank).
#   bash examples/mistral4/pretrain_mistral_small4_119b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral4/pretrain_mistral_small4_119b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/mistral4/pretrain_mistral_small4_119b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/mistral-small4-119b-mcore (ckpt_convert_mistral_small4_119b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mistral-small4-119b}
DATA_PATH=${DATA_PATH:-./dataset/mistral_small4_text_document}    # data_convert_mistral_small4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-Small-4-119B}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
NUM_LAYERS=36 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=12288 NUM_HEADS=32 VOCAB_SIZE=131072 NUM_KV_HEADS=32
Q_LORA_RANK=1024 KV_LORA_RANK=256 QK_HEAD_DIM=64 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
MOE_FFN_HIDDEN_SIZE=2048
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1048576
    --position-embedding-type rope
    --rotary-base 10000 --rope-interleaved
    --rope-scaling-type yarn --rope-scaling-factor 128 --original-max-position-embeddings 8192
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --rope-scaling-mscale 1 --rope-scaling-mscale-all-dim 1
    --attn-temperature-beta 0.1 --attn-temperature-length 8192
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 128 --moe-router-topk 4 --moe-router-pre-softmax --norm-topk-prob --n-shared-experts 1
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

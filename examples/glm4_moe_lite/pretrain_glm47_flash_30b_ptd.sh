#!/usr/bin/env bash
# Pretrain GLM-4.7-Flash (zai-org/GLM-4.7-Flash config.json; see examples/README.md): 47 layers, hidden 2048, dense FFN 10240 (first layer), 20 heads (MLA: q latent 768, kv latent 512, q/k 192 + rope 64, v 256), vocab 154880, rope theta 10000, interleaved RoPE, RMSNorm 1e-5 (the latent norms 1e-6), untied; 64 experts of FFN 1536, top-4 (sigmoid with the aux-loss-free expert bias, renormalised, times 1.8), 1 shared expert.
# Layout: 2 node(s) x 8 devices, TP=1 PP=1 EP=16 (DP16; 4 experts per EP rank).
#   bash examples/glm4_moe_lite/pretrain_glm47_flash_30b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm4_moe_lite/pretrain_glm47_flash_30b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/glm4_moe_lite/pretrain_glm47_flash_30b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/glm47-flash-30b-mcore (ckpt_convert_glm47_flash_30b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/glm47-flash-30b}
DATA_PATH=${DATA_PATH:-./dataset/glm47_flash_text_document}    # data_convert_glm47_flash_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.7-Flash}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-16}
NUM_LAYERS=47 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=10240 NUM_HEADS=20 VOCAB_SIZE=154880 NUM_KV_HEADS=20
KV_CHANNELS=102  # hidden / heads rounded down, as the converter writes it (MLA does not read it)
Q_LORA_RANK=768 KV_LORA_RANK=512 QK_HEAD_DIM=192 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=256
MOE_FFN_HIDDEN_SIZE=1536 FIRST_K_DENSE=1
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --kv-channels "$KV_CHANNELS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 202752
    --position-embedding-type rope
    --rotary-base 10000 --rope-interleaved
    --normalization RMSNorm --norm-epsilon 1e-5 --mla-latent-norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 64 --moe-router-topk 4 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 1.8
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

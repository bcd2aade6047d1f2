#!/usr/bin/env bash
# Pretrain DeepSeek-V2-Lite (deepseek-ai/DeepSeek-V2-Lite config.json; see examples/README.md): 27 layers, hidden 2048, dense FFN 10944 (first layer), 16 heads (MLA: no q latent, kv latent 512, q/k 128 + rope 64, v 128), vocab 102400, rope theta 10000 with YaRN (factor 40, original 4096, mscale 0.707 / 0.707), interleaved RoPE, RMSNorm 1e-6, untied; 64 experts of FFN 1408, top-6 (softmax over all experts, greedy), 2 shared experts, sequence aux loss 0.001.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (DP8; 8 experts per EP rank, as MindSpeed-LLM's deepseek2_lite 8-device recipe).
#   bash examples/deepseek2/pretrain_deepseek2_lite_16b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek2/pretrain_deepseek2_lite_16b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/deepseek2/pretrain_deepseek2_lite_16b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/deepseek2-lite-16b-mcore (ckpt_convert_deepseek2_lite_16b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/deepseek2-lite-16b}
DATA_PATH=${DATA_PATH:-./dataset/deepseek2_lite_text_document}    # data_convert_deepseek2_lite_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V2-Lite}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
NUM_LAYERS=27 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=10944 NUM_HEADS=16 VOCAB_SIZE=102400 NUM_KV_HEADS=16
KV_LORA_RANK=512 QK_HEAD_DIM=128 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
MOE_FFN_HIDDEN_SIZE=1408 FIRST_K_DENSE=1
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 163840
    --position-embedding-type rope
    --rotary-base 10000 --rope-interleaved
    --rope-scaling-type yarn --rope-scaling-factor 40 --original-max-position-embeddings 4096
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --rope-scaling-mscale 0.707 --rope-scaling-mscale-all-dim 0.707
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 64 --moe-router-topk 6 --moe-router-pre-softmax --n-shared-experts 2
    --moe-aux-loss-coeff 0.001 --moe-router-load-balancing-type seq_aux_loss
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

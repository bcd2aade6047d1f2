#!/usr/bin/env bash
# Pretrain GLM-4.5-Air (zai-org/GLM-4.5-Air config.json): 46 layers (the first dense), hidden 4096, dense FFN 10944, 96 heads / 8 KV heads of dim 128, vocab 151552, rope theta 1000000 on half of each head (partial_rotary_factor 0.5), RMSNorm 1e-5, q/k/v bias, untied embeddings; 128 experts of FFN 1408, top-8 by sigmoid score + expert bias (e_score_correction_bias), renormalised (norm_topk_prob), routed_scaling_factor 1.0, one shared expert of 1408, no group limit (n_group 1).
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (DP16; 8 experts per EP rank; MindSpeed-LLM's glm45-air recipe: TP1 PP4 EP16 on 128 devices).
#   bash examples/glm4_moe/pretrain_glm45_air_106b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm4_moe/pretrain_glm45_air_106b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/glm4_moe/pretrain_glm45_air_106b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/glm45-air-106b-mcore (ckpt_convert_glm45_air_106b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/glm45-air-106b}
DATA_PATH=${DATA_PATH:-./dataset/glm45_air_text_document}    # data_convert_glm45_air_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.5-Air}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
NUM_LAYERS=46 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=10944 NUM_HEADS=96 NUM_KV_HEADS=8 KV_CHANNELS=128 VOCAB_SIZE=151552
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 1000000
    --add-qkv-bias --rotary-percent 0.5
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 1408 --n-shared-experts 1 --first-k-dense-replace 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob --moe-aux-loss-coeff 0
ARGS

recipe_pretrain

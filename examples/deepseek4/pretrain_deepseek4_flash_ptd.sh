#!/usr/bin/env bash
# Pretrain DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash-Base config.json; see examples/README.md): compressed attention in 43 layers (2 sliding-window-only, then CSA and HCA alternating: entries of 4 overlapping tokens picked top-512 by a lightning indexer of 64 heads of 128, or of 128 tokens all kept; a window of 128), hidden 4096, 64 heads sharing one key/value head of 512 (q latent 1024, RoPE on its last 64 dims, interleaved), grouped output projection (8 groups of rank 1024), per-head attention sinks, 4 hyper-connection streams (20 Sinkhorn steps), vocab 129280, RoPE 10000 on the sliding layers and 160000 with YaRN (factor 16, original 65536) on the compressed ones, RMSNorm 1e-6, untied; 256 experts of FFN 2048, top-6 (sqrtsoftplus with the aux-loss-free expert bias, renormalised, times 1.5; the first 3 layers hash-routed by token id), 1 shared expert, SwiGLU clamped at 10, aux loss 0.001; one MTP module (over the hyper-connection streams, its layer sliding-window-only), its loss scaled by 0.1 (Megatron's default).
# Continued pretraining from a converted checkpoint (CKPT_LOAD_DIR); the CSA layers' indexers learn the KL loss to
# the attention over their compressed entries (coefficient 0.01, their inputs detached), logged as indexer loss.
# Layout: 16 node(s) x 8 devices, TP=4 PP=4 EP=32 ETP=1 (DP8; whole experts (--expert-tensor-parallel-size 1), 8 per rank; 43 layers as 11,11,11,10 per stage; hyper-connections send 4 x 4096 values per token between stages; long sequences: add CP, the compressed layers' own exchange, the MoE layers routing each CP rank's tokens).
#   bash examples/deepseek4/pretrain_deepseek4_flash_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek4/pretrain_deepseek4_flash_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/deepseek4/pretrain_deepseek4_flash_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-16}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/deepseek4-flash-mcore (ckpt_convert_deepseek4_flash_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/deepseek4-flash}
DATA_PATH=${DATA_PATH:-./dataset/deepseek4_text_document}    # data_convert_deepseek4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V4-Flash-Base}

TP=${TP:-4} PP=${PP:-4} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=11,11,11,10
NUM_LAYERS=43 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=2048 NUM_HEADS=64 NUM_KV_HEADS=1 VOCAB_SIZE=129280 KV_CHANNELS=512
Q_LORA_RANK=1024
COMPRESSED_PATTERN=SSCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHCHC HCA_RATIO=128 O_GROUPS=8 O_LORA_RANK=1024
SLIDING_WINDOW=128 MOE_FFN_HIDDEN_SIZE=2048 HASH_LAYERS=3
DSA_N_HEADS=64 DSA_HEAD_DIM=128 DSA_TOPK=512
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" --expert-tensor-parallel-size "$ETP" --num-layer-list "$NUM_LAYER_LIST"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups 1 --kv-channels "$KV_CHANNELS" --q-lora-rank "$Q_LORA_RANK"
    --compressed-attention-pattern "$COMPRESSED_PATTERN" --csa-compress-ratio 4 --hca-compress-ratio "$HCA_RATIO"
    --sliding-window "$SLIDING_WINDOW" --o-groups "$O_GROUPS" --o-lora-rank "$O_LORA_RANK"
    --dsa-indexer-n-heads "$DSA_N_HEADS" --dsa-indexer-head-dim "$DSA_HEAD_DIM" --dsa-indexer-topk "$DSA_TOPK"
    --dsa-indexer-loss-coeff 0.01
    --enable-mhc-connections --mhc-num-residual-streams 4 --mhc-sinkhorn-iterations 20 --mhc-eps 1e-6
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1048576
    --position-embedding-type rope --rotary-percent 0.125 --rope-interleaved
    --local-rotary-base 10000 --rotary-base 160000
    --rope-scaling-type yarn --rope-scaling-factor 16 --original-max-position-embeddings 65536
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --rope-scaling-mscale 1 --rope-scaling-mscale-all-dim 1
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --activation-func-clamp-value 10 --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 6 --n-shared-experts 1 --moe-hash-layers "$HASH_LAYERS"
    --moe-router-score-function sqrtsoftplus --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 1.5 --moe-aux-loss-coeff 0.001
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --mtp-num-layers 1
ARGS

recipe_pretrain

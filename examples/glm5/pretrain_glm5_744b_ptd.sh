#!/usr/bin/env bash
# Pretrain GLM-5 (zai-org/GLM-5, transformers' GlmMoeDsaConfig defaults; see examples/README.md): DeepSeek-V3.2's design: DeepSeek Sparse Attention with a lightning indexer of 32 heads of 128 on interleaved RoPE keeping each query's top-2048 keys (every layer computes its own top-k); 78 layers, hidden 6144, dense FFN 12288 (first 3 layers), 64 heads (MLA: q latent 2048, kv latent 512, q/k 192 + rope 64, v 256), vocab 154880, rope theta 10000 (unverified), interleaved RoPE, RMSNorm 1e-5 (latent and indexer norms 1e-6), untied; 256 experts of FFN 2048, top-8 (sigmoid with the aux-loss-free expert bias, one group, renormalised, times 2.5), 1 shared expert, sequence aux loss 0.001.
# Continued pretraining in V3.2's sparse stage (the indexer's KL loss over the selected keys, coefficient 0.01 as
# Megatron-core's DSA test; its inputs detached); add --dsa-dense-warmup (and drop --dsa-indexer-use-sparse-loss)
# for a dense warm-up of new indexers.
# Layout: 64 node(s) x 8 devices, TP=4 PP=8 EP=32 ETP=1 (DP16; whole experts (--expert-tensor-parallel-size 1), 8 per rank; 78 layers as 10,10,10,10,10,10,9,9 per stage, DeepSeek-V3.2's recipe layout).
#   bash examples/glm5/pretrain_glm5_744b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm5/pretrain_glm5_744b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/glm5/pretrain_glm5_744b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-64}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/glm5-744b-mcore (ckpt_convert_glm5_744b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/glm5-744b}
DATA_PATH=${DATA_PATH:-./dataset/glm5_text_document}    # data_convert_glm5_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-5}

TP=${TP:-4} PP=${PP:-8} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=10,10,10,10,10,10,9,9
NUM_LAYERS=78 HIDDEN_SIZE=6144 FFN_HIDDEN_SIZE=12288 NUM_HEADS=64 VOCAB_SIZE=154880 NUM_KV_HEADS=64
Q_LORA_RANK=2048 KV_LORA_RANK=512 QK_HEAD_DIM=192 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=256
MOE_FFN_HIDDEN_SIZE=2048 FIRST_K_DENSE=3
DSA_N_HEADS=32 DSA_HEAD_DIM=128 DSA_TOPK=2048
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" --expert-tensor-parallel-size "$ETP" --num-layer-list "$NUM_LAYER_LIST"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --experimental-attention-variant dsa --dsa-indexer-n-heads "$DSA_N_HEADS" --dsa-indexer-head-dim "$DSA_HEAD_DIM"
    --dsa-indexer-topk "$DSA_TOPK" --dsa-indexer-rope-interleaved --dsa-indexer-k-norm-epsilon 1e-6
    --dsa-indexer-loss-coeff 0.01 --dsa-indexer-use-sparse-loss
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 202752
    --position-embedding-type rope
    --rotary-base 10000 --rope-interleaved --mla-latent-norm-epsilon 1e-6
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 8 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-topk-scaling-factor 2.5
    --moe-aux-loss-coeff 0.001 --moe-router-load-balancing-type seq_aux_loss
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE"
ARGS

recipe_pretrain

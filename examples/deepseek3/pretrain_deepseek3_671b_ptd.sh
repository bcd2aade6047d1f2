#!/usr/bin/env bash
# Pretrain DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json; see examples/README.md): 61 layers, hidden 7168, dense FFN 18432 (first 3 layers), 128 heads (MLA: q latent 1536, kv latent 512, q/k 128 + rope 64, v 128), vocab 129280, rope theta 10000 with YaRN (factor 40, original 4096, mscale 1 / 1), interleaved RoPE, RMSNorm 1e-6, untied; 256 experts of FFN 2048, top-8 (sigmoid with the aux-loss-free expert bias, 8 groups of which 4 are kept, a group scored by its best two, renormalised, times 2.5), 1 shared expert, sequence aux loss 0.001. Its MTP layer (num_nextn_predict_layers 1, converted by ckpt_convert_deepseek3_671b_hf2mcore.sh) trains as --mtp-num-layers 1 (loss scale 0.1, Megatron's default).
# Layout: 64 node(s) x 8 devices, TP=4 PP=8 EP=32 ETP=1 (DP16; whole experts (--expert-tensor-parallel-size 1), 8 per rank; 61 layers as 8,8,8,8,8,7,7,7 per stage, as MindSpeed-LLM's deepseek3 recipe (TP4 PP8 EP32, 64 layers with 3 noop layers)).
#   bash examples/deepseek3/pretrain_deepseek3_671b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek3/pretrain_deepseek3_671b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/deepseek3/pretrain_deepseek3_671b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-64}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/deepseek3-671b-mcore (ckpt_convert_deepseek3_671b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/deepseek3-671b}
DATA_PATH=${DATA_PATH:-./dataset/deepseek3_text_document}    # data_convert_deepseek3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V3}

TP=${TP:-4} PP=${PP:-8} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=8,8,8,8,8,7,7,7
NUM_LAYERS=61 HIDDEN_SIZE=7168 FFN_HIDDEN_SIZE=18432 NUM_HEADS=128 VOCAB_SIZE=129280 NUM_KV_HEADS=128
Q_LORA_RANK=1536 KV_LORA_RANK=512 QK_HEAD_DIM=128 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
MOE_FFN_HIDDEN_SIZE=2048 FIRST_K_DENSE=3
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" --expert-tensor-parallel-size "$ETP" --num-layer-list "$NUM_LAYER_LIST"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 163840
    --position-embedding-type rope
    --rotary-base 10000 --rope-interleaved
    --rope-scaling-type yarn --rope-scaling-factor 40 --original-max-position-embeddings 4096
    --rope-scaling-beta-fast 32 --rope-scaling-beta-slow 1 --rope-scaling-mscale 1 --rope-scaling-mscale-all-dim 1
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 8 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --norm-topk-prob
    --moe-router-num-groups 8 --moe-router-group-topk 4 --moe-router-group-score-topk 2
    --moe-router-topk-scaling-factor 2.5
    --moe-aux-loss-coeff 0.001 --moe-router-load-balancing-type seq_aux_loss
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE" --first-k-dense-replace "$FIRST_K_DENSE" --mtp-num-layers 1
ARGS

recipe_pretrain

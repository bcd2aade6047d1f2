#!/usr/bin/env bash
# Pretrain Youtu-LLM-2B: (tencent/Youtu-LLM-2B config.json as quoted in two public copies; see examples/README.md) 32 layers, hidden 2048, FFN 6144, 16 heads (MLA: q latent 1536, kv latent 512, q/k 128 + rope 64, v 128), vocab 128256, rope theta 1600000 on interleaved pairs (rope_interleave), RMSNorm 1e-6, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 (DP8; dense).
#   bash examples/youtu/pretrain_youtu_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/youtu/pretrain_youtu_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/youtu/pretrain_youtu_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/youtu-llm-2b-mcore (ckpt_convert_youtu_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/youtu-llm-2b}
DATA_PATH=${DATA_PATH:-./dataset/youtu_text_document}    # data_convert_youtu_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Youtu-LLM-2B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=6144 NUM_HEADS=16 VOCAB_SIZE=128256 NUM_KV_HEADS=16
Q_LORA_RANK=1536 KV_LORA_RANK=512 QK_HEAD_DIM=128 QK_POS_EMB_HEAD_DIM=64 V_HEAD_DIM=128
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --multi-latent-attention ${Q_LORA_RANK:+--q-lora-rank "$Q_LORA_RANK"} --kv-lora-rank "$KV_LORA_RANK"
    --qk-head-dim "$QK_HEAD_DIM" --qk-pos-emb-head-dim "$QK_POS_EMB_HEAD_DIM" --v-head-dim "$V_HEAD_DIM"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 1600000 --rope-interleaved
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
ARGS

recipe_pretrain

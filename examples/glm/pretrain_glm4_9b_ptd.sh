#!/usr/bin/env bash
# Pretrain glm-4-9b-chat-hf (THUDM/glm-4-9b-chat-hf config.json; see examples/README.md): 40 layers, hidden 4096, FFN 13696, 32 heads / 2 KV heads, vocab 151552, rope theta 10000 on the first half of each head in interleaved pairs, RMSNorm 1.5625e-7, q/k/v bias only, fused gate_up_proj, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/glm/pretrain_glm4_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm/pretrain_glm4_9b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/glm/pretrain_glm4_9b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/glm4-9b-mcore (ckpt_convert_glm4_9b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/glm4-9b}
DATA_PATH=${DATA_PATH:-./dataset/glm4_text_document}    # data_convert_glm4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/glm-4-9b-chat-hf}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=40 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=13696 NUM_HEADS=32 NUM_KV_HEADS=2 VOCAB_SIZE=151552
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --rotary-percent 0.5 --rope-interleaved --add-qkv-bias
    --position-embedding-type rope --rotary-base 10000
    --normalization RMSNorm --norm-epsilon 1.5625e-7 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

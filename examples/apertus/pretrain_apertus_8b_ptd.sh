#!/usr/bin/env bash
# Pretrain Apertus-8B-2509 (swiss-ai/Apertus-8B-2509 config.json): 32 layers, hidden 4096, FFN 21504, 32 heads / 8 KV heads, vocab 131072, rope theta 12000000 with llama3 scaling (factor 8, original 8192), RMSNorm 1e-5, per-head q/k RMSNorm, non-gated xIELU MLP with learnable alphas per layer, no biases, untied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/apertus/pretrain_apertus_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/apertus/pretrain_apertus_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/apertus/pretrain_apertus_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/apertus-8b-mcore (ckpt_convert_apertus_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/apertus-8b}
DATA_PATH=${DATA_PATH:-./dataset/apertus_text_document}    # data_convert_apertus_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Apertus-8B-2509}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=21504 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=131072
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 65536
    --xielu --qk-layernorm
    --position-embedding-type rope --rotary-base 12000000
    --rope-scaling-type llama3 --rope-scaling-factor 8 --low-freq-factor 1 --high-freq-factor 4 --original-max-position-embeddings 8192
    --normalization RMSNorm --norm-epsilon 1e-5 --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

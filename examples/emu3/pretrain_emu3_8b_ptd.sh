#!/usr/bin/env bash
# Pretrain Emu3 text model (8B) (Emu3-community/Emu3-Chat-hf config.json; see examples/README.md): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 184622 (text and image tokens), rope theta 1e6, RMSNorm 1e-5, no biases, untied embeddings; the text-only Emu3ForCausalLM (model_type emu3_text_model).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/emu3/pretrain_emu3_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/emu3/pretrain_emu3_8b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/emu3/pretrain_emu3_8b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/emu3-8b-mcore (ckpt_convert_emu3_8b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/emu3-8b}
DATA_PATH=${DATA_PATH:-./dataset/emu3_text_document}    # data_convert_emu3_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Emu3-Chat-text}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=184622
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 9216
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

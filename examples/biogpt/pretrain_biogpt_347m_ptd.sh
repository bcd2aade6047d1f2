#!/usr/bin/env bash
# Pretrain BioGPT 347M (microsoft/biogpt config.json = transformers' BioGptConfig() defaults): 24 layers, hidden 1024, FFN 4096, 16 heads (MHA), vocab 42384, 1024 learned positions read at row position + 2, word embeddings times sqrt(1024), LayerNorm (eps 1e-5: transformers ignores layer_norm_eps 1e-12), GELU, biases on every linear, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/biogpt/pretrain_biogpt_347m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/biogpt/pretrain_biogpt_347m_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/biogpt/pretrain_biogpt_347m_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/biogpt-347m-mcore (ckpt_convert_biogpt_347m_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/biogpt-347m}
DATA_PATH=${DATA_PATH:-./dataset/biogpt_text_document}    # data_convert_biogpt_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/biogpt}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=1024 FFN_HIDDEN_SIZE=4096 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=42384
SEQ_LENGTH=${SEQ_LENGTH:-1024} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1024
    --position-embedding-type learned_absolute --position-embedding-offset 2 --input-embeds-norm
    --normalization LayerNorm --norm-epsilon 1e-5
ARGS

recipe_pretrain

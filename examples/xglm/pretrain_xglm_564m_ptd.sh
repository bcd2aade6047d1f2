#!/usr/bin/env bash
# Pretrain XGLM 564M (facebook/xglm-564M config.json = transformers' XGLMConfig() defaults): 24 layers, hidden 1024, FFN 4096, 16 heads (MHA), vocab 256008, fixed sinusoidal positions (fairseq layout, row position + 2), word embeddings times sqrt(1024), LayerNorm (eps 1e-5), GELU, biases on every linear, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/xglm/pretrain_xglm_564m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xglm/pretrain_xglm_564m_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/xglm/pretrain_xglm_564m_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/xglm-564m-mcore (ckpt_convert_xglm_564m_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/xglm-564m}
DATA_PATH=${DATA_PATH:-./dataset/xglm_text_document}    # data_convert_xglm_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xglm-564M}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=1024 FFN_HIDDEN_SIZE=4096 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=256008
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type sinusoidal --position-embedding-offset 2 --input-embeds-norm
    --normalization LayerNorm --norm-epsilon 1e-5
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain ettin-decoder-150m (jhu-clsp/ettin-decoder-150m: ModernBERT-base sizes, as transformers' ModernBertDecoderConfig() defaults): 22 layers, hidden 768, FFN 1152, 12 heads (MHA), vocab 50368, bias-free LayerNorms (eps 1e-5) on the embeddings, before attention (not in layer 0) and MLP, at the end and in the prediction head (dense + GELU + LayerNorm), gated GELU MLP, no linear biases, every 3rd layer (0, 3, ...) global with RoPE theta 160000, the others a causal window of 64 tokens (local_attention 128 / 2) with theta 10000, tied embeddings with a decoder bias.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/modernbert_decoder/pretrain_ettin_decoder_150m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/modernbert_decoder/pretrain_ettin_decoder_150m_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/modernbert_decoder/pretrain_ettin_decoder_150m_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/ettin-decoder-150m-mcore (ckpt_convert_ettin_decoder_150m_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/ettin-decoder-150m}
DATA_PATH=${DATA_PATH:-./dataset/ettin_decoder_text_document}    # data_convert_ettin_decoder_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ettin-decoder-150m}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=22 HIDDEN_SIZE=768 FFN_HIDDEN_SIZE=1152 NUM_HEADS=12 NUM_KV_HEADS=12 VOCAB_SIZE=50368
SLIDING_WINDOW=64
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-5 MIN_LR=1.0e-6

# Global layers: every 3rd from layer 0 (global_attn_every_n_layers 3), counted on the layers this run has
after_setup() {
    FULL_LAYERS=($(seq 0 3 $(( NUM_LAYERS - 1 ))))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_LAYERS[@]}"
    --position-embedding-type rope --rotary-base 160000 --local-rotary-base 10000
    --normalization LayerNorm --no-layernorm-bias --norm-epsilon 1e-5 --embed-layernorm --no-first-input-layernorm
    --geglu --disable-bias-linear --prediction-head gelu --add-output-layer-bias
ARGS

recipe_pretrain

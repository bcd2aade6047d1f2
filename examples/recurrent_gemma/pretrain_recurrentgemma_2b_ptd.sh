#!/usr/bin/env bash
# Pretrain RecurrentGemma-2B (google/recurrentgemma-2b, Griffin): 26 layers cycling recurrent, recurrent, local attention (18 recurrent blocks, 8 attention), hidden 2560; recurrent blocks: RG-LRU width 2560 in 10 gate blocks, conv 4, a GELU-gated branch; attention: 10 heads of 256, 1 KV head, a window of 2048, half of each head rotated (theta 10000), a bias on the output projection; GELU(tanh)-gated MLP of 7680 with biases; RMSNorm(1 + w) 1e-6, embeddings times sqrt(2560) in bf16 (50.5), logits capped at 30, vocab 256000, tied.
# Figures: a public verbatim copy of the model's config.json (see examples/README.md ³⁰): hidden 2560, intermediate_size
# 15360 (the MLP is half of it, transformers' RecurrentGemmaMlp: 7680, Griffin's mlp_expanded_width), 26 layers, 10
# heads of 256, 1 KV head, lru_width 2560, conv1d_width 4, attention_window_size 2048, logits_soft_cap 30,
# partial_rotary_factor 0.5, rope theta 10000, eps 1e-6, vocab 256000, _block_types (recurrent, recurrent,
# attention). transformers scales the embeddings by its bf16 normalizer buffer, sqrt(2560) = 50.596 rounded to 50.5.
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 (DP4; heads, gate blocks and the RG-LRU channels split over TP, the one
# KV head replicated).
#   bash examples/recurrent_gemma/pretrain_recurrentgemma_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/recurrent_gemma/pretrain_recurrentgemma_2b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/recurrent_gemma/pretrain_recurrentgemma_2b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/recurrentgemma-2b-mcore-tp2pp1 (ckpt_convert_recurrentgemma_2b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/recurrentgemma-2b}
DATA_PATH=${DATA_PATH:-./dataset/recurrentgemma_text_document}    # data_convert_recurrentgemma_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/recurrentgemma-2b}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=26 HIDDEN_SIZE=2560 FFN_HIDDEN_SIZE=7680 NUM_HEADS=10 NUM_KV_HEADS=1 VOCAB_SIZE=256000
SLIDING_WINDOW=2048
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    # the layers cycle recurrent, recurrent, attention (1, 1, 0) over however many there are
    BLOCK_MARKS=$(for (( i = 0; i < NUM_LAYERS; i++ )); do (( i % 3 == 2 )) && printf '0,' || printf '1,'; done)
    BLOCK_MARKS="[${BLOCK_MARKS%,}]"
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --experimental-attention-variant rg_lru --linear-attention-freq "$BLOCK_MARKS" --lru-conv-width 4
    --sliding-window "$SLIDING_WINDOW"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --position-embedding-type rope --rotary-base 10000 --rotary-percent 0.5
    --normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p
    --geglu --gelu-tanh --disable-bias-linear --add-dense-bias --add-mlp-bias
    --embedding-multiplier 50.5 --output-logit-softcapping 30
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain c4ai-command-r7b-12-2024 (CohereForAI/c4ai-command-r7b-12-2024 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers with interleaved RoPE theta 50000, every 4th layer full attention without RoPE, logits times 0.25, tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1.
#   bash examples/cohere2/pretrain_command_r7b_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere2/pretrain_command_r7b_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/cohere2/pretrain_command_r7b_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/command-r7b-7b-mcore (ckpt_convert_command_r7b_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/command-r7b-7b}
DATA_PATH=${DATA_PATH:-./dataset/command_r7b_text_document}    # data_convert_command_r7b_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r7b-12-2024}

TP=${TP:-8} PP=${PP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=256000
SLIDING_WINDOW=4096
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-6 MIN_LR=1.0e-7

# Full-attention layers (every 4th: 3, 7, ..., sliding_window_pattern 4) attend without RoPE; counted on the
# layers this run has
after_setup() {
    FULL_LAYERS=($(seq 3 4 $(( NUM_LAYERS - 1 ))))
    if (( ${#FULL_LAYERS[@]} == 0 )); then FULL_LAYERS=($(( NUM_LAYERS - 1 ))); fi    # SMOKE=1 (2 layers): the last one
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 132096
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_LAYERS[@]}" --no-rope-layers "${FULL_LAYERS[@]}"
    --position-embedding-type rope --rotary-base 50000 --rope-interleaved
    --normalization LayerNorm --no-layernorm-bias --norm-epsilon 1e-5
    --parallel-residual --parallel-residual-shared-norm
    --swiglu --disable-bias-linear --output-multiplier-scale 0.25
ARGS

recipe_pretrain

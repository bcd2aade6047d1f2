#!/usr/bin/env bash
# Pretrain the text model of Llama-4-Scout-17B-16E (meta-llama/Llama-4-Scout-17B-16E config.json, text_config): 48 layers, hidden 5120, dense FFN 16384 (unused: every layer is MoE), 40 heads / 8 KV heads of dim 128, vocab 202048, RMSNorm 1e-5, untied embeddings; RoPE theta 500000 on interleaved pairs with llama3 scaling (factor 8, low 1, high 4, original 8192); every 4th layer (3, 7, ..., 47) without RoPE and attending fully, its queries scaled by 1 + 0.1 ln(1 + floor((p + 1) / 8192)); the other layers attend within chunks of 8192 tokens with weightless q/k RMS norms; 16 experts of FFN 8192, top-1 with the sigmoid of the chosen logit scaling the expert input, plus one shared expert of FFN 8192.
# Layout: 8 node(s) x 8 devices, TP=4 PP=4 EP=4 (DP4; 4 experts per EP rank).
#   bash examples/llama4/pretrain_llama4_scout_17b_16e_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama4/pretrain_llama4_scout_17b_16e_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/llama4/pretrain_llama4_scout_17b_16e_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/llama4-scout-17b-16e-mcore (ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama4-scout-17b-16e}
DATA_PATH=${DATA_PATH:-./dataset/llama4_text_document}    # data_convert_llama4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-4-Scout-17B-16E}

TP=${TP:-4} PP=${PP:-4} EP=${EP:-4}
NUM_LAYERS=48 HIDDEN_SIZE=5120 FFN_HIDDEN_SIZE=16384 NUM_HEADS=40 NUM_KV_HEADS=8 VOCAB_SIZE=202048
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# NoPE layers: every 4th (no_rope_layer_interval 4), i.e. 3, 7, ..., counted on the layers this run has; they
# attend fully, the others in chunks
after_setup() {
    NO_ROPE_LAYERS=($(seq 3 4 $(( NUM_LAYERS - 1 ))))
    if (( ${#NO_ROPE_LAYERS[@]} == 0 )); then NO_ROPE_LAYERS=($(( NUM_LAYERS - 1 ))); fi    # SMOKE=1 (2 layers): the last one
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 500000 --rope-interleaved
    --rope-scaling-type llama3 --rope-scaling-factor 8 --low-freq-factor 1 --high-freq-factor 4
    --original-max-position-embeddings 8192
    --no-rope-layers "${NO_ROPE_LAYERS[@]}" --full-attention-layers "${NO_ROPE_LAYERS[@]}"
    --attention-chunk-size 8192 --qk-l2-norm
    --attn-temperature-beta 0.1 --attn-temperature-length 8192 --attn-temperature-nope-layers
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 16 --moe-router-topk 1 --moe-ffn-hidden-size 8192 --n-shared-experts 1
    --moe-router-score-function sigmoid --moe-apply-probs-on-input
ARGS

recipe_pretrain

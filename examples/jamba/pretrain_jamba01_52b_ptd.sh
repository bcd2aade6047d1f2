#!/usr/bin/env bash
# Pretrain Jamba-v0.1 (ai21labs/Jamba-v0.1, 52B parameters, 12B active): 32 HF layers, each a mixer then an MLP (our 64 pattern letters): Mamba1 in 28, attention without positions every 8th layer from layer 4 (4, 12, 20, 28; 32 heads / 8 KV heads of 128), a mixture of 16 experts every 2nd layer from layer 1 (top 2 of the softmax over all experts, not renormalised, aux loss 0.001) and a dense SwiGLU MLP in the others, every FFN 14336; hidden 4096; Mamba1 d_inner 8192 (expand 2), state 16, conv 4 with bias, dt rank 256, dt/B/C RMS-normed with weights (eps 1e-6); no linear biases; RMSNorm 1e-6, vocab 65536, untied embeddings, 262144 positions.
# Figures: transformers' JambaConfig defaults (documented for ai21labs/Jamba-v0.1: every size, the periods and
# offsets, the experts and top-k, the Mamba sizes, dt rank auto = 4096 / 16 = 256, eps, untied, positions) and two
# public trimmed copies of the model's config.json that agree with them (sizes, periods, experts, Mamba state,
# conv and expand, vocab, positions, untied); AI21-Jamba-1.5-Mini's config.json (a public verbatim copy) has the
# same architecture, dt rank 256, conv bias and aux loss 0.001 included. The Hub file itself was not read here.
# Layout: 4 node(s) x 8 devices, TP=1 PP=4 EP=8 (DP8; 16 pattern letters, 8 HF layers, one attention layer per stage, 2 experts per EP rank), alltoall, grouped GEMM, full recompute.
#   bash examples/jamba/pretrain_jamba01_52b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/jamba/pretrain_jamba01_52b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/jamba/pretrain_jamba01_52b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/jamba01-52b-mcore-tp1pp4ep8 (ckpt_convert_jamba01_52b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/jamba01-52b}
DATA_PATH=${DATA_PATH:-./dataset/jamba_text_document}    # data_convert_jamba_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jamba-v0.1}

TP=${TP:-1} PP=${PP:-4} EP=${EP:-8}
NUM_LAYERS=64 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=65536
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}
# two letters per HF layer j: its mixer (* attention where j % 8 == 4, else M Mamba1), then its FFN (E the MoE where
# j % 2 == 1, else - the dense MLP)
HYBRID_PATTERN="M-MEM-ME*-MEM-MEM-MEM-ME*-MEM-MEM-MEM-ME*-MEM-MEM-MEM-ME*-MEM-ME"

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        HYBRID_PATTERN=$(printf 'M-*E%.0s' $(seq "$PP")) NUM_LAYERS=$(( 4 * PP ))    # every kind in every stage
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 1
    --mamba-state-dim 16 --mamba-expand 2 --mamba-d-conv 4
    --mamba-dt-rank 256    # config.json's mamba_dt_rank; kept as is under SMOKE=1
    --mamba-mixer-rms-eps 1e-6 --mamba-mixer-rms-weights    # Jamba's weighted norms on dt, B and C (eps = rms_norm_eps)
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144 --position-embedding-type none
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 16 --moe-router-topk 2 --moe-router-pre-softmax --moe-aux-loss-coeff 0.001
    --moe-ffn-hidden-size "$FFN_HIDDEN_SIZE"    # the experts' width is the dense MLP's (intermediate_size)
ARGS

recipe_pretrain

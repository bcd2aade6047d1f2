#!/usr/bin/env bash
# Pretrain Phi-3.5-MoE-instruct: 32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 32064, rope theta 10000 (the published LongRoPE scaling is not supported yet), LayerNorm with bias (eps 1e-5), untied; q/k/v and output biases, lm_head bias; 16 experts of FFN 6400, SparseMixer top-2 routing (eps 0.01).
# Layout: 2 node(s) x 8 devices, TP=4 PP=4 EP=1 (DP1; MindSpeed-LLM's phi35 MoE recipe: TP4 PP4 EP1 allgather).
#   bash examples/phimoe/pretrain_phi35_moe_42b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phimoe/pretrain_phi35_moe_42b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/phimoe/pretrain_phi35_moe_42b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/phi-3.5-moe-instruct-mcore-tp8pp1 (ckpt_convert_phi35_moe_42b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/phi35_moe-42b}
DATA_PATH=${DATA_PATH:-./dataset/phi35_moe_text_document}    # data_convert_phi35_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3.5-MoE-instruct}

TP=${TP:-4} PP=${PP:-4} EP=${EP:-1}
NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=6400 NUM_HEADS=32 NUM_KV_HEADS=8 VOCAB_SIZE=32064
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type allgather --moe-grouped-gemm --sequence-parallel
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 131072
    --position-embedding-type rope --rotary-base 10000
    --normalization LayerNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear --add-qkv-bias --add-dense-bias --add-output-layer-bias
    --untie-embeddings-and-output-weights
    --num-experts 16 --moe-router-topk 2 --moe-router-score-function sparsemixer --moe-router-sparsemixer-eps 0.01 --moe-aux-loss-coeff 0.001
ARGS

recipe_pretrain

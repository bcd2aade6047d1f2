#!/usr/bin/env bash
# Pretrain c4ai-command-r-v01 (CohereForAI/c4ai-command-r-v01 config.json): 40 layers, hidden 8192, FFN 22528, 64 heads (MHA), vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, interleaved RoPE theta 8000000, logits times 0.0625, no q/k norms (use_qk_norm false), tied embeddings.
# Layout: 2 node(s) x 8 devices, TP=8 PP=2.
#   bash examples/cohere/pretrain_command_r_35b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere/pretrain_command_r_35b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/cohere/pretrain_command_r_35b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/command-r-35b-mcore (ckpt_convert_command_r_35b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/command-r-35b}
DATA_PATH=${DATA_PATH:-./dataset/command_r_text_document}    # data_convert_command_r_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r-v01}

TP=${TP:-8} PP=${PP:-2}
NUM_LAYERS=40 HIDDEN_SIZE=8192 FFN_HIDDEN_SIZE=22528 NUM_HEADS=64 NUM_KV_HEADS=64 VOCAB_SIZE=256000
SEQ_LENGTH=${SEQ_LENGTH:-8192} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
LR=1.0e-6 MIN_LR=1.0e-7

arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 8192
    --position-embedding-type rope --rotary-base 8000000 --rope-interleaved
    --normalization LayerNorm --no-layernorm-bias --norm-epsilon 1e-5
    --parallel-residual --parallel-residual-shared-norm
    --swiglu --disable-bias-linear --output-multiplier-scale 0.0625
ARGS

recipe_pretrain

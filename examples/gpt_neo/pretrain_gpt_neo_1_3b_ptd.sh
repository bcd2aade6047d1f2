#!/usr/bin/env bash
# Pretrain GPT-Neo 1.3B (EleutherAI/gpt-neo-1.3B config.json = transformers' GPTNeoConfig() defaults): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50257, 2048 learned positions, layers alternating global / local (window 256) attention, no attention scaling, q/k/v without bias, out_proj and MLP with bias, LayerNorm (eps 1e-5), GELU (tanh: gelu_new), tied embeddings.
# Layout: 1 node(s) x 8 devices, TP=1 PP=1.
#   bash examples/gpt_neo/pretrain_gpt_neo_1_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neo/pretrain_gpt_neo_1_3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/gpt_neo/pretrain_gpt_neo_1_3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/gpt-neo-1_3b-mcore (ckpt_convert_gpt_neo_1_3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gpt-neo-1_3b}
DATA_PATH=${DATA_PATH:-./dataset/gpt_neo_text_document}    # data_convert_gpt_neo_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neo-1.3B}

TP=${TP:-1} PP=${PP:-1}
NUM_LAYERS=24 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_HEADS=16 NUM_KV_HEADS=16 VOCAB_SIZE=50257 SLIDING_WINDOW=256
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# global (full) attention on even layers 0, 2, ..., local (window 256) on odd ones, counted on the
# layers this run has (attention_types [[["global", "local"], 12]])
after_setup() {
    FULL_ATTENTION_LAYERS=($(seq 0 2 $(( NUM_LAYERS - 1 ))))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 2048
    --position-embedding-type learned_absolute
    --sliding-window "$SLIDING_WINDOW" --full-attention-layers "${FULL_ATTENTION_LAYERS[@]}"
    --softmax-scale 1.0 --disable-bias-linear --add-dense-bias --add-mlp-bias
    --normalization LayerNorm --norm-epsilon 1e-5 --gelu-tanh
ARGS

recipe_pretrain

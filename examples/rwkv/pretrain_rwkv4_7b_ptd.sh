#!/usr/bin/env bash
# Pretrain RWKV-4-Pile-7B (RWKV/rwkv-4-7b-pile): 32 blocks, each time mixing (token shift, the WKV recurrence with a learned decay and bonus per channel, 4096 wide) then channel mixing (token shift, squared ReLU of 16384, a sigmoid receptance): our 64 pattern letters WC; hidden 4096, LayerNorm 1e-5 with biases and one on the embeddings, no positions, vocab 50277, untied, 1024-token context.
# Figures: transformers' RwkvConfig defaults, which are RWKV-4-Pile-7B's sizes (hidden 4096, 32 layers, vocab 50277,
# context 1024; attention_hidden_size and intermediate_size unset: hidden and 4 x hidden); the Hub file itself was
# not read here (see examples/README.md ³¹).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 (DP4; the time and channel mixings' projections split over TP, every
# rank mixing the whole hidden state for the token shift).
#   bash examples/rwkv/pretrain_rwkv4_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/rwkv/pretrain_rwkv4_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/rwkv/pretrain_rwkv4_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/rwkv4-7b-mcore-tp2pp1 (ckpt_convert_rwkv4_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/rwkv4-7b}
DATA_PATH=${DATA_PATH:-./dataset/rwkv4_text_document}    # data_convert_rwkv4_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/rwkv-4-7b-pile}

TP=${TP:-2} PP=${PP:-1}
NUM_LAYERS=64 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=16384 NUM_HEADS=1 NUM_KV_HEADS=1 VOCAB_SIZE=50277
SEQ_LENGTH=${SEQ_LENGTH:-1024} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    # two letters per HF block: time mixing (W), then channel mixing (C)
    HYBRID_PATTERN=$(printf 'WC%.0s' $(seq $(( NUM_LAYERS / 2 ))))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --hybrid-override-pattern "$HYBRID_PATTERN"
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 1024 --position-embedding-type none
    --normalization LayerNorm --norm-epsilon 1e-5 --embed-layernorm --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

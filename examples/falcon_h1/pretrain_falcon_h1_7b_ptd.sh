#!/usr/bin/env bash
# Pretrain Falcon-H1-7B (tiiuae/Falcon-H1-7B-Base): 44 HF layers, each a Mamba2 and an attention side by side on one norm, then a SwiGLU MLP (our 88 pattern letters H-); hidden 3072, MLP 12288; attention 12 heads / 2 KV heads of 128, rope theta 1e11; Mamba2 24 heads of 128 (mamba_d_ssm 3072), 1 B/C group, state 256, conv 4 with bias, SSD chunk 256, gated RMSNorm (gate then norm); muP scales on the embeddings, logits, keys, both mixers and the MLP; no linear biases; RMSNorm 1e-5, vocab 130049, untied embeddings, 262144 positions.
# Figures: not read from the Hub file itself (see examples/README.md ²⁸). Sizes, heads, Mamba sizes, the gated norm,
# vocabulary, context and every muP scale are Megatron-Bridge's FalconH1ModelProvider7B ("from config.json" of
# tiiuae/Falcon-H1-7B-Instruct), which agree with the size table of transformers' Falcon-H1 documentation; the norm
# placement (gate then norm) is that provider's default. key_multiplier 0.030690398488999456 is passed as the softmax
# scale it amounts to: 0.030690398488999456 / sqrt(128).
# Layout: 1 node(s) x 8 devices, TP=4 PP=1 (DP2; attention heads and Mamba heads split over TP, the 2 KV heads and
# the one B/C group replicated where TP exceeds them).
#   bash examples/falcon_h1/pretrain_falcon_h1_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon_h1/pretrain_falcon_h1_7b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/falcon_h1/pretrain_falcon_h1_7b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/falcon-h1-7b-mcore-tp4pp1 (ckpt_convert_falcon_h1_7b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/falcon-h1-7b}
DATA_PATH=${DATA_PATH:-./dataset/falcon_h1_text_document}    # data_convert_falcon_h1_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Falcon-H1-7B-Base}

TP=${TP:-4} PP=${PP:-1}
NUM_LAYERS=88 HIDDEN_SIZE=3072 FFN_HIDDEN_SIZE=12288 NUM_HEADS=12 NUM_KV_HEADS=2 KV_CHANNELS=128 VOCAB_SIZE=130049
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    # two letters per HF layer: Mamba2 beside attention (H), then the MLP (-)
    HYBRID_PATTERN=$(printf 'H-%.0s' $(seq $(( NUM_LAYERS / 2 ))))
}
arg_group MODEL_ARGS <<'ARGS'
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS" --kv-channels "$KV_CHANNELS"
    --hybrid-override-pattern "$HYBRID_PATTERN" --mamba-version 2
    --mamba-num-heads 24 --mamba-head-dim 128 --mamba-num-groups 1 --mamba-state-dim 256 --mamba-d-conv 4
    --mamba-chunk-size 256
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 100000000000
    --normalization RMSNorm --norm-epsilon 1e-5 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --embedding-multiplier 5.656854249492381 --output-multiplier-scale 0.013020833333333334
    --softmax-scale 0.002712673611111111 --attention-out-multiplier 0.10416666666666667
    --ssm-in-multiplier 0.4166666666666667 --ssm-out-multiplier 0.11785113019775793
    --ssm-multipliers 0.3535533905932738 0.25 0.1767766952966369 0.5 0.3535533905932738
    --mlp-multipliers 0.2946278254943948 0.032552083333333336
ARGS

recipe_pretrain

#!/usr/bin/env bash
# Pretrain Qwen3.5-27B (Qwen/Qwen3.5-27B, its text model): 64 layers, every 4th gated softmax attention (full_attention_interval 4: 48 gated DeltaNet, 16 attention), all with a dense SwiGLU MLP of 17408, hidden 5120; attention 24 heads / 4 KV heads of 256, a sigmoid output gate, zero-centred per-head q/k RMSNorm, a quarter of each head rotated (partial_rotary_factor 0.25; the interleaved multimodal sections [11, 11, 10] see one position for text), rope theta 10000000; gated DeltaNet 16 key heads / 48 value heads of 128, conv 4; zero-centred RMSNorm 1e-6, vocab 248320, untied, 262144 positions.
# Figures: public copies of the model's text_config (a Qwen3_5Config built with the 27B text_config: every field
# above, the layer pattern, mrope_section and mtp_num_hidden_layers included; two more public copies agree on the
# sizes, heads and DeltaNet heads) and slime's qwen3.5-27B Megatron flags (the same sizes, heads, theta, rotary
# fraction, eps, untied, vocab); transformers' Qwen3_5TextConfig defaults are another size (hidden 4096, 32
# layers). The Hub file itself was not read here (see examples/README.md).
# The published Qwen/Qwen3.5-27B directory is the multimodal Qwen3_5ForConditionalGeneration (these fields under
# config.json's text_config; the text tensors under model.language_model.*, beside model.visual.* and the MTP
# layer's mtp.*). The converter reads it as it is: text_config and the model.language_model.* tensors as the text
# model (qwen3_5_text), the vision tower and the MTP layer left out with a note (transformers' text model does not
# load them either); a text-only Qwen3_5ForCausalLM directory converts too. The multi-token-prediction layer
# (mtp_num_hidden_layers 1) is not converted or trained; mcore2hf writes the text model.
# Layout: 2 node(s) x 8 devices, TP=4 PP=2 (DP2; 32 layers per stage; heads, KV heads and DeltaNet heads split over
# TP), full recompute.
#   bash examples/qwen3_5_text/pretrain_qwen35_27b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_5_text/pretrain_qwen35_27b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen3_5_text/pretrain_qwen35_27b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen35-27b-mcore-tp4pp2 (ckpt_convert_qwen35_27b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen35-27b}
DATA_PATH=${DATA_PATH:-./dataset/qwen35_text_document}    # data_convert_qwen35_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-27B}

TP=${TP:-4} PP=${PP:-2}
NUM_LAYERS=64 HIDDEN_SIZE=5120 FFN_HIDDEN_SIZE=17408 NUM_HEADS=24 NUM_KV_HEADS=4 KV_CHANNELS=256 VOCAB_SIZE=248320
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # one attention layer per stage: --linear-attention-freq 4 makes every 4th layer attention
        NUM_LAYERS=$(( 4 * PP ))
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS" --qk-layernorm --attention-output-gate --apply-layernorm-1p
    --experimental-attention-variant gated_delta_net --linear-attention-freq 4
    --linear-conv-kernel-dim 4 --linear-key-head-dim 128 --linear-value-head-dim 128
    --linear-num-key-heads 16 --linear-num-value-heads 48
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 10000000 --rotary-percent 0.25
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
ARGS

recipe_pretrain

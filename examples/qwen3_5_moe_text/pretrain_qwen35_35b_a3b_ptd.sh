#!/usr/bin/env bash
# Pretrain Qwen3.5-35B-A3B (Qwen/Qwen3.5-35B-A3B, its text model): 40 layers, every 4th gated softmax attention (full_attention_interval 4: 30 gated DeltaNet, 10 attention), all MoE, hidden 2048; attention 16 heads / 2 KV heads of 256, a sigmoid output gate, zero-centred per-head q/k RMSNorm, a quarter of each head rotated (partial_rotary_factor 0.25; the interleaved multimodal sections [11, 11, 10] see one position for text), rope theta 10000000; gated DeltaNet 16 key heads / 32 value heads of 128, conv 4; 256 experts of FFN 512, top-8 of the softmax over all experts, always renormalised, a shared expert of 512 gated by sigmoid, aux loss 0.001; zero-centred RMSNorm 1e-6, vocab 248320, untied, 262144 positions.
# Figures: a public copy of the model's text_config saved as a text-only config.json (every field above: sizes,
# the 40 layer_types, heads, DeltaNet heads, experts, top-k, expert and shared-expert widths, aux loss, eps, theta,
# rotary fraction and sections, positions, vocab; tie_word_embeddings absent there: Qwen3_5MoeTextConfig's default,
# untied), which an inventory of the Hub snapshot and slime's qwen3.5-35B-A3B Megatron flags agree with. The Hub
# file itself was not read here (see examples/README.md).
# The published Qwen/Qwen3.5-35B-A3B directory is the multimodal Qwen3_5MoeForConditionalGeneration (these fields
# under config.json's text_config; the text tensors under model.language_model.*, beside model.visual.* and the MTP
# layer's mtp.*). The converter reads it as it is: text_config and the model.language_model.* tensors as the text
# model (qwen3_5_moe_text), the vision tower and the MTP layer left out with a note
# (transformers' text model does not load them either); a text-only Qwen3_5MoeForCausalLM directory converts too.
# The multi-token-prediction layer (mtp_num_hidden_layers 1) is not converted or trained; mcore2hf writes the text
# model.
# Layout: 2 node(s) x 8 devices, TP=1 PP=2 EP=8 (DP8; 20 layers per stage, 32 experts per EP rank), alltoall, grouped GEMM, full recompute.
#   bash examples/qwen3_5_moe_text/pretrain_qwen35_35b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_5_moe_text/pretrain_qwen35_35b_a3b_ptd.sh     # seconds on the CPU, same behaviour flags
#   DRY_RUN=1 bash examples/qwen3_5_moe_text/pretrain_qwen35_35b_a3b_ptd.sh   # print the command and validate its flags only
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-}    # e.g. ./model_weights/qwen35-35b-a3b-mcore-tp1pp2ep8 (ckpt_convert_qwen35_35b_a3b_hf2mcore.sh)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen35-35b-a3b}
DATA_PATH=${DATA_PATH:-./dataset/qwen35_moe_text_document}    # data_convert_qwen35_moe_pretrain.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-35B-A3B}

TP=${TP:-1} PP=${PP:-2} EP=${EP:-8}
# FFN_HIDDEN_SIZE: no dense layer; the registry sets it to the experts' width, as config.json has no intermediate_size
NUM_LAYERS=40 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=512 NUM_HEADS=16 NUM_KV_HEADS=2 KV_CHANNELS=256 VOCAB_SIZE=248320
MOE_FFN_HIDDEN_SIZE=512
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-256} TRAIN_ITERS=${TRAIN_ITERS:-2000}

after_setup() {
    if [[ $SMOKE == 1 ]]; then
        # one attention layer per stage: --linear-attention-freq 4 makes every 4th layer attention
        NUM_LAYERS=$(( 4 * PP ))
    fi
}
arg_group MODEL_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
    --moe-token-dispatcher-type alltoall --moe-grouped-gemm --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --num-layers "$NUM_LAYERS" --hidden-size "$HIDDEN_SIZE" --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_HEADS" --group-query-attention --num-query-groups "$NUM_KV_HEADS"
    --kv-channels "$KV_CHANNELS" --qk-layernorm --attention-output-gate --apply-layernorm-1p
    --experimental-attention-variant gated_delta_net --linear-attention-freq 4
    --linear-conv-kernel-dim 4 --linear-key-head-dim 128 --linear-value-head-dim 128
    --linear-num-key-heads 16 --linear-num-value-heads 32
    --seq-length "$SEQ_LENGTH" --max-position-embeddings 262144
    --position-embedding-type rope --rotary-base 10000000 --rotary-percent 0.25
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --num-experts 256 --moe-router-topk 8 --moe-router-pre-softmax --norm-topk-prob --moe-aux-loss-coeff 0.001
    --moe-shared-expert-intermediate-size 512 --shared-expert-gate
    --moe-ffn-hidden-size "$MOE_FFN_HIDDEN_SIZE"
ARGS

recipe_pretrain

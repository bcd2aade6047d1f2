#!/usr/bin/env bash
# Direct preference optimisation (DPO) of Gemma-2-9B (42 layers, hidden 3584, 16 heads / 8 KV heads of dim 256, vocab 256000, logit softcapping, sliding window on alternate layers) on a preference set, from its supervised fine-tune.
# posttrain_gpt.py --stage dpo takes every architecture flag from the checkpoint of tune_gemma2_9b_full_ptd.sh (--use-checkpoint-args
# --finetune: the weights only, iteration 0). The reference model is a frozen copy of that initial policy (REF_MODEL=DIR:
# another checkpoint of ours; PRECOMPUTE_REF=1: its log-probs computed once and the copy dropped). Sigmoid loss, beta 0.1;
# logged beside lm loss: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of the SFT checkpoint; each pair's replies padded to SEQ_LENGTH).
#   bash examples/gemma2/dpo_gemma2_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma2/dpo_gemma2_9b_ptd.sh     # seconds on the CPU: a tiny random gemma2 model with the same behaviour flags, tiny preference pairs
#   DRY_RUN=1 bash examples/gemma2/dpo_gemma2_9b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gemma2-sft}    # tune_gemma2_9b_full_ptd.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gemma2-dpo}
DATA_PATH=${DATA_PATH:-./finetune_dataset/gemma2/pairwise}    # data_convert_gemma2_pairwise.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-2-9b}
PROMPT_TYPE=${PROMPT_TYPE:-alpaca}    # the template of data_convert_gemma2_pairwise.sh
REF_MODEL=${REF_MODEL:-}    # empty: the initial policy (a frozen copy) is the reference
PRECOMPUTE_REF=${PRECOMPUTE_REF:-0}

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-1000}
SAVE_INTERVAL=500 EVAL_INTERVAL=500 EVAL_ITERS=0
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes; a pairwise dataset
posttrain_setup gemma2 '{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}' pairwise
REF_ARGS=()
if [[ -n $REF_MODEL ]]; then REF_ARGS+=(--ref-model "$REF_MODEL"); fi
if [[ $PRECOMPUTE_REF == 1 ]]; then REF_ARGS+=(--precompute-ref-log-probs); fi

GPT_ARGS=(
    --use-checkpoint-args
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP" --sequence-parallel
    --seq-length "$SEQ_LENGTH" --attention-dropout 0 --hidden-dropout 0
    --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
    --lr 5e-7 --min-lr 5e-8 --lr-decay-style cosine --lr-warmup-fraction 0.1
    --weight-decay 0 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    --use-distributed-optimizer "${PRECISION[@]}"
)
DATA_ARGS=(
    --data-path "$DATA_PATH"
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
)
TUNE_ARGS=(
    --finetune --stage dpo --is-pairwise-dataset --prompt-type "$PROMPT_TYPE"
    --dpo-loss-type sigmoid --dpo-beta 0.1 "${REF_ARGS[@]}"
)
OUTPUT_ARGS=(
    --log-interval 1 --save-interval "$SAVE_INTERVAL" --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS"
    --load "$CKPT_LOAD_DIR" --save "$CKPT_SAVE_DIR"
)

run_posttrain

#!/usr/bin/env bash
# LoRA supervised fine-tuning of Qwen3-8B (36 layers, hidden 4096, 32 heads / 8 KV heads of dim 128, vocab 151936, QK-norm) on an instruction set.
# posttrain_gpt.py --stage sft takes every architecture flag from the converted checkpoint (--use-checkpoint-args
# --finetune: the weights only, iteration 0); trained: the assistant tokens; each micro-batch padded only to its
# longest sample (--no-pad-to-seq-lengths).
# LoRA adapters (r 16, alpha 32) on linear_qkv linear_proj linear_fc1 linear_fc2, the base frozen; --save holds the
# adapters only (resume: LORA_LOAD=CKPT_SAVE_DIR; PEFT export: tools/convert_ckpt.py --lora-load DIR --save-lora-to-hf).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of ckpt_convert_qwen3_8b_hf2mcore.sh).
#   bash examples/qwen3/tune_qwen3_8b_lora_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3/tune_qwen3_8b_lora_ptd.sh     # seconds on the CPU: a tiny random qwen3 model with the same behaviour flags
#   DRY_RUN=1 bash examples/qwen3/tune_qwen3_8b_lora_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-8b-mcore-tp8pp1}    # ckpt_convert_qwen3_8b_hf2mcore.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen3-sft-lora}
LORA_LOAD=${LORA_LOAD:-}    # to resume: the adapters this recipe saved (CKPT_SAVE_DIR)
DATA_PATH=${DATA_PATH:-./finetune_dataset/qwen3/alpaca}    # data_convert_qwen3_instruction.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}
PROMPT_TYPE=${PROMPT_TYPE:-chatml}    # the template of data_convert_qwen3_instruction.sh

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}
SAVE_INTERVAL=1000 EVAL_INTERVAL=1000 EVAL_ITERS=0
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
posttrain_setup qwen3 '{"head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'

GPT_ARGS=(
    --use-checkpoint-args
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP" --sequence-parallel
    --seq-length "$SEQ_LENGTH" --attention-dropout 0 --hidden-dropout 0
    --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
    --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --lr-warmup-fraction 0.01
    --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    --use-distributed-optimizer "${PRECISION[@]}"
)
DATA_ARGS=(
    --data-path "$DATA_PATH"
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
)
START_ARGS=(--finetune)    # the converted base: its weights, from iteration 0
[[ -n $LORA_LOAD ]] && START_ARGS=(--lora-load "$LORA_LOAD")    # the adapters' run resumed: optimizer, iteration
TUNE_ARGS=(
    "${START_ARGS[@]}" --stage sft --is-instruction-dataset --prompt-type "$PROMPT_TYPE"
    --no-pad-to-seq-lengths
    --lora-r 16 --lora-alpha 32 --lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2
)
OUTPUT_ARGS=(
    --log-interval 1 --save-interval "$SAVE_INTERVAL" --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS"
    --load "$CKPT_LOAD_DIR" --save "$CKPT_SAVE_DIR"
)

run_posttrain

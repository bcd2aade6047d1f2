#!/usr/bin/env bash
# GRPO of Qwen3-8B (36 layers, hidden 4096, 32 heads / 8 KV heads of dim 128, vocab 151936, QK-norm) on GSM8K with a rule-based reward.
# posttrain_gpt.py --stage grpo takes every architecture flag from the converted checkpoint (--use-checkpoint-args
# --finetune: the weights only, iteration 0). Each step: --global-batch-size prompts, --num-generations samples of
# each from the policy in memory (the generation engine, KV cache, same weights), rewarded by gsm8k_accuracy
# against the record's reply (the number after ####), advantages normalised per group, the clipped ratio
# (DAPO's decoupled clip) plus a k3 KL to the initial model (--kl-coef).
# Data: GSM8K's train jsonl tokenized as instruction records, one per sequence (no --pack):
#   python preprocess_data.py --input gsm8k/train.jsonl --handler-name AlpacaStyleInstructionHandler \
#       --map-keys '{"prompt": "question", "response": "answer"}' --prompt-type chatml \
#       --tokenizer-type PretrainedFromHF --tokenizer-name-or-path ./model_from_hf/Qwen3-8B \
#       --output-prefix ./finetune_dataset/qwen3/gsm8k --seq-length 2048
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_qwen3_8b_hf2mcore.sh), no sequence
# parallelism (a decode step is one token).
#   bash examples/qwen3/grpo_qwen3_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3/grpo_qwen3_8b_ptd.sh     # seconds on the CPU: a tiny random qwen3 model with the same behaviour flags
#   DRY_RUN=1 bash examples/qwen3/grpo_qwen3_8b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-8b-mcore-tp8pp1}    # ckpt_convert_qwen3_8b_hf2mcore.sh (or an SFT run)
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen3-grpo}
DATA_PATH=${DATA_PATH:-./finetune_dataset/qwen3/gsm8k}    # see the header
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}
PROMPT_TYPE=${PROMPT_TYPE:-chatml}    # the template the data was tokenized with

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-2048} MBS=${MBS:-1} GBS=${GBS:-32} TRAIN_ITERS=${TRAIN_ITERS:-500}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3 HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'

recipe_grpo

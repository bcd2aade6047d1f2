#!/usr/bin/env bash
# QLoRA supervised fine-tuning of Qwen2.5-7B (28 layers, hidden 3584, 28 heads / 4 KV heads, vocab 152064, qkv bias) on an instruction set.
# posttrain_gpt.py --stage sft takes every architecture flag from the converted checkpoint (--use-checkpoint-args
# --finetune: the weights only, iteration 0); trained: the assistant tokens; each micro-batch padded only to its
# longest sample (--no-pad-to-seq-lengths).
# LoRA adapters (r 16, alpha 32) on linear_qkv linear_proj linear_fc1 linear_fc2, the base frozen; --save holds the
# adapters only (resume: LORA_LOAD=CKPT_SAVE_DIR; PEFT export: tools/convert_ckpt.py --lora-load DIR --save-lora-to-hf).
# QLoRA (--qlora): the targeted base linears are stored as NF4 (blocksize 64, double quantisation) once the
# base is loaded; the adapters train in the recipe's precision.
# Layout: 1 node(s) x 8 devices, TP=4 PP=1 with sequence parallelism (the layout of ckpt_convert_qwen25_7b_hf2mcore.sh).
#   bash examples/qwen2/tune_qwen25_7b_qlora_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2/tune_qwen25_7b_qlora_ptd.sh     # seconds on the CPU: a tiny random qwen2 model with the same behaviour flags
#   DRY_RUN=1 bash examples/qwen2/tune_qwen25_7b_qlora_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen25-7b-mcore-tp4pp1}    # ckpt_convert_qwen25_7b_hf2mcore.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen25-sft-qlora}
DATA_PATH=${DATA_PATH:-./finetune_dataset/qwen25/alpaca}    # data_convert_qwen25_instruction.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-7B}
PROMPT_TYPE=${PROMPT_TYPE:-qwen}    # the template of data_convert_qwen25_instruction.sh

TP=${TP:-4} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen2 HF_CONFIG='{"rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false}'

recipe_tune qlora

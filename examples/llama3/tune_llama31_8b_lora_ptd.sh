#!/usr/bin/env bash
# LoRA supervised fine-tuning of Llama-3.1-8B (32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling) on an instruction set.
# posttrain_gpt.py --stage sft takes every architecture flag from the converted checkpoint (--use-checkpoint-args
# --finetune: the weights only, iteration 0); trained: the assistant tokens; each micro-batch padded only to its
# longest sample (--no-pad-to-seq-lengths).
# LoRA adapters (r 16, alpha 32) on linear_qkv linear_proj linear_fc1 linear_fc2, the base frozen; --save holds the
# adapters only (resume: LORA_LOAD=CKPT_SAVE_DIR; PEFT export: tools/convert_ckpt.py --lora-load DIR --save-lora-to-hf).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of ckpt_convert_llama31_8b_hf2mcore.sh).
#   bash examples/llama3/tune_llama31_8b_lora_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/tune_llama31_8b_lora_ptd.sh     # seconds on the CPU: a tiny random llama model with the same behaviour flags
#   DRY_RUN=1 bash examples/llama3/tune_llama31_8b_lora_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/llama31-8b-mcore-tp8pp1}    # ckpt_convert_llama31_8b_hf2mcore.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama31-sft-lora}
DATA_PATH=${DATA_PATH:-./finetune_dataset/llama31/alpaca}    # data_convert_llama31_instruction.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
PROMPT_TYPE=${PROMPT_TYPE:-llama3}    # the template of data_convert_llama31_instruction.sh

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_tune lora

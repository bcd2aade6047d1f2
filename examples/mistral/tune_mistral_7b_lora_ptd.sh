#!/usr/bin/env bash
# LoRA supervised fine-tuning of Mistral-7B-v0.3 (32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 32768) on an instruction set.
# posttrain_gpt.py --stage sft takes every architecture flag from the converted checkpoint (--use-checkpoint-args
# --finetune: the weights only, iteration 0); trained: the assistant tokens; each micro-batch padded only to its
# longest sample (--no-pad-to-seq-lengths).
# LoRA adapters (r 16, alpha 32) on linear_qkv linear_proj linear_fc1 linear_fc2, the base frozen; --save holds the
# adapters only (resume: LORA_LOAD=CKPT_SAVE_DIR; PEFT export: tools/convert_ckpt.py --lora-load DIR --save-lora-to-hf).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of ckpt_convert_mistral_7b_hf2mcore.sh).
#   bash examples/mistral/tune_mistral_7b_lora_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral/tune_mistral_7b_lora_ptd.sh     # seconds on the CPU: a tiny random mistral model with the same behaviour flags
#   DRY_RUN=1 bash examples/mistral/tune_mistral_7b_lora_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mistral-7b-mcore-tp8pp1}    # ckpt_convert_mistral_7b_hf2mcore.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/mistral-sft-lora}
DATA_PATH=${DATA_PATH:-./finetune_dataset/mistral/alpaca}    # data_convert_mistral_instruction.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}
PROMPT_TYPE=${PROMPT_TYPE:-alpaca}    # alpaca: plain-text markers, any tokenizer; or tokenizer: the model's own chat template

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-2000}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mistral HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false}'

recipe_tune lora

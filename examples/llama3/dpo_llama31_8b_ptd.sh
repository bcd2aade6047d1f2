#!/usr/bin/env bash
# Direct preference optimisation (DPO) of Llama-3.1-8B (32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling) on a preference set, from its supervised fine-tune.
# posttrain_gpt.py --stage dpo takes every architecture flag from the checkpoint of tune_llama31_8b_full_ptd.sh (--use-checkpoint-args
# --finetune: the weights only, iteration 0). The reference model is a frozen copy of that initial policy (REF_MODEL=DIR:
# another checkpoint of ours; PRECOMPUTE_REF=1: its log-probs computed once and the copy dropped). Sigmoid loss, beta 0.1;
# logged beside lm loss: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected.
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of the SFT checkpoint; each pair's replies padded to SEQ_LENGTH).
#   bash examples/llama3/dpo_llama31_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/dpo_llama31_8b_ptd.sh     # seconds on the CPU: a tiny random llama model with the same behaviour flags, tiny preference pairs
#   DRY_RUN=1 bash examples/llama3/dpo_llama31_8b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/llama31-sft}    # tune_llama31_8b_full_ptd.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama31-dpo}
DATA_PATH=${DATA_PATH:-./finetune_dataset/llama31/pairwise}    # data_convert_llama31_pairwise.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
PROMPT_TYPE=${PROMPT_TYPE:-llama3}    # the template of data_convert_llama31_pairwise.sh

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-1000}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_dpo

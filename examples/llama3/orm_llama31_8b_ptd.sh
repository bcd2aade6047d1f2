#!/usr/bin/env bash
# Reward model (ORM) of Llama-3.1-8B (32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling) trained on a preference set, from its supervised fine-tune.
# posttrain_gpt.py --stage orm takes every architecture flag from the checkpoint of tune_llama31_8b_full_ptd.sh (--use-checkpoint-args
# --finetune: the weights only, iteration 0) and puts a scalar value head (freshly initialised) in place of the logits;
# a reply's reward is the score of its last token, the loss Bradley-Terry's; logged beside lm loss: accuracy,
# rewards/chosen, rewards/rejected, rewards/margins. tools/convert_ckpt.py --save-model-type hf exports the result as a
# ...ForSequenceClassification checkpoint (ckpt_convert_*_mcore2hf.sh with CKPT_LOAD_DIR set to CKPT_SAVE_DIR).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of the SFT checkpoint; each pair's replies padded to SEQ_LENGTH).
#   bash examples/llama3/orm_llama31_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/orm_llama31_8b_ptd.sh     # seconds on the CPU: a tiny random llama model with the same behaviour flags, tiny preference pairs
#   DRY_RUN=1 bash examples/llama3/orm_llama31_8b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/llama31-sft}    # tune_llama31_8b_full_ptd.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/llama31-orm}
DATA_PATH=${DATA_PATH:-./finetune_dataset/llama31/pairwise}    # data_convert_llama31_pairwise.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
PROMPT_TYPE=${PROMPT_TYPE:-llama3}    # the template of data_convert_llama31_pairwise.sh

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-500}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_orm

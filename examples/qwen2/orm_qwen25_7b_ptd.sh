#!/usr/bin/env bash
# Reward model (ORM) of Qwen2.5-7B (28 layers, hidden 3584, 28 heads / 4 KV heads, vocab 152064, qkv bias) trained on a preference set, from its supervised fine-tune.
# posttrain_gpt.py --stage orm takes every architecture flag from the checkpoint of tune_qwen25_7b_full_ptd.sh (--use-checkpoint-args
# --finetune: the weights only, iteration 0) and puts a scalar value head (freshly initialised) in place of the logits;
# a reply's reward is the score of its last token, the loss Bradley-Terry's; logged beside lm loss: accuracy,
# rewards/chosen, rewards/rejected, rewards/margins. tools/convert_ckpt.py --save-model-type hf exports the result as a
# ...ForSequenceClassification checkpoint (ckpt_convert_*_mcore2hf.sh with CKPT_LOAD_DIR set to CKPT_SAVE_DIR).
# Layout: 1 node(s) x 8 devices, TP=4 PP=1 with sequence parallelism (the layout of the SFT checkpoint; each pair's replies padded to SEQ_LENGTH).
#   bash examples/qwen2/orm_qwen25_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2/orm_qwen25_7b_ptd.sh     # seconds on the CPU: a tiny random qwen2 model with the same behaviour flags, tiny preference pairs
#   DRY_RUN=1 bash examples/qwen2/orm_qwen25_7b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/qwen25-sft}    # tune_qwen25_7b_full_ptd.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/qwen25-orm}
DATA_PATH=${DATA_PATH:-./finetune_dataset/qwen25/pairwise}    # data_convert_qwen25_pairwise.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-7B}
PROMPT_TYPE=${PROMPT_TYPE:-qwen}    # the template of data_convert_qwen25_pairwise.sh

TP=${TP:-4} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-500}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen2 HF_CONFIG='{"rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false}'

recipe_orm

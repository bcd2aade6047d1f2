#!/usr/bin/env bash
# Reward model (ORM) of Gemma-2-9B (42 layers, hidden 3584, 16 heads / 8 KV heads of dim 256, vocab 256000, logit softcapping, sliding window on alternate layers) trained on a preference set, from its supervised fine-tune.
# posttrain_gpt.py --stage orm takes every architecture flag from the checkpoint of tune_gemma2_9b_full_ptd.sh (--use-checkpoint-args
# --finetune: the weights only, iteration 0) and puts a scalar value head (freshly initialised) in place of the logits;
# a reply's reward is the score of its last token, the loss Bradley-Terry's; logged beside lm loss: accuracy,
# rewards/chosen, rewards/rejected, rewards/margins. tools/convert_ckpt.py --save-model-type hf exports the result as a
# ...ForSequenceClassification checkpoint (ckpt_convert_*_mcore2hf.sh with CKPT_LOAD_DIR set to CKPT_SAVE_DIR).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 with sequence parallelism (the layout of the SFT checkpoint; each pair's replies padded to SEQ_LENGTH).
#   bash examples/gemma2/orm_gemma2_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma2/orm_gemma2_9b_ptd.sh     # seconds on the CPU: a tiny random gemma2 model with the same behaviour flags, tiny preference pairs
#   DRY_RUN=1 bash examples/gemma2/orm_gemma2_9b_ptd.sh   # print the command and validate its flags, checkpoint and data
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gemma2-sft}    # tune_gemma2_9b_full_ptd.sh
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./ckpt/gemma2-orm}
DATA_PATH=${DATA_PATH:-./finetune_dataset/gemma2/pairwise}    # data_convert_gemma2_pairwise.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-2-9b}
PROMPT_TYPE=${PROMPT_TYPE:-alpaca}    # the template of data_convert_gemma2_pairwise.sh

TP=${TP:-8} PP=${PP:-1}
SEQ_LENGTH=${SEQ_LENGTH:-4096} MBS=${MBS:-1} GBS=${GBS:-64} TRAIN_ITERS=${TRAIN_ITERS:-500}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma2 HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_orm

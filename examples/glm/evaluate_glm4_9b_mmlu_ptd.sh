#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# glm-4-9b-chat-hf (THUDM/glm-4-9b-chat-hf config.json; see examples/README.md): 40 layers, hidden 4096, FFN 13696, 32 heads / 2 KV heads, vocab 151552, rope theta 10000 on the first half of each head in interleaved pairs, RMSNorm 1.5625e-7, q/k/v bias only, fused gate_up_proj, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_glm4_9b_hf2mcore.sh), bf16.
#   bash examples/glm/evaluate_glm4_9b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm/evaluate_glm4_9b_mmlu_ptd.sh     # seconds on the CPU: a tiny random glm model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/glm/evaluate_glm4_9b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm4-9b-mcore-tp8pp1}    # ckpt_convert_glm4_9b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/glm-4-9b-chat-hf}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/glm4_9b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm HF_CONFIG='{"partial_rotary_factor": 0.5, "attention_bias": true, "rms_norm_eps": 1.5625e-07, "rope_theta": 10000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 131072, "pad_token_id": 0, "eos_token_id": 2}'

recipe_evaluate mmlu

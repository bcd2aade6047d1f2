#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# nanochat-d20 (nanochat-students/nanochat-d20 config.json): 20 layers, hidden 1280, FFN 5120, 10 heads / 10 KV heads (head dim 128), vocab 65536, rope theta 10000, RMSNorm 1e-6 without weights on the embeddings, before attention and MLP, on q/k and at the end, non-gated ReLU-squared MLP, final logit softcap 15, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_nanochat_d20_hf2mcore.sh), bf16.
#   bash examples/nanochat/evaluate_nanochat_d20_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nanochat/evaluate_nanochat_d20_mmlu_ptd.sh     # seconds on the CPU: a tiny random nanochat model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/nanochat/evaluate_nanochat_d20_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/nanochat-d20-mcore-tp1pp1}    # ckpt_convert_nanochat_d20_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/nanochat-d20}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/nanochat_d20/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nanochat HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-06, "final_logit_softcapping": 15.0, "attention_bias": false, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

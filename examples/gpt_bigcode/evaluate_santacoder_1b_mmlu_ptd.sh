#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# SantaCoder 1.1B (bigcode/gpt_bigcode-santacoder config.json): 24 layers, hidden 2048, FFN 8192, 16 heads with one shared KV head (multi_query), vocab 49280, 2048 learned positions, LayerNorm (eps 1e-5), GELU (tanh), biases on every linear, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_santacoder_1b_hf2mcore.sh), bf16.
#   bash examples/gpt_bigcode/evaluate_santacoder_1b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_bigcode/evaluate_santacoder_1b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gpt_bigcode model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gpt_bigcode/evaluate_santacoder_1b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/santacoder-1b-mcore-tp2pp1}    # ckpt_convert_santacoder_1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt_bigcode-santacoder}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/santacoder_1b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_bigcode HF_CONFIG='{"multi_query": true, "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 2048}'

recipe_evaluate mmlu

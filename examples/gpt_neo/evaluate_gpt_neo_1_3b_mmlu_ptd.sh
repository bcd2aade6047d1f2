#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# GPT-Neo 1.3B (EleutherAI/gpt-neo-1.3B config.json = transformers' GPTNeoConfig() defaults): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50257, 2048 learned positions, layers alternating global / local (window 256) attention, no attention scaling, q/k/v without bias, out_proj and MLP with bias, LayerNorm (eps 1e-5), GELU (tanh: gelu_new), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_gpt_neo_1_3b_hf2mcore.sh), bf16.
#   bash examples/gpt_neo/evaluate_gpt_neo_1_3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neo/evaluate_gpt_neo_1_3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gpt_neo model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gpt_neo/evaluate_gpt_neo_1_3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gpt-neo-1_3b-mcore-tp1pp1}    # ckpt_convert_gpt_neo_1_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neo-1.3B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/gpt_neo_1_3b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neo HF_CONFIG='{"attention_types": [[["global", "local"], 1]], "window_size": 256, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

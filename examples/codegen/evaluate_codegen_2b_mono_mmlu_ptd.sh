#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# codegen-2B-mono (Salesforce/codegen-2B-mono config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, interleaved rope (base 10000) on the first 64 of 80 dims per head, GPT-J's parallel layer (one LayerNorm, bias, 1e-5), biases on the MLP and the untied output layer only, GELU (tanh); q/v/k fused in 4 blocks (the converter reorders them).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_codegen_2b_mono_hf2mcore.sh), bf16.
#   bash examples/codegen/evaluate_codegen_2b_mono_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/codegen/evaluate_codegen_2b_mono_mmlu_ptd.sh     # seconds on the CPU: a tiny random codegen model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/codegen/evaluate_codegen_2b_mono_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/codegen-2b-mono-mcore-tp2pp1}    # ckpt_convert_codegen_2b_mono_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/codegen-2B-mono}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/codegen_2b_mono/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=codegen HF_CONFIG='{"rotary_dim": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": false, "n_positions": 2048, "n_ctx": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Jais-2-8B (inceptionai/Jais-2-8B: 32 layers, hidden 3328, FFN 26624, 26 heads (MHA, head dim 128), vocab 150272, rope theta 10000, LayerNorm 1e-5 with bias, non-gated ReLU-squared MLP, biases on every linear, untied embeddings, 8192 positions (see examples/README.md for which numbers are verified)).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (ckpt_convert_jais2_8b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/jais2/evaluate_jais2_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/jais2/evaluate_jais2_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random jais2 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/jais2/evaluate_jais2_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/jais2-8b-mcore-tp2pp1}    # ckpt_convert_jais2_8b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/jais2-8b-mcore-tp2pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jais-2-8B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/jais2_8b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=jais2 HF_CONFIG='{"hidden_act": "relu2", "attention_bias": true, "mlp_bias": true, "layer_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

recipe_evaluate mmlu

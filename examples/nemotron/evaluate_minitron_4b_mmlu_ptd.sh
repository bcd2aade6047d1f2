#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Minitron-4B-Base (nvidia/Minitron-4B-Base (Nemotron-4 architecture): 32 layers, hidden 3072, FFN 9216, 32 heads / 8 KV heads, head dim 128, vocab 256000, rope theta 10000 on half of each head (partial_rotary_factor 0.5), LayerNorm1P 1e-5 (scale 1 + weight, with bias), non-gated ReLU-squared MLP, no linear biases, untied embeddings, 4096 positions (see examples/README.md for which numbers are verified)).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_minitron_4b_hf2mcore.sh), bf16.
#   bash examples/nemotron/evaluate_minitron_4b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron/evaluate_minitron_4b_mmlu_ptd.sh     # seconds on the CPU: a tiny random nemotron model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/nemotron/evaluate_minitron_4b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minitron-4b-mcore-tp4pp1}    # ckpt_convert_minitron_4b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Minitron-4B-Base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/minitron_4b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nemotron HF_CONFIG='{"num_key_value_heads": 2, "head_dim": 32, "hidden_act": "relu2", "norm_eps": 1e-05, "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_evaluate mmlu

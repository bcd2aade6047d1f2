#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# bitnet-b1.58-2B-4T-bf16 (microsoft/bitnet-b1.58-2B-4T-bf16 config.json): 30 layers, hidden 2560, FFN 6912, 20 heads / 5 KV heads, vocab 128256, rope theta 500000, RMSNorm 1e-5, RMSNorm on the attention context before o_proj and on the activation before down_proj, gated ReLU-squared MLP, no biases, tied embeddings; trained unquantised (no ternary weights in the forward).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_bitnet_2b_hf2mcore.sh), bf16.
#   bash examples/bitnet/evaluate_bitnet_2b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bitnet/evaluate_bitnet_2b_mmlu_ptd.sh     # seconds on the CPU: a tiny random bitnet model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/bitnet/evaluate_bitnet_2b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/bitnet-2b-mcore-tp1pp1}    # ckpt_convert_bitnet_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/bitnet_2b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bitnet HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# granite-swash-2b (ibm-granite/granite-swash-2b config.json): 24 layers, hidden 2560, FFN 8192, 20 heads / 4 KV heads, vocab 100352, rope theta 10000 on every layer, RMSNorm 1e-5, SwiGLU, no biases, sliding window 128 except on layers 0, 4, ..., 20 (full attention), a learnable attention sink per head (--softmax-type learnable), Granite's multipliers all 1 (attention scale 1), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_granite_swa_2b_hf2mcore.sh), bf16.
#   bash examples/granite_swa/evaluate_granite_swa_2b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granite_swa/evaluate_granite_swa_2b_mmlu_ptd.sh     # seconds on the CPU: a tiny random granite_swa model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/granite_swa/evaluate_granite_swa_2b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/granite_swa-2b-mcore-tp4pp1}    # ckpt_convert_granite_swa_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-swash-2b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/granite_swa_2b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granite_swa HF_CONFIG='{"sliding_window": 128, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_evaluate mmlu

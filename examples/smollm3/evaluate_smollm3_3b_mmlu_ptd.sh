#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): 36 layers, hidden 2048, FFN 11008, 16 heads / 4 KV heads, vocab 128256, rope theta 5000000 on 3 of every 4 layers (every 4th layer, 3, 7, ..., 35, is NoPE), RMSNorm 1e-6, SwiGLU, no biases, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_smollm3_3b_hf2mcore.sh), bf16.
#   bash examples/smollm3/evaluate_smollm3_3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/smollm3/evaluate_smollm3_3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random smollm3 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/smollm3/evaluate_smollm3_3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/smollm3-3b-mcore-tp1pp1}    # ckpt_convert_smollm3_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/SmolLM3-3B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/smollm3_3b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=smollm3 HF_CONFIG='{"no_rope_layers": [1, 0], "pad_token_id": null, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "use_sliding_window": false, "tie_word_embeddings": true, "max_position_embeddings": 65536}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# helium-1-preview-2b (kyutai/helium-1-preview-2b config.json): 24 layers, hidden 2560, FFN 7040, 20 heads (MHA), head dim 128 (= hidden / heads, which Helium's o_proj requires), vocab 48000, interleaved RoPE theta 100000, RMSNorm 1e-8, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_helium1_preview_2b_hf2mcore.sh), bf16.
#   bash examples/helium/evaluate_helium1_preview_2b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/helium/evaluate_helium1_preview_2b_mmlu_ptd.sh     # seconds on the CPU: a tiny random helium model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/helium/evaluate_helium1_preview_2b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/helium1-preview-2b-mcore-tp1pp1}    # ckpt_convert_helium1_preview_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/helium-1-preview-2b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/helium1_preview_2b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=helium HF_CONFIG='{"num_key_value_heads": 4, "head_dim": 16, "rms_norm_eps": 1e-08, "rope_theta": 100000.0, "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# XGLM 564M (facebook/xglm-564M config.json = transformers' XGLMConfig() defaults): 24 layers, hidden 1024, FFN 4096, 16 heads (MHA), vocab 256008, fixed sinusoidal positions (fairseq layout, row position + 2), word embeddings times sqrt(1024), LayerNorm (eps 1e-5), GELU, biases on every linear, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_xglm_564m_hf2mcore.sh), bf16.
#   bash examples/xglm/evaluate_xglm_564m_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xglm/evaluate_xglm_564m_mmlu_ptd.sh     # seconds on the CPU: a tiny random xglm model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/xglm/evaluate_xglm_564m_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/xglm-564m-mcore-tp1pp1}    # ckpt_convert_xglm_564m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xglm-564M}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/xglm_564m/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xglm HF_CONFIG='{"activation_function": "gelu", "scale_embedding": true, "pad_token_id": 1, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# falcon-7b (tiiuae/falcon-7b config.json): 32 layers, hidden 4544, FFN 18176, 71 heads with one K/V head (multi-query), vocab 65024, rope theta 10000, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, no linear bias, GELU, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (ckpt_convert_falcon_7b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/falcon/evaluate_falcon_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon/evaluate_falcon_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random falcon model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/falcon/evaluate_falcon_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/falcon-7b-mcore-tp1pp1}    # ckpt_convert_falcon_7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/falcon-7b-mcore-tp1pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-7b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/falcon_7b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon HF_CONFIG='{"num_attention_heads": 4, "multi_query": true, "new_decoder_architecture": false, "parallel_attn": true, "bias": false, "alibi": false, "activation": "gelu", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# stablelm-2-1_6b (stabilityai/stablelm-2-1_6b config.json): 24 layers, hidden 2048, FFN 5632, 32 heads (MHA), vocab 100352, rope theta 10000 on the first 25% of each head's dims, LayerNorm with bias 1e-5, q/k/v bias, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_stablelm2_1_6b_hf2mcore.sh), bf16.
#   bash examples/stablelm/evaluate_stablelm2_1_6b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/stablelm/evaluate_stablelm2_1_6b_mmlu_ptd.sh     # seconds on the CPU: a tiny random stablelm model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/stablelm/evaluate_stablelm2_1_6b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/stablelm2-1_6b-mcore-tp1pp1}    # ckpt_convert_stablelm2_1_6b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/stablelm-2-1_6b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/stablelm2_1_6b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=stablelm HF_CONFIG='{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "use_qkv_bias": true, "qk_layernorm": false, "use_parallel_residual": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_evaluate mmlu

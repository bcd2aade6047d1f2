#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# starcoder2-3b (bigcode/starcoder2-3b config.json: 30 layers, hidden 3072, FFN 12288, 24 heads / 2 KV heads, vocab 49152, rope theta 999999.4420358813, sliding window 4096, LayerNorm 1e-5 with bias, non-gated tanh GELU MLP, biases on every linear (use_bias), tied embeddings, 16384 positions).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_starcoder2_3b_hf2mcore.sh), bf16.
#   bash examples/starcoder2/evaluate_starcoder2_3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/starcoder2/evaluate_starcoder2_3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random starcoder2 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/starcoder2/evaluate_starcoder2_3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/starcoder2-3b-mcore-tp2pp1}    # ckpt_convert_starcoder2_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/starcoder2-3b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/starcoder2_3b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=starcoder2 HF_CONFIG='{"rope_theta": 999999.4420358813, "sliding_window": 8, "use_bias": true, "norm_epsilon": 1e-05, "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true, "max_position_embeddings": 16384}'

recipe_evaluate mmlu

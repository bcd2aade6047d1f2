#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Hunyuan-7B-Pretrain (tencent/Hunyuan-7B-Pretrain config.json; see examples/README.md): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128167, RMSNorm 1e-5, per-head q/k RMSNorm after RoPE, rope theta 10000 with NTK alpha 1000 (dynamic with a fixed alpha: base 10000 x 1000 ** (128 / 126)), no biases, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_hunyuan_7b_hf2mcore.sh), bf16.
#   bash examples/hunyuan/evaluate_hunyuan_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan/evaluate_hunyuan_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random hunyuan_v1_dense model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/hunyuan/evaluate_hunyuan_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hunyuan-7b-mcore-tp8pp1}    # ckpt_convert_hunyuan_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-7B-Pretrain}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/hunyuan_7b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_dense HF_CONFIG='{"rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 262144}'

recipe_evaluate mmlu

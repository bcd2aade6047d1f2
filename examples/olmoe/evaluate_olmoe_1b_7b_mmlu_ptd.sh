#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# OLMoE-1B-7B-0924: (allenai/OLMoE-1B-7B-0924 config.json = transformers' OlmoeConfig() but FFN 1024, see examples/README.md) 16 layers, all MoE, hidden 2048, 16 heads / 16 KV heads, q/k RMSNorm over all heads' channels, vocab 50304, rope theta 10000, RMSNorm 1e-5, untied, no q/k/v clipping; 64 experts of FFN 1024, top-8 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (the layout of ckpt_convert_olmoe_1b_7b_hf2mcore.sh), bf16.
#   bash examples/olmoe/evaluate_olmoe_1b_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmoe/evaluate_olmoe_1b_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random olmoe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/olmoe/evaluate_olmoe_1b_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmoe-1b-7b-mcore-tp1pp1ep8}    # ckpt_convert_olmoe_1b_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMoE-1B-7B-0924}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/olmoe_1b_7b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmoe HF_CONFIG='{"num_experts": 64, "num_experts_per_tok": 8, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "clip_qkv": null, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

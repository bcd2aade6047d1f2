#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# gpt-oss-20b (openai/gpt-oss-20b config.json): 24 layers, hidden 2880, 64 heads / 8 KV heads of head dim 64, vocab 201088, RMSNorm 1e-5, untied embeddings; q/k/v/o, expert and router biases (--add-bias-linear); learned attention sinks (--softmax-type learnable); sliding window 128 on every other layer (from layer 0); YaRN rope theta 150000 (factor 32, original 4096, beta 32/1, ramp bounds not rounded); 32 experts of FFN 2880, top-4 (softmax over the top-4 logits), clamped SwiGLU (--quick-geglu --activation-func-clamp-value 7 --glu-linear-offset 1), router aux loss coefficient 0.9.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 EP=4 (the layout of ckpt_convert_gpt_oss_20b_hf2mcore.sh), bf16.
#   bash examples/gpt_oss/evaluate_gpt_oss_20b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_oss/evaluate_gpt_oss_20b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gpt_oss model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gpt_oss/evaluate_gpt_oss_20b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gpt-oss-20b-mcore-tp2pp1ep4}    # ckpt_convert_gpt_oss_20b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-oss-20b-bf16}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/gpt_oss_20b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_oss HF_CONFIG='{"num_local_experts": 32, "num_experts_per_tok": 4, "router_aux_loss_coef": 0.9, "head_dim": 64, "attention_bias": true, "sliding_window": 128, "swiglu_limit": 7.0, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false}, "rope_theta": 150000, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# moe-7b-1b-active-shared-experts: sizes UNVERIFIED (no copy of its config.json was found): transformers' GraniteMoeSharedConfig() defaults, which its docstring likens to this checkpoint, with an assumed shared expert of 1024: 32 layers, hidden 4096, 32 heads, vocab 32000, rope theta 10000, RMSNorm 1e-6, untied; 8 experts of FFN 11008, top-2, one ungated shared expert of 1024; multipliers 1 (attention scale 1.0, not 1/sqrt(head dim)).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 EP=4 (ckpt_convert_granite_moe_shared_7b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/granitemoeshared/evaluate_granite_moe_shared_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoeshared/evaluate_granite_moe_shared_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random granitemoeshared model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/granitemoeshared/evaluate_granite_moe_shared_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/moe-7b-1b-active-shared-experts-mcore-tp2pp1ep4}    # ckpt_convert_granite_moe_shared_7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/moe-7b-1b-active-shared-experts-mcore-tp2pp1ep4
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/moe-7b-1b-active-shared-experts}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/granite_moe_shared_7b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoeshared HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 1024, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0, "logits_scaling": 1.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Phi-3.5-MoE-instruct: 32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 32064, rope theta 10000 (the published LongRoPE scaling is not supported yet), LayerNorm with bias (eps 1e-5), untied; q/k/v and output biases, lm_head bias; 16 experts of FFN 6400, SparseMixer top-2 routing (eps 0.01).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 EP=1 (ckpt_convert_phi35_moe_42b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/phimoe/evaluate_phi35_moe_42b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phimoe/evaluate_phi35_moe_42b_mmlu_ptd.sh     # seconds on the CPU: a tiny random phimoe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/phimoe/evaluate_phi35_moe_42b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi-3.5-moe-instruct-mcore-tp4pp1}    # ckpt_convert_phi35_moe_42b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/phi-3.5-moe-instruct-mcore-tp4pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3.5-MoE-instruct}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/phi35_moe_42b/}

TP=${TP:-4} PP=${PP:-1} EP=${EP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phimoe HF_CONFIG='{"num_local_experts": 16, "num_experts_per_tok": 2, "router_jitter_noise": 0.01, "input_jitter_noise": 0.0, "router_aux_loss_coef": 0.001, "attention_bias": true, "lm_head_bias": true, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Hunyuan-A13B-Pretrain: 32 layers, hidden 4096, 32 heads / 8 KV heads (head dim 128), vocab 128167, rope theta 10000 with dynamic NTK alpha 1000, RMSNorm 1e-5, tied; per-head q/k RMSNorm after RoPE; 64 experts of FFN 3072, top-8 of the softmax over all experts, renormalised, plus one ungated shared expert of 3072.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 2 node(s) x 8 devices, TP=2 PP=1 EP=8 (ckpt_convert_hunyuan_a13b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/hunyuan_v1_moe/evaluate_hunyuan_a13b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan_v1_moe/evaluate_hunyuan_a13b_mmlu_ptd.sh     # seconds on the CPU: a tiny random hunyuan_v1_moe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/hunyuan_v1_moe/evaluate_hunyuan_a13b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hunyuan-a13b-pretrain-mcore-tp2pp1ep8}    # ckpt_convert_hunyuan_a13b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/hunyuan-a13b-pretrain-mcore-tp2pp1ep8
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-A13B-Pretrain}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/hunyuan_a13b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_moe HF_CONFIG='{"num_experts": 64, "moe_topk": [8, 8], "num_shared_expert": [1, 1], "use_mixed_mlp_moe": true, "use_qk_norm": true, "use_cla": false, "rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

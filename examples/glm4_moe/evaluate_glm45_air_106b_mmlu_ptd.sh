#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# GLM-4.5-Air (zai-org/GLM-4.5-Air config.json): 46 layers (the first dense), hidden 4096, dense FFN 10944, 96 heads / 8 KV heads of dim 128, vocab 151552, rope theta 1000000 on half of each head (partial_rotary_factor 0.5), RMSNorm 1e-5, q/k/v bias, untied embeddings; 128 experts of FFN 1408, top-8 by sigmoid score + expert bias (e_score_correction_bias), renormalised (norm_topk_prob), routed_scaling_factor 1.0, one shared expert of 1408, no group limit (n_group 1).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=2 PP=1 EP=16 (ckpt_convert_glm45_air_106b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/glm4_moe/evaluate_glm45_air_106b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm4_moe/evaluate_glm45_air_106b_mmlu_ptd.sh     # seconds on the CPU: a tiny random glm4_moe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/glm4_moe/evaluate_glm45_air_106b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm45-air-106b-mcore-tp2pp1ep16}    # ckpt_convert_glm45_air_106b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/glm45-air-106b-mcore-tp2pp1ep16
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.5-Air}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/glm45_air_106b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4_moe HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": true, "attention_bias": true, "use_qk_norm": false, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Qwen3-30B-A3B: (Qwen/Qwen3-30B-A3B config.json; sizes as MindSpeed-LLM's recipe passes them) 48 layers, all MoE, hidden 2048, 32 heads / 4 KV heads of dim 128, per-head q/k RMSNorm, vocab 151936, rope theta 1000000, RMSNorm 1e-6, untied; 128 experts of FFN 768, top-8 of the softmax over all experts, renormalised (norm_topk_prob), router aux loss coefficient 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/qwen3_moe/evaluate_qwen3_moe_30b_a3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_moe/evaluate_qwen3_moe_30b_a3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random qwen3_moe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/qwen3_moe/evaluate_qwen3_moe_30b_a3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-moe-30b-a3b-mcore-tp1pp1ep8}    # ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/qwen3-moe-30b-a3b-mcore-tp1pp1ep8
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-30B-A3B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen3_moe_30b_a3b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3_moe HF_CONFIG='{"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

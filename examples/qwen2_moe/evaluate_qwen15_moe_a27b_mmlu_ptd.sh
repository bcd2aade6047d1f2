#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Qwen1.5-MoE-A2.7B: (Qwen/Qwen1.5-MoE-A2.7B config.json) 24 layers, all MoE, hidden 2048, 16 heads / 16 KV heads, q/k/v bias, vocab 151936, rope theta 1000000, RMSNorm 1e-6, untied; 60 experts of FFN 1408, top-4 of the softmax over all experts (not renormalised), plus a shared expert of FFN 5632 scaled by sigmoid(gate), router aux loss coefficient 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=1 PP=1 EP=4 (the layout of ckpt_convert_qwen15_moe_a27b_hf2mcore.sh), bf16.
#   bash examples/qwen2_moe/evaluate_qwen15_moe_a27b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2_moe/evaluate_qwen15_moe_a27b_mmlu_ptd.sh     # seconds on the CPU: a tiny random qwen2_moe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/qwen2_moe/evaluate_qwen15_moe_a27b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen15-moe-a27b-mcore-tp1pp1ep4}    # ckpt_convert_qwen15_moe_a27b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen1.5-MoE-A2.7B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen15_moe_a27b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen2_moe HF_CONFIG='{"num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "qkv_bias": true, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 8192}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

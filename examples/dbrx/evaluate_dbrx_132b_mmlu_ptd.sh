#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# dbrx-base: 40 layers, hidden 6144, 48 heads / 8 KV heads, vocab 100352, rope theta 500000, LayerNorm without bias (eps 1e-5), untied; fused Wqkv clamped to [-8, 8]; 16 experts of FFN 10752, top-4 of the softmax over all experts, renormalised, router aux loss coefficient 0.05.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=4 PP=1 EP=8 (ckpt_convert_dbrx_132b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/dbrx/evaluate_dbrx_132b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/dbrx/evaluate_dbrx_132b_mmlu_ptd.sh     # seconds on the CPU: a tiny random dbrx model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/dbrx/evaluate_dbrx_132b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/dbrx-base-mcore-tp4pp1ep8}    # ckpt_convert_dbrx_132b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/dbrx-base-mcore-tp4pp1ep8
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dbrx-base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/dbrx_132b/}

TP=${TP:-4} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=dbrx HF_CONFIG='{"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 256, "attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 500000}, "ffn_config": {"ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 128, "moe_num_experts": 16, "moe_top_k": 4, "moe_jitter_eps": 0, "moe_loss_weight": 0.05, "moe_normalize_expert_weights": 1.0}, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "tie_word_embeddings": false}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

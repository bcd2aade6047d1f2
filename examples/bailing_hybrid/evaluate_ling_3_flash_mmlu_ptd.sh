#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Ling-3.0-Flash (inclusionAI/Ling-3.0-Flash): 42 layers in groups of 6, Kimi Delta Attention in the first 5 of each and multi-latent attention in the 6th (layers 6, 12, ..., 42); hidden 2560; KDA 32 heads of 128 (key and value), a short conv of 4, full-rank forget and output gates, the forget gate bounded at -5 (kda_safe_gate); MLA 32 heads, kv_lora_rank 512, q from one projection, nope 128 / rope 64 (interleaved, base 6e6) / v 128, a sigmoid gate per head on its output; the first 2 layers a dense SwiGLU MLP of 6144, then MoE: 512 experts of 768, top-8 of the sigmoid scores with the selection bias from the best 4 of 8 groups, renormalised, times 2.5, one shared expert; RMSNorm 1e-6, vocab 157184, untied, 262144 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (ckpt_convert_ling_3_flash_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/bailing_hybrid/evaluate_ling_3_flash_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bailing_hybrid/evaluate_ling_3_flash_mmlu_ptd.sh     # seconds on the CPU: a tiny random bailing_hybrid model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/bailing_hybrid/evaluate_ling_3_flash_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ling-3-flash-mcore-tp1pp1ep8}    # ckpt_convert_ling_3_flash_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/ling-3-flash-mcore-tp1pp1ep8
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ling-3.0-Flash}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ling_3_flash/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bailing_hybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 16, "short_conv_kernel_size": 4, "kda_safe_gate": true, "kda_lower_bound": -5.0, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "num_experts": 16, "num_experts_per_token": 4, "num_shared_experts": 1, "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_renormalize": true, "routed_scaling_factor": 2.5, "num_expert_group": 4, "topk_group": 2, "rope_theta": 6000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "model_max_length": 262144, "num_nextn_predict_layers": 1, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

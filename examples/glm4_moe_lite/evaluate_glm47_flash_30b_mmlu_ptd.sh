#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# GLM-4.7-Flash (zai-org/GLM-4.7-Flash config.json; see examples/README.md): 47 layers, hidden 2048, dense FFN 10240 (first layer), 20 heads (MLA: q latent 768, kv latent 512, q/k 192 + rope 64, v 256), vocab 154880, rope theta 10000, interleaved RoPE, RMSNorm 1e-5 (the latent norms 1e-6), untied; 64 experts of FFN 1536, top-4 (sigmoid with the aux-loss-free expert bias, renormalised, times 1.8), 1 shared expert.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 2 node(s) x 8 devices, TP=1 PP=1 EP=16 (the layout of ckpt_convert_glm47_flash_30b_hf2mcore.sh), bf16.
#   bash examples/glm4_moe_lite/evaluate_glm47_flash_30b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm4_moe_lite/evaluate_glm47_flash_30b_mmlu_ptd.sh     # seconds on the CPU: a tiny random glm4_moe_lite model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/glm4_moe_lite/evaluate_glm47_flash_30b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm47-flash-30b-mcore-tp1pp1ep16}    # ckpt_convert_glm47_flash_30b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.7-Flash}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/glm47_flash_30b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4_moe_lite HF_CONFIG='{"n_routed_experts": 64, "num_experts_per_tok": 4, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"], "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.8, "rope_interleave": true, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 202752, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

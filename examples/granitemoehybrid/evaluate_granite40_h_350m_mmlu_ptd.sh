#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Granite-4.0-H-350M (ibm-granite/granite-4.0-h-350m): 32 HF layers, each a mixer then a SwiGLU MLP (our 64 pattern letters): Mamba2 in 28, NoPE attention in layers 10, 13, 17 and 27 (12 heads / 4 KV heads of 64); hidden 768, MLP (shared_intermediate_size) 2048, no experts; Mamba2 d_inner 1536 (expand 2) in 48 heads of 32, 1 B/C group, state 128, conv 4; embeddings x 12, every branch x 0.246, attention scale 0.015625, logits / 3; RMSNorm 1e-5, vocab 100352, tied embeddings, 32768 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_granite40_h_350m_hf2mcore.sh), bf16.
#   bash examples/granitemoehybrid/evaluate_granite40_h_350m_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoehybrid/evaluate_granite40_h_350m_mmlu_ptd.sh     # seconds on the CPU: a tiny random granitemoehybrid model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/granitemoehybrid/evaluate_granite40_h_350m_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/granite-4.0-h-350m-mcore-tp1pp1}    # ckpt_convert_granite40_h_350m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-4.0-h-350m}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/granite40_h_350m/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoehybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"], "num_local_experts": 0, "shared_intermediate_size": 128, "position_embedding_type": null, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "embedding_multiplier": 12.0, "residual_multiplier": 0.246, "attention_multiplier": 0.015625, "logits_scaling": 3.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# MiniCPM3-4B: (transformers' MiniCPM3Config() defaults, whose docstring names openbmb/MiniCPM3-4B; see examples/README.md) 62 layers, hidden 2560, FFN 6400, 40 heads (MLA: q latent 768, kv latent 256, q/k 64 + rope 32, v 64), vocab 73448, rope theta 10000, RMSNorm 1e-5 (latent norms 1e-6), tied embeddings; embeddings x 12 (scale_emb), residual branches x 1.4 / sqrt(62) (scale_depth), logits x 256 / 2560 (dim_model_base). The published LongRoPE scaling is not supported (the converter refuses it), so this recipe trains from scratch with plain RoPE.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_minicpm3_4b_hf2mcore.sh), bf16.
#   bash examples/minicpm3/evaluate_minicpm3_4b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minicpm3/evaluate_minicpm3_4b_mmlu_ptd.sh     # seconds on the CPU: a tiny random minicpm3 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/minicpm3/evaluate_minicpm3_4b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minicpm3-4b-mcore-tp1pp1}    # ckpt_convert_minicpm3_4b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniCPM3-4B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/minicpm3_4b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minicpm3 HF_CONFIG='{"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_evaluate mmlu

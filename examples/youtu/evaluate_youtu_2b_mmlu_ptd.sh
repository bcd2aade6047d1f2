#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Youtu-LLM-2B: (tencent/Youtu-LLM-2B config.json as quoted in two public copies; see examples/README.md) 32 layers, hidden 2048, FFN 6144, 16 heads (MLA: q latent 1536, kv latent 512, q/k 128 + rope 64, v 128), vocab 128256, rope theta 1600000 on interleaved pairs (rope_interleave), RMSNorm 1e-6, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_youtu_2b_hf2mcore.sh), bf16.
#   bash examples/youtu/evaluate_youtu_2b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/youtu/evaluate_youtu_2b_mmlu_ptd.sh     # seconds on the CPU: a tiny random youtu model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/youtu/evaluate_youtu_2b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/youtu-llm-2b-mcore-tp1pp1}    # ckpt_convert_youtu_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Youtu-LLM-2B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/youtu_2b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=youtu HF_CONFIG='{"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "rope_interleave": true, "rms_norm_eps": 1e-06, "rope_theta": 1600000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# gemma-3-1b-pt (google/gemma-3-1b-pt config.json (gemma3_text)): 26 layers, hidden 1152, FFN 6912, 4 heads / 1 KV head, head dim 256, vocab 262144, RMSNorm(1 + w) 1e-6 before and after attention and MLP, per-head q/k RMSNorm(1 + w), embeddings times sqrt(hidden), gated GELU (tanh), softmax scale 256^-0.5, sliding window 512 on 5 of every 6 layers (every 6th full), rope theta 1000000 on full layers and 10000 on sliding ones, no softcaps, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_gemma3_1b_hf2mcore.sh), bf16.
#   bash examples/gemma3/evaluate_gemma3_1b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma3/evaluate_gemma3_1b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gemma3_text model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gemma3/evaluate_gemma3_1b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gemma3-1b-mcore-tp1pp1}    # ckpt_convert_gemma3_1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-3-1b-pt}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/gemma3_1b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma3_text HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 8, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}, "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_evaluate mmlu

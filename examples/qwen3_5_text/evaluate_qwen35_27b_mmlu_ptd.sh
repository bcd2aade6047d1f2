#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Qwen3.5-27B (Qwen/Qwen3.5-27B, its text model): 64 layers, every 4th gated softmax attention (full_attention_interval 4: 48 gated DeltaNet, 16 attention), all with a dense SwiGLU MLP of 17408, hidden 5120; attention 24 heads / 4 KV heads of 256, a sigmoid output gate, zero-centred per-head q/k RMSNorm, a quarter of each head rotated (partial_rotary_factor 0.25; the interleaved multimodal sections [11, 11, 10] see one position for text), rope theta 10000000; gated DeltaNet 16 key heads / 48 value heads of 128, conv 4; zero-centred RMSNorm 1e-6, vocab 248320, untied, 262144 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (ckpt_convert_qwen35_27b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/qwen3_5_text/evaluate_qwen35_27b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_5_text/evaluate_qwen35_27b_mmlu_ptd.sh     # seconds on the CPU: a tiny random qwen3_5_text model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/qwen3_5_text/evaluate_qwen35_27b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen35-27b-mcore-tp4pp1}    # ckpt_convert_qwen35_27b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/qwen35-27b-mcore-tp4pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-27B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen35_27b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3_5_text HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 32, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 4, "linear_num_value_heads": 12, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "mrope_interleaved": true, "mrope_section": [2, 1, 1]}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'

recipe_evaluate mmlu

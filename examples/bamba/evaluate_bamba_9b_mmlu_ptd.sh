#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Bamba-9B (ibm-ai-platform/Bamba-9B): 32 HF layers, each a mixer then a SwiGLU MLP (our 64 pattern letters): Mamba2 in 29, attention in layers 9, 18 and 27 (32 heads / 8 KV heads of 128, half of each head rotated, rope theta 10000); hidden 4096, MLP 14336; Mamba2 d_inner 8192 (expand 2) in 128 heads of 64, 1 B/C group, state 128, conv 4 with bias, SSD chunk 256, dt unclamped; no linear biases; RMSNorm 1e-5, vocab 128256, untied embeddings, 262144 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_bamba_9b_hf2mcore.sh), bf16.
#   bash examples/bamba/evaluate_bamba_9b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bamba/evaluate_bamba_9b_mmlu_ptd.sh     # seconds on the CPU: a tiny random bamba model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/bamba/evaluate_bamba_9b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/bamba-9b-mcore-tp4pp1}    # ckpt_convert_bamba_9b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Bamba-9B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/bamba_9b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bamba HF_CONFIG='{"num_hidden_layers": 4, "attn_layer_indices": [1], "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "attention_bias": false, "mlp_bias": false, "z_loss_coefficient": 0.0, "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'

recipe_evaluate mmlu

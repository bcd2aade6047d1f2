#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Olmo-Hybrid-7B (allenai/Olmo-Hybrid-7B): 32 layers, every 4th softmax attention (8), the others gated DeltaNet (24), each with a SwiGLU MLP of 11008, hidden 3840; attention 30 heads of 128 (no GQA), Olmo3's output norms only and q/k RMSNorm over all heads' channels, no positions (rope_theta null); DeltaNet layers with Llama's pre-norms, 30 key / 30 value heads of 96 / 192, conv 4, beta in (0, 2) (linear_allow_neg_eigval), gated output norm eps 1e-5; RMSNorm 1e-6, vocab 100352, untied, 65536 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (evaluation runs at PP 1), bf16.
#   bash examples/olmo_hybrid/evaluate_olmo_hybrid_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo_hybrid/evaluate_olmo_hybrid_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random olmo_hybrid model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/olmo_hybrid/evaluate_olmo_hybrid_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo-hybrid-7b-mcore-tp2pp1}    # ckpt_convert_olmo_hybrid_7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/olmo-hybrid-7b-mcore-tp2pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-Hybrid-7B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/olmo_hybrid_7b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo_hybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_conv_kernel_dim": 4, "linear_allow_neg_eigval": true, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": null}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'

recipe_evaluate mmlu

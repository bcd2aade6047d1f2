#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# the text model of Llama-4-Scout-17B-16E (meta-llama/Llama-4-Scout-17B-16E config.json, text_config): 48 layers, hidden 5120, dense FFN 16384 (unused: every layer is MoE), 40 heads / 8 KV heads of dim 128, vocab 202048, RMSNorm 1e-5, untied embeddings; RoPE theta 500000 on interleaved pairs with llama3 scaling (factor 8, low 1, high 4, original 8192); every 4th layer (3, 7, ..., 47) without RoPE and attending fully, its queries scaled by 1 + 0.1 ln(1 + floor((p + 1) / 8192)); the other layers attend within chunks of 8192 tokens with weightless q/k RMS norms; 16 experts of FFN 8192, top-1 with the sigmoid of the chosen logit scaling the expert input, plus one shared expert of FFN 8192.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 2 node(s) x 8 devices, TP=4 PP=1 EP=4 (ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/llama4/evaluate_llama4_scout_17b_16e_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama4/evaluate_llama4_scout_17b_16e_mmlu_ptd.sh     # seconds on the CPU: a tiny random llama4_text model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/llama4/evaluate_llama4_scout_17b_16e_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/llama4-scout-17b-16e-mcore-tp4pp1ep4}    # ckpt_convert_llama4_scout_17b_16e_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/llama4-scout-17b-16e-mcore-tp4pp1ep4
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-4-Scout-17B-16E}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/llama4_scout_17b_16e/}

TP=${TP:-4} PP=${PP:-1} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama4_text HF_CONFIG='{"num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "use_qk_norm": true, "attention_chunk_size": 8192, "attn_temperature_tuning": true, "floor_scale": 8192, "attn_scale": 0.1, "no_rope_layer_interval": 2, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# phi-2 (microsoft/phi-2 config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, rope theta 10000 on the first 40% of each head's dims, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear and the untied output layer, GELU (tanh).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_phi2_2_7b_hf2mcore.sh), bf16.
#   bash examples/phi/evaluate_phi2_2_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi/evaluate_phi2_2_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random phi model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/phi/evaluate_phi2_2_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi2-2-7b-mcore-tp2pp1}    # ckpt_convert_phi2_2_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/phi-2}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/phi2_2_7b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "hidden_act": "gelu_new", "layer_norm_eps": 1e-05, "qk_layernorm": false, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

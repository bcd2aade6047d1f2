#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# pythia-1.4b (EleutherAI/pythia-1.4b config.json): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50304, rope theta 10000 on the first 25% of each head's dims, two LayerNorms (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear, GELU, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_pythia_1_4b_hf2mcore.sh), bf16.
#   bash examples/gpt_neox/evaluate_pythia_1_4b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neox/evaluate_pythia_1_4b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gpt_neox model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gpt_neox/evaluate_pythia_1_4b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/pythia-1-4b-mcore-tp2pp1}    # ckpt_convert_pythia_1_4b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/pythia-1.4b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/pythia_1_4b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neox HF_CONFIG='{"rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true, "attention_bias": true, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_evaluate mmlu

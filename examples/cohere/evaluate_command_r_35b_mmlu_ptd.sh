#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# c4ai-command-r-v01 (CohereForAI/c4ai-command-r-v01 config.json): 40 layers, hidden 8192, FFN 22528, 64 heads (MHA), vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, interleaved RoPE theta 8000000, logits times 0.0625, no q/k norms (use_qk_norm false), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (ckpt_convert_command_r_35b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/cohere/evaluate_command_r_35b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere/evaluate_command_r_35b_mmlu_ptd.sh     # seconds on the CPU: a tiny random cohere model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/cohere/evaluate_command_r_35b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/command-r-35b-mcore-tp8pp1}    # ckpt_convert_command_r_35b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/command-r-35b-mcore-tp8pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r-v01}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/command_r_35b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere HF_CONFIG='{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "rope_theta": 8000000.0, "use_qk_norm": false, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_evaluate mmlu

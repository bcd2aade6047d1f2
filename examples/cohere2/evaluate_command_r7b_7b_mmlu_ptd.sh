#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# c4ai-command-r7b-12-2024 (CohereForAI/c4ai-command-r7b-12-2024 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers with interleaved RoPE theta 50000, every 4th layer full attention without RoPE, logits times 0.25, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_command_r7b_7b_hf2mcore.sh), bf16.
#   bash examples/cohere2/evaluate_command_r7b_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere2/evaluate_command_r7b_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random cohere2 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/cohere2/evaluate_command_r7b_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/command-r7b-7b-mcore-tp8pp1}    # ckpt_convert_command_r7b_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r7b-12-2024}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/command_r7b_7b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere2 HF_CONFIG='{"layer_norm_eps": 1e-05, "logit_scale": 0.25, "rope_theta": 50000.0, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 132096}'

recipe_evaluate mmlu

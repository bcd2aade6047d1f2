#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# xLSTM-7B (NX-AI/xLSTM-7b): 32 blocks, each an mLSTM (8 heads, q/k 256 and v 512 wide per head: a matrix memory with exponential input and sigmoid forget gates capped at 15, a per-head LayerNorm, a sigmoid output gate) then a SwiGLU MLP of 10944; hidden 4096, RMSNorm 1e-6, no positions, vocab 50304, untied, logits capped at 30.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (evaluation runs at PP 1), bf16.
#   bash examples/xlstm/evaluate_xlstm_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xlstm/evaluate_xlstm_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random xlstm model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/xlstm/evaluate_xlstm_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/xlstm-7b-mcore-tp2pp1}    # ckpt_convert_xlstm_7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/xlstm-7b-mcore-tp2pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xLSTM-7b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/xlstm_7b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xlstm HF_CONFIG='{"num_hidden_layers": 2, "num_heads": 8, "qk_dim_factor": 0.5, "v_dim_factor": 1.0, "ffn_proj_factor": 2.667, "ffn_round_up_to_multiple_of": 64, "gate_soft_cap": 15.0, "output_logit_soft_cap": 30.0, "norm_eps": 1e-06, "eps": 1e-06, "use_bias": false, "weight_mode": "single", "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}'

recipe_evaluate mmlu

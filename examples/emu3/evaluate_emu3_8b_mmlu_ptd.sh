#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Emu3 text model (8B) (Emu3-community/Emu3-Chat-hf config.json; see examples/README.md): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 184622 (text and image tokens), rope theta 1e6, RMSNorm 1e-5, no biases, untied embeddings; the text-only Emu3ForCausalLM (model_type emu3_text_model).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_emu3_8b_hf2mcore.sh), bf16.
#   bash examples/emu3/evaluate_emu3_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/emu3/evaluate_emu3_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random emu3_text_model model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/emu3/evaluate_emu3_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/emu3-8b-mcore-tp8pp1}    # ckpt_convert_emu3_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Emu3-Chat-text}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/emu3_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=emu3_text_model HF_CONFIG='{"rope_theta": 1000000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 9216, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "attention_dropout": 0.0}'

recipe_evaluate mmlu

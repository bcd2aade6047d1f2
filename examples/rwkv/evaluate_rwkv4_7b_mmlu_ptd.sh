#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# RWKV-4-Pile-7B (RWKV/rwkv-4-7b-pile): 32 blocks, each time mixing (token shift, the WKV recurrence with a learned decay and bonus per channel, 4096 wide) then channel mixing (token shift, squared ReLU of 16384, a sigmoid receptance): our 64 pattern letters WC; hidden 4096, LayerNorm 1e-5 with biases and one on the embeddings, no positions, vocab 50277, untied, 1024-token context.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question). RWKV-4 saw 1024-token contexts: five-shot prompts longer than that are cut.
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_rwkv4_7b_hf2mcore.sh), bf16.
#   bash examples/rwkv/evaluate_rwkv4_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/rwkv/evaluate_rwkv4_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random rwkv model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/rwkv/evaluate_rwkv4_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/rwkv4-7b-mcore-tp2pp1}    # ckpt_convert_rwkv4_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/rwkv-4-7b-pile}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/rwkv4_7b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=rwkv HF_CONFIG='{"num_hidden_layers": 2, "context_length": 1024, "layer_norm_epsilon": 1e-05, "rescale_every": 6, "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 0}'

recipe_evaluate mmlu

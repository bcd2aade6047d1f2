#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Nemotron-H-8B-Base-8K (nvidia/Nemotron-H-8B-Base-8K): 52 layers in Megatron-core's hybrid layout (24 Mamba2, 4 attention, 24 squared-ReLU MLP), hidden 4096, FFN 21504, 32 heads / 8 KV heads of 128 without position embedding, Mamba2 128 heads of 64, 8 groups, state 128, conv 4, chunk 128, vocab 131072, RMSNorm 1e-5, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_nemotron_h_8b_hf2mcore.sh), bf16.
#   bash examples/nemotron_h/evaluate_nemotron_h_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron_h/evaluate_nemotron_h_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random nemotron_h model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/nemotron_h/evaluate_nemotron_h_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/nemotron-h-8b-mcore-tp2pp1}    # ckpt_convert_nemotron_h_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-8B-Base-8K}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/nemotron_h_8b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nemotron_h HF_CONFIG='{"layers_block_type": ["mamba", "mlp", "attention", "mlp"], "head_dim": 32, "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4, "chunk_size": 128, "use_conv_bias": true, "use_bias": false, "mamba_hidden_act": "silu", "time_step_min": 0.001, "mlp_hidden_act": "relu2", "mlp_bias": false, "attention_bias": false, "layer_norm_epsilon": 1e-05, "residual_in_fp32": false, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Qwen3.5-35B-A3B (Qwen/Qwen3.5-35B-A3B, its text model): 40 layers, every 4th gated softmax attention (full_attention_interval 4: 30 gated DeltaNet, 10 attention), all MoE, hidden 2048; attention 16 heads / 2 KV heads of 256, a sigmoid output gate, zero-centred per-head q/k RMSNorm, a quarter of each head rotated (partial_rotary_factor 0.25; the interleaved multimodal sections [11, 11, 10] see one position for text), rope theta 10000000; gated DeltaNet 16 key heads / 32 value heads of 128, conv 4; 256 experts of FFN 512, top-8 of the softmax over all experts, always renormalised, a shared expert of 512 gated by sigmoid, aux loss 0.001; zero-centred RMSNorm 1e-6, vocab 248320, untied, 262144 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (ckpt_convert_qwen35_35b_a3b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/qwen3_5_moe_text/evaluate_qwen35_35b_a3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_5_moe_text/evaluate_qwen35_35b_a3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random qwen3_5_moe_text model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/qwen3_5_moe_text/evaluate_qwen35_35b_a3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen35-35b-a3b-mcore-tp1pp1ep8}    # ckpt_convert_qwen35_35b_a3b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/qwen35-35b-a3b-mcore-tp1pp1ep8
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-35B-A3B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen35_35b_a3b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3_5_moe_text HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 32, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 4, "linear_num_value_heads": 8, "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "router_aux_loss_coef": 0.001, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "mrope_interleaved": true, "mrope_section": [2, 1, 1]}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash-Base config.json; see examples/README.md): compressed attention in 43 layers (2 sliding-window-only, then CSA and HCA alternating: entries of 4 overlapping tokens picked top-512 by a lightning indexer of 64 heads of 128, or of 128 tokens all kept; a window of 128), hidden 4096, 64 heads sharing one key/value head of 512 (q latent 1024, RoPE on its last 64 dims, interleaved), grouped output projection (8 groups of rank 1024), per-head attention sinks, 4 hyper-connection streams (20 Sinkhorn steps), vocab 129280, RoPE 10000 on the sliding layers and 160000 with YaRN (factor 16, original 65536) on the compressed ones, RMSNorm 1e-6, untied; 256 experts of FFN 2048, top-6 (sqrtsoftplus with the aux-loss-free expert bias, renormalised, times 1.5; the first 3 layers hash-routed by token id), 1 shared expert, SwiGLU clamped at 10, aux loss 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=1 PP=1 EP=32 ETP=1 (ckpt_convert_deepseek4_flash_hf2mcore.sh at TP=1 PP=1 NUM_LAYER_LIST=: inference.py loads a TP 1 conversion: whole experts over TP ranks (ETP=1) need sequence parallelism, which a one-token decode step cannot split; evaluation.py runs at PP 1), bf16.
#   bash examples/deepseek4/evaluate_deepseek4_flash_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek4/evaluate_deepseek4_flash_mmlu_ptd.sh     # seconds on the CPU: a tiny random deepseek_v4 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/deepseek4/evaluate_deepseek4_flash_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/deepseek4-flash-mcore-tp1pp1ep32}    # ckpt_convert_deepseek4_flash_hf2mcore.sh run with TP=1 PP=1 NUM_LAYER_LIST= CKPT_SAVE_DIR=./model_weights/deepseek4-flash-mcore-tp1pp1ep32
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V4-Flash-Base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/deepseek4_flash/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-32} ETP=1

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v4 HF_CONFIG='{"n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 32, "head_dim": 32, "q_lora_rank": 48, "num_key_value_heads": 1, "partial_rotary_factor": 0.125, "sliding_window": 8, "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 8, "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}, "hc_mult": 4, "hc_sinkhorn_iters": 20, "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "num_hash_layers": 1, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 1048576, "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536, "beta_fast": 32.0, "beta_slow": 1.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" ${ETP:+--expert-tensor-parallel-size "$ETP"}
ARGS

recipe_evaluate mmlu

#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# GLM-5 (zai-org/GLM-5, transformers' GlmMoeDsaConfig defaults; see examples/README.md): DeepSeek-V3.2's design: DeepSeek Sparse Attention with a lightning indexer of 32 heads of 128 on interleaved RoPE keeping each query's top-2048 keys (every layer computes its own top-k); 78 layers, hidden 6144, dense FFN 12288 (first 3 layers), 64 heads (MLA: q latent 2048, kv latent 512, q/k 192 + rope 64, v 256), vocab 154880, rope theta 10000 (unverified), interleaved RoPE, RMSNorm 1e-5 (latent and indexer norms 1e-6), untied; 256 experts of FFN 2048, top-8 (sigmoid with the aux-loss-free expert bias, one group, renormalised, times 2.5), 1 shared expert, sequence aux loss 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=1 PP=1 EP=32 ETP=1 (ckpt_convert_glm5_744b_hf2mcore.sh at TP=1 PP=1 NUM_LAYER_LIST=: inference.py loads a TP 1 conversion: whole experts over TP ranks (ETP=1) need sequence parallelism, which a one-token decode step cannot split; evaluation.py runs at PP 1), bf16.
#   bash examples/glm5/evaluate_glm5_744b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm5/evaluate_glm5_744b_mmlu_ptd.sh     # seconds on the CPU: a tiny random glm_moe_dsa model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/glm5/evaluate_glm5_744b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm5-744b-mcore-tp1pp1ep32}    # ckpt_convert_glm5_744b_hf2mcore.sh run with TP=1 PP=1 NUM_LAYER_LIST= CKPT_SAVE_DIR=./model_weights/glm5-744b-mcore-tp1pp1ep32
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-5}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/glm5_744b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-32} ETP=1

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm_moe_dsa HF_CONFIG='{"n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 2.5, "num_nextn_predict_layers": 1, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 202752, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" ${ETP:+--expert-tensor-parallel-size "$ETP"}
ARGS

recipe_evaluate mmlu

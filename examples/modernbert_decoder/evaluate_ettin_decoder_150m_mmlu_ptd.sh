#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# ettin-decoder-150m (jhu-clsp/ettin-decoder-150m: ModernBERT-base sizes, as transformers' ModernBertDecoderConfig() defaults): 22 layers, hidden 768, FFN 1152, 12 heads (MHA), vocab 50368, bias-free LayerNorms (eps 1e-5) on the embeddings, before attention (not in layer 0) and MLP, at the end and in the prediction head (dense + GELU + LayerNorm), gated GELU MLP, no linear biases, every 3rd layer (0, 3, ...) global with RoPE theta 160000, the others a causal window of 64 tokens (local_attention 128 / 2) with theta 10000, tied embeddings with a decoder bias.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_ettin_decoder_150m_hf2mcore.sh), bf16.
#   bash examples/modernbert_decoder/evaluate_ettin_decoder_150m_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/modernbert_decoder/evaluate_ettin_decoder_150m_mmlu_ptd.sh     # seconds on the CPU: a tiny random modernbert-decoder model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/modernbert_decoder/evaluate_ettin_decoder_150m_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ettin-decoder-150m-mcore-tp1pp1}    # ckpt_convert_ettin_decoder_150m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ettin-decoder-150m}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ettin_decoder_150m/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=modernbert-decoder HF_CONFIG='{"num_key_value_heads": 4, "norm_eps": 1e-05, "norm_bias": false, "local_attention": 16, "global_attn_every_n_layers": 3, "hidden_activation": "gelu", "classifier_activation": "gelu", "decoder_bias": true, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_evaluate mmlu

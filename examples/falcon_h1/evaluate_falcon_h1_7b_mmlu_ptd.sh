#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Falcon-H1-7B (tiiuae/Falcon-H1-7B-Base): 44 HF layers, each a Mamba2 and an attention side by side on one norm, then a SwiGLU MLP (our 88 pattern letters H-); hidden 3072, MLP 12288; attention 12 heads / 2 KV heads of 128, rope theta 1e11; Mamba2 24 heads of 128 (mamba_d_ssm 3072), 1 B/C group, state 256, conv 4 with bias, SSD chunk 256, gated RMSNorm (gate then norm); muP scales on the embeddings, logits, keys, both mixers and the MLP; no linear biases; RMSNorm 1e-5, vocab 130049, untied embeddings, 262144 positions.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_falcon_h1_7b_hf2mcore.sh), bf16.
#   bash examples/falcon_h1/evaluate_falcon_h1_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon_h1/evaluate_falcon_h1_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random falcon_h1 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/falcon_h1/evaluate_falcon_h1_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/falcon-h1-7b-mcore-tp4pp1}    # ckpt_convert_falcon_h1_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Falcon-H1-7B-Base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/falcon_h1_7b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon_h1 HF_CONFIG='{"num_hidden_layers": 4, "mamba_d_ssm": 128, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "mamba_rms_norm": true, "mamba_norm_before_gate": false, "projectors_bias": false, "attention_bias": false, "mlp_bias": false, "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 100000000000.0}, "tie_word_embeddings": false, "max_position_embeddings": 262144, "embedding_multiplier": 5.656854249492381, "lm_head_multiplier": 0.013020833333333334, "key_multiplier": 0.030690398488999456, "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.10416666666666667, "ssm_in_multiplier": 0.4166666666666667, "ssm_out_multiplier": 0.11785113019775793, "mlp_multipliers": [0.2946278254943948, 0.032552083333333336], "ssm_multipliers": [0.3535533905932738, 0.25, 0.1767766952966369, 0.5, 0.3535533905932738]}'

recipe_evaluate mmlu

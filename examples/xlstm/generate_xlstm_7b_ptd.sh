#!/usr/bin/env bash
# Generate text with xLSTM-7B (NX-AI/xLSTM-7b): 32 blocks, each an mLSTM (8 heads, q/k 256 and v 512 wide per head: a matrix memory with exponential input and sigmoid forget gates capped at 15, a per-head LayerNorm, a sigmoid output gate) then a SwiGLU MLP of 10944; hidden 4096, RMSNorm 1e-6, no positions, vocab 50304, untied, logits capped at 30.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=2 PP=2 (the layout of ckpt_convert_xlstm_7b_hf2mcore.sh), bf16.
#   bash examples/xlstm/generate_xlstm_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xlstm/generate_xlstm_7b_ptd.sh     # seconds on the CPU: a tiny random xlstm model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/xlstm/generate_xlstm_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/xlstm-7b-mcore-tp2pp2}    # ckpt_convert_xlstm_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xLSTM-7b}

TP=${TP:-2} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xlstm HF_CONFIG='{"num_hidden_layers": 2, "num_heads": 8, "qk_dim_factor": 0.5, "v_dim_factor": 1.0, "ffn_proj_factor": 2.667, "ffn_round_up_to_multiple_of": 64, "gate_soft_cap": 15.0, "output_logit_soft_cap": 30.0, "norm_eps": 1e-06, "eps": 1e-06, "use_bias": false, "weight_mode": "single", "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}'

recipe_generate

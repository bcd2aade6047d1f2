#!/usr/bin/env bash
# Generate text with RecurrentGemma-2B (google/recurrentgemma-2b, Griffin): 26 layers cycling recurrent, recurrent, local attention (18 recurrent blocks, 8 attention), hidden 2560; recurrent blocks: RG-LRU width 2560 in 10 gate blocks, conv 4, a GELU-gated branch; attention: 10 heads of 256, 1 KV head, a window of 2048, half of each head rotated (theta 10000), a bias on the output projection; GELU(tanh)-gated MLP of 7680 with biases; RMSNorm(1 + w) 1e-6, embeddings times sqrt(2560) in bf16 (50.5), logits capped at 30, vocab 256000, tied.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_recurrentgemma_2b_hf2mcore.sh), bf16.
#   bash examples/recurrent_gemma/generate_recurrentgemma_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/recurrent_gemma/generate_recurrentgemma_2b_ptd.sh     # seconds on the CPU: a tiny random recurrent_gemma model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/recurrent_gemma/generate_recurrentgemma_2b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/recurrentgemma-2b-mcore-tp2pp1}    # ckpt_convert_recurrentgemma_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/recurrentgemma-2b}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=recurrent_gemma HF_CONFIG='{"num_hidden_layers": 4, "_block_types": ["recurrent", "recurrent", "attention"], "num_key_value_heads": 1, "conv1d_width": 4, "attention_window_size": 8, "logits_soft_cap": 30.0, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "attention_bias": false, "embeddings_scale_by_sqrt_dim": true, "hidden_activation": "gelu_pytorch_tanh", "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1}'

recipe_generate

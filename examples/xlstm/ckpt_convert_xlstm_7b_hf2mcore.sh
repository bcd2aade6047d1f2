#!/usr/bin/env bash
# Convert xLSTM-7B from Hugging Face safetensors (transformers' xLSTMForCausalLM layout, model_type xlstm, weight_mode
# single) to our Megatron (mcore) layout at TP=2 PP=2 (the layout of pretrain_xlstm_7b_ptd.sh); each HF block becomes one
# mLSTM layer with its MLP, q/k/v/o fused into in_proj and the two gates into gate_proj, the widths read from config.json.
#   bash examples/xlstm/ckpt_convert_xlstm_7b_hf2mcore.sh
#   SMOKE=1 bash examples/xlstm/ckpt_convert_xlstm_7b_hf2mcore.sh   # a tiny random xlstm model (2 blocks), TP=2 PP=2
#   DRY_RUN=1 bash examples/xlstm/ckpt_convert_xlstm_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/xLSTM-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/xlstm-7b-mcore-tp2pp2}
TP=${TP:-2} PP=${PP:-2}
MODEL_TYPE_HF=xlstm

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xlstm HF_CONFIG='{"num_hidden_layers": 2, "num_heads": 8, "qk_dim_factor": 0.5, "v_dim_factor": 1.0, "ffn_proj_factor": 2.667, "ffn_round_up_to_multiple_of": 64, "gate_soft_cap": 15.0, "output_logit_soft_cap": 30.0, "norm_eps": 1e-06, "eps": 1e-06, "use_bias": false, "weight_mode": "single", "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}'

recipe_hf2mcore

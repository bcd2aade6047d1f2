#!/usr/bin/env bash
# Convert Falcon-H1-7B from Hugging Face safetensors (transformers' FalconH1ForCausalLM layout, model_type falcon_h1)
# to our Megatron (mcore) layout at TP=4 PP=1 (the layout of pretrain_falcon_h1_7b_ptd.sh); each HF layer becomes two
# pattern letters (its Mamba2 beside attention, its MLP), and the Mamba2 and attention sizes, the gated norm and the
# muP scales are read from its config.json.
#   bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_hf2mcore.sh
#   SMOKE=1 bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_hf2mcore.sh   # a tiny random falcon_h1 model (4 layers, the 7B's scales), TP=2 PP=2
#   DRY_RUN=1 bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Falcon-H1-7B-Base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/falcon-h1-7b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=falcon_h1

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json (4 Mamba
# heads of 32 over the tiny hidden 64)
HF_MODEL_TYPE=falcon_h1 HF_CONFIG='{"num_hidden_layers": 4, "mamba_d_ssm": 128, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "mamba_rms_norm": true, "mamba_norm_before_gate": false, "projectors_bias": false, "attention_bias": false, "mlp_bias": false, "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 100000000000.0}, "tie_word_embeddings": false, "max_position_embeddings": 262144, "embedding_multiplier": 5.656854249492381, "lm_head_multiplier": 0.013020833333333334, "key_multiplier": 0.030690398488999456, "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.10416666666666667, "ssm_in_multiplier": 0.4166666666666667, "ssm_out_multiplier": 0.11785113019775793, "mlp_multipliers": [0.2946278254943948, 0.032552083333333336], "ssm_multipliers": [0.3535533905932738, 0.25, 0.1767766952966369, 0.5, 0.3535533905932738]}'

recipe_hf2mcore

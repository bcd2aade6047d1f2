#!/usr/bin/env bash
# Convert Ling-3.0-Flash from Hugging Face safetensors (Ling's layout, model_type bailing_hybrid, as transformers'
# save_pretrained writes it too: every mixer under attention., the experts one tensor each) to our Megatron (mcore)
# layout at TP=1 PP=3 EP=8 (the layout of pretrain_ling_3_flash_ptd.sh); the layer pattern, KDA, MLA and MoE sizes are
# read from its config.json, and its MTP layer (model.layers.42.*) is left out with a note (transformers does not load it).
#   bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_hf2mcore.sh
#   SMOKE=1 bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_hf2mcore.sh   # a tiny random bailing_hybrid model (3 KDA layers, MLA), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Ling-3.0-Flash}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ling-3-flash-mcore-tp1pp3ep8}
TP=${TP:-1} PP=${PP:-3} EP=${EP:-8}
MODEL_TYPE_HF=bailing_hybrid

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (3 KDA layers then one MLA layer)
HF_MODEL_TYPE=bailing_hybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 16, "short_conv_kernel_size": 4, "kda_safe_gate": true, "kda_lower_bound": -5.0, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "num_experts": 16, "num_experts_per_token": 4, "num_shared_experts": 1, "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_renormalize": true, "routed_scaling_factor": 2.5, "num_expert_group": 4, "topk_group": 2, "rope_theta": 6000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "model_max_length": 262144, "num_nextn_predict_layers": 1, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore

#!/usr/bin/env bash
# Convert Qwen1.5-MoE-A2.7B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=4
# (the layout of pretrain_qwen15_moe_a27b_ptd.sh).
#   bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_hf2mcore.sh   # a tiny random qwen2_moe model, TP=2 PP=2 EP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen1.5-MoE-A2.7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen15-moe-a27b-mcore-tp1pp1ep4}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-4}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup qwen2_moe '{"num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "qkv_bias": true, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf qwen2_moe \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" --target-expert-parallel-size "$EP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

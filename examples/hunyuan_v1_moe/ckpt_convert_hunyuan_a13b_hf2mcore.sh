#!/usr/bin/env bash
# Convert Hunyuan-A13B-Pretrain from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=8
# (the layout of pretrain_hunyuan_a13b_ptd.sh).
#   bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_hf2mcore.sh
#   SMOKE=1 bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_hf2mcore.sh   # a tiny random hunyuan_v1_moe model, TP=2 PP=2 EP=2
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Hunyuan-A13B-Pretrain}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/hunyuan-a13b-pretrain-mcore-tp2pp2ep8}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-8}
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
hf2mcore_setup hunyuan_v1_moe '{"num_experts": 64, "moe_topk": [8, 8], "num_shared_expert": [1, 1], "use_mixed_mlp_moe": true, "use_qk_norm": true, "use_cla": false, "rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

python "$REPO_ROOT/tools/convert_ckpt.py" \
    --load-model-type hf --save-model-type mg --model-type-hf hunyuan-moe \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" --target-expert-parallel-size "$EP" \
    --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"

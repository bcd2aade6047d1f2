"""Invalid combinations of the model zoo's behaviour flags are one-line errors naming the flags.

Checked on ``TransformerConfig`` (what ``--use-checkpoint-args``, the
converter and ``transformer_config_from_args`` all build) and through the
command line, where ``validate_args`` turns them into ArgumentErrors.

    python -m pytest tests/models/test_zoo_flags.py -q
"""
from __future__ import annotations

import re

from typing import Any, Dict, List

import pytest

from core.transformer.config import TransformerConfig
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

SMALL = dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128, normalization="RMSNorm")
ARGV = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "16",
        "--vocab-size", "128", "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", "1",
        "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
        "--normalization", "RMSNorm"]

# (config overrides, the same as flags, a fragment of the message)
BAD: List[tuple] = [
    (dict(qk_layernorm_full_width=True), ["--qk-layernorm-full-width"], "--qk-layernorm-full-width needs --qk-layernorm"),
    (dict(qk_layernorm=True, qk_layernorm_full_width=True, normalization="LayerNorm"),
     ["--qk-layernorm", "--qk-layernorm-full-width", "--normalization", "LayerNorm"],
     "--qk-layernorm-full-width needs --qk-layernorm and --normalization RMSNorm"),
    (dict(softmax_scale=0.2, query_pre_attn_scalar=16.0), ["--softmax-scale", "0.2", "--query-pre-attn-scalar", "16"],
     "--softmax-scale and --query-pre-attn-scalar both set the attention scale"),
    (dict(residual_multiplier=-1.0), ["--residual-multiplier", "-1"], "--residual-multiplier -1.0 must be positive"),
    (dict(embedding_multiplier=0.0), ["--embedding-multiplier", "0"], "--embedding-multiplier 0.0 must be positive"),
    (dict(output_multiplier_scale=-2.0), ["--output-multiplier-scale", "-2"],
     "--output-multiplier-scale -2.0 must be positive"),
    (dict(qkv_clip=0.0), ["--qkv-clip", "0"], "--qkv-clip 0.0 must be positive"),
    (dict(non_parametric_norm=True, apply_layernorm_1p=True), ["--non-parametric-norm", "--apply-layernorm-1p"],
     "--non-parametric-norm has no weight for --apply-layernorm-1p"),
    (dict(local_rotary_base=100.0), ["--local-rotary-base", "100"],
     "--local-rotary-base 100.0 must be positive and needs --sliding-window"),
    (dict(no_rope_layers=(0, 2)), ["--no-rope-layers", "0", "2"], "--no-rope-layers [2] out of range [0, 2)"),
    (dict(swiglu=True, squared_relu=True), ["--swiglu", "--squared-relu"],
     "--swiglu and --squared-relu both set the MLP activation"),
    (dict(relu=True, gelu_tanh=True), ["--relu", "--gelu-tanh"], "--gelu-tanh has no effect with --relu"),
    (dict(parallel_residual_shared_norm=True), ["--parallel-residual-shared-norm"],
     "--parallel-residual-shared-norm needs --parallel-residual"),
    (dict(parallel_residual=True, post_norm_only=True), ["--parallel-residual", "--post-norm-only"],
     "--parallel-residual needs the norms before attention and MLP"),
    (dict(layernorm_bias=False), ["--no-layernorm-bias"], "--no-layernorm-bias needs --normalization LayerNorm"),
    (dict(sliding_window=4, full_attention_layers=(0, 3)), ["--sliding-window", "4", "--full-attention-layers", "0", "3"],
     "--full-attention-layers [3] out of range [0, 2)"),
    (dict(full_attention_layers=(1,)), ["--full-attention-layers", "1"], "--full-attention-layers needs --sliding-window"),
    (dict(attention_chunk_size=4, sliding_window=4), ["--attention-chunk-size", "4", "--sliding-window", "4"],
     "--attention-chunk-size excludes --sliding-window"),
    (dict(attention_chunk_size=0), ["--attention-chunk-size", "0"], "--attention-chunk-size 0 must be at least 1"),
    # state-space layers: ARGV/SMALL have 2 layers, hidden 64 (d_inner 128 with --mamba-expand 2)
    (dict(hybrid_override_pattern="MMM", position_embedding_type="none"),
     ["--hybrid-override-pattern", "MMM", "--position-embedding-type", "none"],
     "--hybrid-override-pattern 'MMM' has 3 letters and --num-layers is 2: give one letter per layer"),
    (dict(hybrid_override_pattern="MQ", position_embedding_type="none"),
     ["--hybrid-override-pattern", "MQ", "--position-embedding-type", "none"],
     "--hybrid-override-pattern 'MQ': unknown letter 'Q'; the letters are M a Mamba layer"),
    (dict(hybrid_override_pattern="MM"), ["--hybrid-override-pattern", "MM"],
     "has no attention layer ('*') to use a position embedding; set --position-embedding-type none"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_head_dim=48),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-head-dim", "48"],
     "--mamba-expand x --hidden-size (128) must be a multiple of --mamba-head-dim (48)"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_head_dim=32, mamba_num_groups=3),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-head-dim", "32",
      "--mamba-num-groups", "3"], "giving heads (4) divisible by --mamba-num-groups (3)"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_state_dim=0),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-state-dim", "0"],
     "--mamba-state-dim 0 must be positive"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_mixer_rms_eps=1e-6),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-mixer-rms-eps", "1e-6"],
     "--mamba-mixer-rms-eps/--mamba-mixer-rms-weights (norms on dt, B and C) apply to --mamba-version 1 only"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_version=1, mamba_heads=4,
          mamba_mixer_rms_eps=1e-6),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-version", "1",
      "--mamba-num-heads", "4", "--mamba-mixer-rms-eps", "1e-6"],
     "--mamba-mixer-rms-eps (norms on dt, B and C) with a multi-head Mamba1 (--mamba-num-heads) is not supported"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_dt_limit_min=0.5,
          mamba_dt_limit_max=0.1),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-dt-limit-min", "0.5",
      "--mamba-dt-limit-max", "0.1"], "--mamba-dt-limit-min 0.5 must be >= 0 and below --mamba-dt-limit-max 0.1"),
    (dict(dense_bias_layers=(2,)), ["--dense-bias-layers", "2"], "--dense-bias-layers [2] out of range [0, 2)"),
    (dict(dense_bias_layers=(1,), add_dense_bias=True), ["--dense-bias-layers", "1", "--add-dense-bias"],
     "--dense-bias-layers has no effect when every layer's attention output has a bias"),
    (dict(position_embedding_type="alibi", rope_scaling_type="linear", rope_scaling_factor=2.0),
     ["--position-embedding-type", "alibi", "--rope-scaling-type", "linear", "--rope-scaling-factor", "2"],
     "--position-embedding-type alibi has no rotary embedding for --rope-scaling-type"),
    (dict(position_embedding_type="alibi", rotary_percent=0.5, rotary_base=500.0),
     ["--position-embedding-type", "alibi", "--rotary-percent", "0.5", "--rotary-base", "500"],
     "--position-embedding-type alibi has no rotary embedding for --rotary-base, --rotary-percent"),
    (dict(alibi_bias_max=4.0), ["--alibi-bias-max", "4"], "--alibi-bias-max 4.0 needs --position-embedding-type alibi"),
    (dict(position_embedding_type="alibi", alibi_bias_max=0.0), ["--position-embedding-type", "alibi",
                                                                  "--alibi-bias-max", "0"],
     "--alibi-bias-max 0.0 must be positive"),
    (dict(qk_layernorm_after_rope=True), ["--qk-layernorm-after-rope"], "--qk-layernorm-after-rope needs --qk-layernorm"),
    (dict(qk_layernorm=True, qk_layernorm_full_width=True, qk_layernorm_after_rope=True),
     ["--qk-layernorm", "--qk-layernorm-full-width", "--qk-layernorm-after-rope"],
     "--qk-layernorm-after-rope needs --qk-layernorm (per-head norms, without --qk-layernorm-full-width)"),
    (dict(rope_scaling_type="yarn", rope_scaling_factor=0.5), ["--rope-scaling-type", "yarn", "--rope-scaling-factor",
                                                               "0.5"],
     "--rope-scaling-type yarn needs --rope-scaling-factor >= 1"),
    (dict(rope_ntk_alpha=10.0, rope_scaling_type="linear", rope_scaling_factor=2.0),
     ["--rope-ntk-alpha", "10", "--rope-scaling-type", "linear", "--rope-scaling-factor", "2"],
     "--rope-ntk-alpha 10.0 must be positive and excludes --rope-scaling-type"),
    (dict(attn_temperature_beta=0.1), ["--attn-temperature-beta", "0.1"],
     "--attn-temperature-beta and --attn-temperature-length go together"),
    (dict(attn_temperature_beta=0.1, attn_temperature_length=0),
     ["--attn-temperature-beta", "0.1", "--attn-temperature-length", "0"], "--attn-temperature-length 0 must be at least 1"),
    (dict(xielu=True, squared_relu=True), ["--xielu", "--squared-relu"], "--xielu is the MLP activation"),
    (dict(gated_mlp=True, swiglu=True), ["--gated-mlp", "--swiglu"], "--gated-mlp is implied by --swiglu/--geglu"),
    (dict(xielu=True, recompute_activation_function=True), ["--xielu", "--recompute-activation-function"],
     "--recompute-activation-function cannot recompute --xielu"),
    (dict(ffn_sub_norm=True, normalization="LayerNorm"), ["--ffn-sub-norm", "--normalization", "LayerNorm"],
     "--attn-sub-norm/--ffn-sub-norm need --normalization RMSNorm"),
    (dict(attn_sub_norm=True, non_parametric_norm=True), ["--attn-sub-norm", "--non-parametric-norm"],
     "--attn-sub-norm/--ffn-sub-norm need --normalization RMSNorm with weights"),
    (dict(non_parametric_qk_norm=True), ["--non-parametric-qk-norm"], "--non-parametric-qk-norm needs --qk-layernorm"),
    (dict(qk_layernorm_per_head_weights=True), ["--qk-layernorm-per-head-weights"],
     "--qk-layernorm-per-head-weights needs --qk-layernorm"),
    (dict(qk_layernorm=True, qk_layernorm_full_width=True, qk_layernorm_per_head_weights=True),
     ["--qk-layernorm", "--qk-layernorm-full-width", "--qk-layernorm-per-head-weights"],
     "--qk-layernorm-per-head-weights needs --qk-layernorm and excludes --qk-layernorm-full-width"),
    (dict(mamba_state_dim=64), ["--mamba-state-dim", "64"],
     "--mamba-state-dim applies to Mamba layers; add --hybrid-override-pattern with 'M' layers or drop it"),
    (dict(mamba_conv_bias=False), ["--disable-mamba-conv-bias"], "--disable-mamba-conv-bias applies to Mamba layers"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", swiglu=True),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--swiglu"],
     "--swiglu applies to attention or MLP layers, which --hybrid-override-pattern 'MM' has none of"),
    (dict(position_embedding_offset=2), ["--position-embedding-offset", "2"],
     "--position-embedding-offset 2 must be 0 or more and needs --position-embedding-type learned_absolute"),
    (dict(position_embedding_type="sinusoidal", hidden_size=2, num_attention_heads=1),
     ["--position-embedding-type", "sinusoidal", "--hidden-size", "2", "--num-attention-heads", "1"],
     "--position-embedding-type sinusoidal needs --hidden-size of 4 or more"),
    (dict(position_embedding_type="learned_absolute", rope_interleaved=True),
     ["--position-embedding-type", "learned_absolute", "--rope-interleaved"],
     "--position-embedding-type learned_absolute has no rotary embedding for --rope-interleaved"),
    (dict(first_input_layernorm=False, post_norm_only=True), ["--no-first-input-layernorm", "--post-norm-only"],
     "--no-first-input-layernorm drops a norm before attention"),
    (dict(prediction_head="tanh"), ["--prediction-head", "tanh"], "--prediction-head 'tanh' is not one of"),
    (dict(prediction_head_bias=True), ["--prediction-head-bias"], "--prediction-head-bias needs --prediction-head"),
    (dict(global_kv_channels=32), ["--global-kv-channels", "32"],
     "--global-kv-channels need --sliding-window and --local-rotary-base"),
    (dict(sliding_window=4, local_rotary_base=100.0, global_num_query_groups=3),
     ["--sliding-window", "4", "--local-rotary-base", "100", "--global-num-query-groups", "3"],
     "--global-num-query-groups 3 must divide --num-attention-heads (4)"),
    (dict(multi_latent_attention=True), ["--multi-latent-attention"],
     "--multi-latent-attention needs a positive --kv-lora-rank"),
    (dict(kv_lora_rank=8), ["--kv-lora-rank", "8"], "--q-lora-rank/--kv-lora-rank need --multi-latent-attention"),
    (dict(multi_latent_attention=True, kv_lora_rank=8, qk_pos_emb_head_dim=3),
     ["--multi-head-latent-attention", "--kv-lora-rank", "8", "--qk-rope-head-dim", "3"],
     "--qk-pos-emb-head-dim (3) positive and even"),
    (dict(multi_latent_attention=True, kv_lora_rank=8, q_lora_rank=0),
     ["--multi-latent-attention", "--kv-lora-rank", "8", "--q-lora-rank", "0"], "--q-lora-rank 0 must be positive"),
    (dict(multi_latent_attention=True, kv_lora_rank=8, qk_layernorm=True),
     ["--multi-latent-attention", "--kv-lora-rank", "8", "--qk-layernorm"],
     "--multi-latent-attention does not support --qk-layernorm"),
    (dict(mla_latent_norm_epsilon=1e-6), ["--mla-latent-norm-epsilon", "1e-6"],
     "--mla-latent-norm-epsilon needs --multi-latent-attention"),
    (dict(multi_latent_attention=True, kv_lora_rank=8, mla_latent_norm_epsilon=0.0),
     ["--multi-latent-attention", "--kv-lora-rank", "8", "--mla-latent-norm-epsilon", "0"],
     "--mla-latent-norm-epsilon 0.0 must be positive"),
    # mixture of experts (the router's settings)
    (dict(num_experts=8, add_bias_linear=False, moe_router_group_score_topk=1),
     ["--num-experts", "8", "--disable-bias-linear", "--moe-router-group-score-topk", "1"],
     "--moe-router-group-score-topk scores expert groups; add --moe-router-num-groups"),
    (dict(num_experts=8, moe_router_num_groups=4, moe_router_group_topk=1, moe_router_group_score_topk=3),
     ["--num-experts", "8", "--moe-router-num-groups", "4", "--moe-router-group-topk", "1",
      "--moe-router-group-score-topk", "3"],
     "--moe-router-group-score-topk 3 must be between 1 and the experts of a group (2)"),
    (dict(moe_router_topk=4), ["--moe-router-topk", "4"],
     "--moe-router-topk applies to MoE layers; add --num-experts or drop it"),
    (dict(num_experts=4, moe_router_topk=5), ["--num-experts", "4", "--moe-router-topk", "5"],
     "--moe-router-topk 5 must be between 1 and --num-experts 4"),
    (dict(num_experts=6, moe_router_num_groups=4, moe_router_group_topk=1),
     ["--num-experts", "6", "--moe-router-num-groups", "4", "--moe-router-group-topk", "1"],
     "--moe-router-num-groups 4 must divide --num-experts 6"),
    (dict(num_experts=8, moe_router_num_groups=4), ["--num-experts", "8", "--moe-router-num-groups", "4"],
     "--moe-router-num-groups and --moe-router-group-topk go together"),
    (dict(num_experts=8, moe_router_topk=2, moe_router_num_groups=4, moe_router_group_topk=3),
     ["--num-experts", "8", "--moe-router-topk", "2", "--moe-router-num-groups", "4", "--moe-router-group-topk", "3"],
     "--moe-router-group-topk 3 must divide --moe-router-topk 2"),
    (dict(num_experts=8, moe_router_topk=4, moe_router_num_groups=4, moe_router_group_topk=1),
     ["--num-experts", "8", "--moe-router-topk", "4", "--moe-router-num-groups", "4", "--moe-router-group-topk", "1"],
     "--moe-router-topk 4 exceeds the experts of --moe-router-group-topk 1 groups"),
    (dict(num_experts=4, norm_topk_prob=True), ["--num-experts", "4", "--norm-topk-prob"],
     "--norm-topk-prob has no effect on the top-k softmax"),
    (dict(num_experts=4, moe_router_pre_softmax=True, moe_router_score_function="sigmoid"),
     ["--num-experts", "4", "--moe-router-pre-softmax", "--moe-router-score-function", "sigmoid"],
     "--moe-router-pre-softmax needs --moe-router-score-function softmax"),
    (dict(num_experts=4, moe_router_score_function="sparsemixer", norm_topk_prob=True),
     ["--num-experts", "4", "--moe-router-score-function", "sparsemixer", "--norm-topk-prob"],
     "--norm-topk-prob does not apply to --moe-router-score-function sparsemixer"),
    (dict(num_experts=4, moe_router_score_function="sparsemixer", moe_router_sparsemixer_eps=-0.1),
     ["--num-experts", "4", "--moe-router-score-function", "sparsemixer", "--moe-router-sparsemixer-eps", "-0.1"],
     "--moe-router-sparsemixer-eps -0.1 must be 0 or more"),
    (dict(num_experts=4, moe_router_sparsemixer_eps=0.3), ["--num-experts", "4", "--moe-router-sparsemixer-eps", "0.3"],
     "--moe-router-sparsemixer-eps applies to --moe-router-score-function sparsemixer"),
    (dict(num_experts=4, moe_z_loss_coeff=0.0), ["--num-experts", "4", "--moe-z-loss-coeff", "0"],
     "--moe-z-loss-coeff 0.0 must be positive"),
    # GPT-OSS's flags: router bias, clamped SwiGLU, unrounded YaRN ramp
    (dict(add_router_bias=True), ["--add-router-bias"], "--add-router-bias applies to MoE layers"),
    (dict(quick_geglu=True, swiglu=True), ["--quick-geglu", "--swiglu"], "--quick-geglu is the MLP activation"),
    (dict(quick_geglu=True, gated_mlp=True), ["--quick-geglu", "--gated-mlp"],
     "--gated-mlp is implied by --swiglu/--geglu/--quick-geglu"),
    (dict(swiglu=True, activation_func_clamp_value=0.0), ["--swiglu", "--activation-func-clamp-value", "0"],
     "--activation-func-clamp-value 0.0 must be positive"),
    (dict(activation_func_clamp_value=7.0), ["--activation-func-clamp-value", "7"],
     "--activation-func-clamp-value/--glu-linear-offset act on a gated MLP"),
    (dict(glu_linear_offset=1.0), ["--glu-linear-offset", "1"],
     "--activation-func-clamp-value/--glu-linear-offset act on a gated MLP"),
    (dict(yarn_correction_range_round_to_int=False), ["--no-yarn-correction-range-round-to-int"],
     "--no-yarn-correction-range-round-to-int needs --rope-scaling-type yarn"),
    (dict(num_experts=4, add_bias_linear=False, moe_expert_capacity_factor=0.0),
     ["--num-experts", "4", "--disable-bias-linear", "--moe-expert-capacity-factor", "0"],
     "--moe-expert-capacity-factor 0.0 must be positive"),
    (dict(moe_grouped_gemm=True), ["--moe-grouped-gemm"], "--moe-grouped-gemm applies to MoE layers"),
    (dict(num_experts=4, add_bias_linear=False, shared_expert_gate=True),
     ["--num-experts", "4", "--disable-bias-linear", "--shared-expert-gate"],
     "--shared-expert-gate needs a shared expert"),
    (dict(num_experts=4, add_bias_linear=False, expert_tensor_parallel_size=2),
     ["--num-experts", "4", "--disable-bias-linear", "--expert-tensor-parallel-size", "2"],
     "--expert-tensor-parallel-size 2 must be 1 (whole experts) or --tensor-model-parallel-size 1"),
    (dict(moe_apply_probs_on_input=True), ["--moe-apply-probs-on-input"],
     "--moe-apply-probs-on-input applies to MoE layers"),
    (dict(num_experts=4, add_bias_linear=False, moe_apply_probs_on_input=True),
     ["--num-experts", "4", "--disable-bias-linear", "--moe-apply-probs-on-input"],
     "--moe-apply-probs-on-input needs --moe-router-topk 1 (got 2)"),
    (dict(attn_temperature_nope_layers=True, no_rope_layers=(1,)),
     ["--attn-temperature-nope-layers", "--no-rope-layers", "1"],
     "--attn-temperature-nope-layers needs --attn-temperature-beta/--attn-temperature-length and --no-rope-layers"),
    (dict(attn_temperature_nope_layers=True, attn_temperature_beta=0.1, attn_temperature_length=8),
     ["--attn-temperature-nope-layers", "--attn-temperature-beta", "0.1", "--attn-temperature-length", "8"],
     "--attn-temperature-nope-layers needs --attn-temperature-beta/--attn-temperature-length and --no-rope-layers"),
    (dict(qk_l2_norm=True, qk_layernorm=True), ["--qk-l2-norm", "--qk-layernorm"],
     "--qk-l2-norm is a q/k norm of its own; drop --qk-layernorm"),
]
# (config fields, flags, message, world size): expert-parallel sizes need that many processes
BAD_EXPERT_PARALLEL = [
    (dict(num_experts=6, add_bias_linear=False, expert_model_parallel_size=4),
     ["--num-experts", "6", "--disable-bias-linear", "--expert-model-parallel-size", "4", "--global-batch-size", "4"],
     "--num-experts 6 is not divisible by --expert-model-parallel-size 4", 4),
    (dict(expert_model_parallel_size=2), ["--expert-model-parallel-size", "2", "--global-batch-size", "2"],
     "--expert-model-parallel-size applies to MoE layers", 2),
    (dict(num_experts=4, add_bias_linear=False, tensor_model_parallel_size=2, expert_tensor_parallel_size=1,
          expert_model_parallel_size=2),
     ["--num-experts", "4", "--disable-bias-linear", "--tensor-model-parallel-size", "2",
      "--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "2"],
     "--expert-tensor-parallel-size 1 with --tensor-model-parallel-size > 1 needs --sequence-parallel", 2),
    (dict(num_experts=6, add_bias_linear=False, tensor_model_parallel_size=2, expert_tensor_parallel_size=1,
          sequence_parallel=True, expert_model_parallel_size=3),
     ["--num-experts", "6", "--disable-bias-linear", "--tensor-model-parallel-size", "2", "--sequence-parallel",
      "--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "3", "--global-batch-size", "3"],
     "--expert-tensor-parallel-size 1 needs --expert-model-parallel-size (3) to be a multiple of", 6),
]


@pytest.mark.parametrize("overrides, flags, message, world", BAD_EXPERT_PARALLEL,
                         ids=[b[2][:40] for b in BAD_EXPERT_PARALLEL])
def test_bad_expert_parallel_combination_is_one_line(overrides: Dict[str, Any], flags: List[str], message: str,
                                                      world: int) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        TransformerConfig.from_dict({**SMALL, **overrides})
    with pytest.raises(ArgumentError) as cli_error:
        validate_args(parse_args(ARGV + flags), world)
    assert message in str(cli_error.value) and "\n" not in str(cli_error.value)


@pytest.mark.parametrize("overrides, flags, message", BAD, ids=[b[2][:40] for b in BAD])
def test_bad_combination_is_one_line(overrides: Dict[str, Any], flags: List[str], message: str) -> None:
    with pytest.raises(ValueError) as config_error:  # from_dict: the legacy activation switches too
        TransformerConfig.from_dict({**SMALL, **overrides})
    assert message in str(config_error.value) and "\n" not in str(config_error.value)
    with pytest.raises(ArgumentError) as cli_error:
        validate_args(parse_args(ARGV + flags), 1)
    assert message in str(cli_error.value) and "\n" not in str(cli_error.value)


def test_learned_positions_need_a_row_per_token() -> None:
    flags = ["--position-embedding-type", "learned_absolute", "--max-position-embeddings", "8"]
    with pytest.raises(ArgumentError, match="--seq-length 16 exceeds the learned position table's "
                                            "--max-position-embeddings 8"):
        validate_args(parse_args(ARGV + flags), 1)


def test_good_combinations_build() -> None:
    config = TransformerConfig(**SMALL, qk_norm="full_width", post_norm_only=True)
    assert config.output_norm and not config.pre_norm
    config = TransformerConfig(**SMALL, softmax_scale=0.3, no_rope_layers=(1, 0))
    assert config.attention_scale == 0.3 and config.no_rope_layers == (0, 1)
    assert TransformerConfig.from_dict(config.to_dict()) == config
    config = TransformerConfig(**SMALL, sliding_window=4, full_attention_layers=(1,))
    assert [config.layer_window(i) for i in range(2)] == [4, None]
    assert TransformerConfig.from_dict(config.to_dict()) == config


def test_mamba_sizes_must_split_over_tp() -> None:
    """Mamba2 heads (and Mamba1 channels) must divide TP, and groups must divide TP or be divided by it."""
    mamba2 = dict(SMALL, hybrid_override_pattern="MM", position_embedding_type="none", mamba_head_dim=32)
    with pytest.raises(ValueError, match=r"giving heads \(4\) divisible by --mamba-num-groups \(2\) and by "
                                         r"--tensor-model-parallel-size \(8\)"):
        TransformerConfig(**mamba2, mamba_num_groups=2, tensor_model_parallel_size=8)
    with pytest.raises(ValueError, match=r"--mamba-num-groups \(2\) and --tensor-model-parallel-size \(3\) must "
                                         "divide one another"):
        TransformerConfig(**mamba2, mamba_expand=3, mamba_num_groups=2, tensor_model_parallel_size=3)  # 6 heads
    with pytest.raises(ValueError, match=r"\(192 Mamba channels\) is not divisible"):
        TransformerConfig(**mamba2, mamba_version=1, mamba_expand=3, tensor_model_parallel_size=5)
    with pytest.raises(ValueError, match=r"--mamba-num-heads 2 \(Mamba1's independent SSMs\) is not divisible by "
                                         r"--tensor-model-parallel-size \(4\)"):
        TransformerConfig(**mamba2, mamba_version=1, mamba_heads=2, tensor_model_parallel_size=4)
    heads = TransformerConfig(**mamba2, mamba_version=1, mamba_heads=4, tensor_model_parallel_size=4)
    assert heads.mamba1_heads == 4 and heads.mamba_d_inner == 4 * 32
    config = TransformerConfig(**mamba2, mamba_num_groups=1, tensor_model_parallel_size=4)  # B/C replicated
    assert config.mamba_num_heads == 4 and not config.has_attention_layers
    assert TransformerConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("family, model_type, config_class, legacy", [
    ("gemma2", "gemma2", "Gemma2Config", {}),  # no layer_types: alternating, as transformers assumes
    ("gemma3", "gemma3_text", "Gemma3TextConfig", {"sliding_window_pattern": 6}),  # the Hub's legacy int
    ("gemma3", "gemma3_text", "Gemma3TextConfig", {}),  # neither: every 6th layer full
    ("qwen2", "qwen2", "Qwen2Config", {"use_sliding_window": True, "max_window_layers": 5}),  # layers >= 5 slide
    ("qwen3", "qwen3", "Qwen3Config", {"use_sliding_window": False, "max_window_layers": 5}),  # none slides
    ("cwm", "cwm", "CwmConfig", {}),  # every 4th layer from 0 full
])
def test_window_layout_without_layer_types_follows_transformers(family, model_type, config_class, legacy) -> None:
    import transformers

    from mindspeed_llm.models.registry import config_from_hf

    sizes = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=12,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8)
    ours = config_from_hf(dict(sizes, model_type=model_type, **legacy), family)
    theirs = getattr(transformers, config_class)(**sizes, **legacy).layer_types
    assert ["full_attention" if ours.layer_window(i) is None else "sliding_attention" for i in range(12)] == theirs


@pytest.mark.parametrize("family, settings, message", [
    ("mamba2", dict(norm_before_gate=True), "mamba2 norm_before_gate=True is not supported"),
    ("mamba2", dict(num_heads=3), "mamba2 num_heads=3 x head_dim=16 is not expand x hidden_size = 128"),
    ("mamba", dict(hidden_act="gelu"), "mamba hidden_act='gelu' is not supported"),
    ("falcon_mamba", dict(intermediate_size=100), "falcon_mamba intermediate_size=100 is not expand x hidden_size"),
])
def test_unsupported_ssm_settings_are_one_line_registry_errors(family: str, settings: Dict[str, Any],
                                                               message: str) -> None:
    from mindspeed_llm.models.registry import RegistryError, config_from_hf

    hf = {**dict(model_type=family, hidden_size=64, num_hidden_layers=2, vocab_size=128, expand=2, state_size=8,
                 num_heads=8, head_dim=16, n_groups=1), **settings}
    with pytest.raises(RegistryError) as error:
        config_from_hf(hf, family)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("family, config_class", [("mamba", "MambaConfig"), ("falcon_mamba", "FalconMambaConfig")])
def test_mamba_inner_size_follows_intermediate_size_over_expand(family: str, config_class: str) -> None:
    """falcon-mamba-7b's config.json says expand 16 with intermediate_size 2 x hidden: transformers builds the
    mixer from intermediate_size, so must the registry; the stated expand comes back unchanged."""
    import transformers

    from mindspeed_llm.models.registry import config_from_hf, get_family

    hf = dict(model_type=family, hidden_size=64, num_hidden_layers=2, vocab_size=128, expand=16, intermediate_size=128,
              state_size=8)
    theirs = getattr(transformers, f"{config_class.removesuffix('Config')}ForCausalLM")(
        getattr(transformers, config_class)(**hf))
    ours = config_from_hf(hf, family)
    assert ours.mamba_d_inner == theirs.backbone.layers[0].mixer.conv1d.weight.shape[0] == 128
    back = get_family(family).to_hf_config(ours, hf)
    assert (back["expand"], back["intermediate_size"]) == (16, 128)


@pytest.mark.parametrize("yarn", [
    dict(factor=4.0, original_max_position_embeddings=64),  # attention factor 0.1 ln(4) + 1
    dict(factor=8.0, original_max_position_embeddings=32, beta_fast=16.0, beta_slow=2.0, mscale=0.8,
         mscale_all_dim=0.5),
    dict(factor=2.0, original_max_position_embeddings=128, mscale=1.0),  # mscale without mscale_all_dim: unused
    dict(factor=32.0, original_max_position_embeddings=64, truncate=False),  # GPT-OSS: ramp bounds not rounded
])
def test_yarn_matches_transformers_both_ways(yarn: Dict[str, Any]) -> None:
    """YaRN read from a Qwen2 config.json, and our config written back, give transformers' inverse
    frequencies and attention factor."""
    import torch
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from core.transformer.rope import rope_attention_factor, rope_inv_freq
    from mindspeed_llm.models.registry import config_from_hf, get_family

    sizes = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)
    rope = {"rope_type": "yarn", "rope_theta": 500.0, **yarn}
    theirs = transformers.Qwen2Config(**sizes, rope_parameters=rope)
    expected, factor = ROPE_INIT_FUNCTIONS["yarn"](theirs)
    ours = config_from_hf(dict(theirs.to_dict()), "qwen2")
    assert torch.equal(rope_inv_freq(ours), expected) and rope_attention_factor(ours) == factor
    written = transformers.Qwen2Config(**{k: v for k, v in get_family("qwen2").to_hf_config(ours).items()
                                          if k not in ("model_type", "architectures")})
    again, again_factor = ROPE_INIT_FUNCTIONS["yarn"](written)
    assert torch.equal(again, expected) and again_factor == factor
def test_xielu_starts_as_transformers_xielu() -> None:
    """--xielu's initial alphas (a 'constant' init, independent of TP) give transformers' XIELUActivation."""
    import torch
    from transformers.activations import XIELUActivation

    from core.models.gpt_model import build_model, layout_state

    config = TransformerConfig(**SMALL, activation="xielu", ffn_hidden_size=32)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    ours = model.decoder.layers["0"].mlp.xielu
    x = torch.linspace(-4.0, 4.0, 101)
    torch.testing.assert_close(ours(x), XIELUActivation(dtype=torch.float32)(x), rtol=1e-6, atol=1e-7)


def test_softmax_type_is_checked_in_the_config() -> None:
    with pytest.raises(ValueError, match="--softmax-type 'sink' is not one of"):
        TransformerConfig(**SMALL, softmax_type="sink")
    assert TransformerConfig(**SMALL, softmax_type="off-by-one").softmax_type == "off-by-one"


# MindSpeed-LLM's --model-type-hf names for the dense families (REFERENCE.md), each resolving to its family.
MINDSPEED_NAMES = {"llama2": "llama2", "mistral": "mistral", "qwen": "qwen2", "qwen25": "qwen2", "qwen3": "qwen3",
                   "gemma": "gemma", "gemma2": "gemma2", "bloom": "bloom", "bloom_3b": "bloom", "phi3.5": "phi3",
                   "hunyuan": "hunyuan_v1_dense", "glm4": "glm4", "seed-oss": "seed_oss", "mamba2": "mamba2",
                   "magistral": "mistral"}


@pytest.mark.parametrize("name, family", sorted(MINDSPEED_NAMES.items()))
def test_mindspeed_model_type_names_resolve(name: str, family: str) -> None:
    from mindspeed_llm.models.registry import get_family

    assert get_family(name).name == family


# (case, a q/k norm its family's HF config cannot hold): the export refuses it instead of dropping it
UNEXPRESSIBLE_QK_NORMS = [("apertus", "per_head_weights"), ("exaone4", "full_width"),
                          ("hunyuan_v1_dense", "non_parametric"), ("cohere", "per_head"), ("cohere", "l2"),
                          ("llama4", "per_head"), ("olmo2", "per_head"), ("gpt2", "l2"), ("dots1", "full_width"),
                          ("glm4_moe", "per_head_weights"), ("phi", "l2"), ("gemma3", "non_parametric")]


@pytest.mark.parametrize("name, kind", UNEXPRESSIBLE_QK_NORMS, ids=[f"{n}-{k}" for n, k in UNEXPRESSIBLE_QK_NORMS])
def test_export_refuses_a_qk_norm_the_family_lacks(name: str, kind: str) -> None:
    import dataclasses

    from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family
    from tests.models.test_zoo_parity import CASES, build_hf_model

    case = CASES[name]
    config = config_from_hf(build_hf_model(case).config.to_dict(), case[3])
    get_family(case[3]).to_hf_config(config)  # as converted: exports
    norm_settings = dict(normalization="RMSNorm") if kind == "full_width" else {}
    with pytest.raises(RegistryError):
        get_family(case[3]).to_hf_config(dataclasses.replace(config, qk_norm=kind, **norm_settings))

"""Invalid combinations of the model zoo's behaviour flags are one-line errors naming the flags.

Checked on ``TransformerConfig`` (what ``--use-checkpoint-args``, the
converter and ``transformer_config_from_args`` all build) and through the
command line, where ``validate_args`` turns them into ArgumentErrors.

    python -m pytest tests/models/test_zoo_flags.py -q
"""
from __future__ import annotations

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
    (dict(qk_layernorm_per_head_weights=True), ["--qk-layernorm-per-head-weights"],
     "--qk-layernorm-per-head-weights needs --qk-layernorm"),
    (dict(qk_layernorm=True, qk_layernorm_full_width=True, qk_layernorm_per_head_weights=True),
     ["--qk-layernorm", "--qk-layernorm-full-width", "--qk-layernorm-per-head-weights"],
     "--qk-layernorm-per-head-weights needs --qk-layernorm and excludes --qk-layernorm-full-width"),
    (dict(first_input_layernorm=False, post_norm_only=True), ["--no-first-input-layernorm", "--post-norm-only"],
     "--no-first-input-layernorm drops a norm before attention"),
    (dict(prediction_head="tanh"), ["--prediction-head", "tanh"], "--prediction-head 'tanh' is not one of"),
    (dict(prediction_head_bias=True), ["--prediction-head-bias"], "--prediction-head-bias needs --prediction-head"),
    (dict(global_kv_channels=32), ["--global-kv-channels", "32"],
     "--global-kv-channels need --sliding-window and --local-rotary-base"),
    (dict(sliding_window=4, local_rotary_base=100.0, global_num_query_groups=3),
     ["--sliding-window", "4", "--local-rotary-base", "100", "--global-num-query-groups", "3"],
     "--global-num-query-groups 3 must divide --num-attention-heads (4)"),
]


@pytest.mark.parametrize("overrides, flags, message", BAD, ids=[b[2][:40] for b in BAD])
def test_bad_combination_is_one_line(overrides: Dict[str, Any], flags: List[str], message: str) -> None:
    with pytest.raises(ValueError) as config_error:
        TransformerConfig(**{**SMALL, **overrides})
    assert message in str(config_error.value) and "\n" not in str(config_error.value)
    with pytest.raises(ArgumentError) as cli_error:
        validate_args(parse_args(ARGV + flags), 1)
    assert message in str(cli_error.value) and "\n" not in str(cli_error.value)


def test_good_combinations_build() -> None:
    config = TransformerConfig(**SMALL, qk_layernorm=True, qk_layernorm_full_width=True, post_norm_only=True)
    assert config.output_norm and not config.pre_norm
    config = TransformerConfig(**SMALL, softmax_scale=0.3, no_rope_layers=(1, 0))
    assert config.attention_scale == 0.3 and config.no_rope_layers == (0, 1)
    assert TransformerConfig.from_dict(config.to_dict()) == config
    config = TransformerConfig(**SMALL, sliding_window=4, full_attention_layers=(1,))
    assert [config.layer_window(i) for i in range(2)] == [4, None]
    assert TransformerConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("family, model_type, config_class, legacy", [
    ("gemma2", "gemma2", "Gemma2Config", {}),  # no layer_types: alternating, as transformers assumes
    ("gemma3", "gemma3_text", "Gemma3TextConfig", {"sliding_window_pattern": 6}),  # the Hub's legacy int
    ("gemma3", "gemma3_text", "Gemma3TextConfig", {}),  # neither: every 6th layer full
])
def test_window_layout_without_layer_types_follows_transformers(family, model_type, config_class, legacy) -> None:
    import transformers

    from mindspeed_llm.models.registry import config_from_hf

    sizes = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=12,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8)
    ours = config_from_hf(dict(sizes, model_type=model_type, **legacy), family)
    theirs = getattr(transformers, config_class)(**sizes, **legacy).layer_types
    assert ["full_attention" if ours.layer_window(i) is None else "sliding_attention" for i in range(12)] == theirs

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
    # state-space layers: ARGV/SMALL have 2 layers, hidden 64 (d_inner 128 with --mamba-expand 2)
    (dict(hybrid_override_pattern="MMM", position_embedding_type="none"),
     ["--hybrid-override-pattern", "MMM", "--position-embedding-type", "none"],
     "--hybrid-override-pattern 'MMM' must have one of ('M',) per layer (2 for --num-layers)"),
    (dict(hybrid_override_pattern="M*", position_embedding_type="none"),
     ["--hybrid-override-pattern", "M*", "--position-embedding-type", "none"],
     "--hybrid-override-pattern 'M*' must have one of ('M',) per layer"),
    (dict(hybrid_override_pattern="MM"), ["--hybrid-override-pattern", "MM"],
     "without attention layers uses no position embedding; set --position-embedding-type none"),
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
     "--mamba-mixer-rms-eps (norms on dt, B and C) applies to --mamba-version 1 only"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", mamba_dt_limit_min=0.5,
          mamba_dt_limit_max=0.1),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--mamba-dt-limit-min", "0.5",
      "--mamba-dt-limit-max", "0.1"],
     "--mamba-dt-limit-min 0.5 must be >= 0 and below --mamba-dt-limit-max 0.1"),
    (dict(mamba_state_dim=64), ["--mamba-state-dim", "64"],
     "--mamba-state-dim applies to Mamba layers; add --hybrid-override-pattern with 'M' layers or drop it"),
    (dict(mamba_conv_bias=False), ["--disable-mamba-conv-bias"], "--disable-mamba-conv-bias applies to Mamba layers"),
    (dict(hybrid_override_pattern="MM", position_embedding_type="none", swiglu=True),
     ["--hybrid-override-pattern", "MM", "--position-embedding-type", "none", "--swiglu"],
     "--swiglu applies to attention or MLP layers, which --hybrid-override-pattern 'MM' has none of"),
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
    config = TransformerConfig(**mamba2, mamba_num_groups=1, tensor_model_parallel_size=4)  # B/C replicated
    assert config.mamba_num_heads == 4 and not config.has_attention_layers
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

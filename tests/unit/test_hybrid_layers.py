"""The hybrid layer spine: Megatron-core's pattern letters and the gated DeltaNet layers of a GPT model.

Each letter of ``--hybrid-override-pattern`` (alias ``--hybrid-layer-pattern``) builds a layer holding one
norm and one branch (M Mamba, G gated DeltaNet, * attention, - MLP, E MoE); ``--experimental-attention-variant
gated_delta_net`` with ``--linear-attention-freq`` puts DeltaNet mixers in the marked GPT layers, each with its
MLP. Bad combinations are one-line errors naming the flag.

    python -m pytest tests/unit/test_hybrid_layers.py -q
"""
from __future__ import annotations

from typing import Any, Dict

import pytest
import torch

from core.models.gpt_model import build_model, layout_state
from core.transformer.block import MambaLayer, TransformerLayer
from core.transformer.config import TransformerConfig, parse_layer_frequency
from core.transformer.gated_delta_net import GatedDeltaNet
from core.transformer.mlp import MLP
from core.transformer.moe.moe_layer import MoELayer
from core.transformer.attention import SelfAttention
from mindspeed_llm.arguments import parse_args, transformer_config_from_args

BASE = dict(num_layers=5, hidden_size=32, num_attention_heads=4, vocab_size=64, ffn_hidden_size=64)
MAMBA_SIZES = dict(mamba_head_dim=16, mamba_num_groups=1, mamba_state_dim=8)
GDN_SIZES = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8)


def _config(**overrides: Any) -> TransformerConfig:
    """A small config; the Mamba and DeltaNet sizes only where the layout has such layers."""
    pattern = overrides.get("hybrid_override_pattern") or ""
    values: Dict[str, Any] = dict(BASE)
    if set("MHZ") & set(pattern):
        values.update(MAMBA_SIZES)
    if set("GK") & set(pattern) or overrides.get("experimental_attention_variant"):
        values.update(GDN_SIZES)
    return TransformerConfig(**{**values, **overrides})


def _branches(layer: torch.nn.Module) -> tuple:
    if isinstance(layer, MambaLayer):
        return ("mamba", None)
    mixer = type(layer.self_attention).__name__ if layer.self_attention is not None else None
    mlp = type(layer.mlp).__name__ if layer.mlp is not None else None
    return (mixer, mlp)


def test_every_letter_builds_its_one_branch() -> None:
    config = _config(hybrid_override_pattern="MG*-E", num_experts=4, moe_router_topk=2)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    branches = [_branches(layer) for layer in model.decoder.layers.values()]
    assert branches == [("mamba", None), (GatedDeltaNet.__name__, None), (SelfAttention.__name__, None),
                        (None, MLP.__name__), (None, MoELayer.__name__)]
    model.eval()
    logits = model(torch.randint(0, 64, (2, 8)))
    assert torch.isfinite(logits).all()


def test_gdn_gpt_layers_keep_their_mlp() -> None:
    config = _config(num_layers=4, experimental_attention_variant="gated_delta_net", linear_attention_freq="2")
    assert [config.layer_parts(i) for i in range(4)] == [("gated_delta_net", "dense"), ("attention", "dense")] * 2
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    layers = list(model.decoder.layers.values())
    assert all(isinstance(layer, TransformerLayer) and isinstance(layer.mlp, MLP) for layer in layers)
    assert [type(layer.self_attention) for layer in layers] == [GatedDeltaNet, SelfAttention] * 2


@pytest.mark.parametrize("value, expected", [
    ("4", [1, 1, 1, 0, 1, 1, 1, 0]), ("1", [0] * 8), ("([1]*3+[0])*2", [1, 1, 1, 0, 1, 1, 1, 0]),
    ("[0]+[1]*7", [0] + [1] * 7)])
def test_layer_frequency_is_megatrons(value: str, expected: list) -> None:
    assert parse_layer_frequency(value, 8, "--linear-attention-freq") == expected


@pytest.mark.parametrize("overrides, message", [
    (dict(hybrid_override_pattern="M*-"), "has 3 letters and --num-layers is 5"),
    (dict(hybrid_override_pattern="M*Q-E"), "unknown letter 'Q'"),
    (dict(hybrid_override_pattern="M*--E"), "has MoE layers ('E'); add --num-experts"),
    (dict(hybrid_override_pattern="M*--E", num_experts=4, moe_layer_freq=2), "--moe-layer-freq places MoE layers"),
    (dict(hybrid_override_pattern="MG*--", experimental_attention_variant="gdn", linear_attention_freq="2"),
     "--hybrid-override-pattern by its letters"),
    (dict(experimental_attention_variant="gated_delta_net"), "needs --linear-attention-freq"),
    (dict(linear_attention_freq="2"), "needs --experimental-attention-variant"),
    (dict(experimental_attention_variant="gdn", linear_attention_freq="[1,0]"), "gives 2 entries"),
    (dict(experimental_attention_variant="gdn", linear_attention_freq="__import__('os')"), "only integers"),
    (dict(hybrid_override_pattern="GG*--", linear_num_value_heads=3), "must be a multiple of --linear-num-key-heads"),
    (dict(hybrid_override_pattern="GG*--", linear_num_key_heads=2, linear_num_value_heads=4,
          tensor_model_parallel_size=4, num_attention_heads=4), "divisible by --tensor-model-parallel-size (4)"),
    (dict(hybrid_override_pattern="MM*--", linear_num_key_heads=4), "applies to gated DeltaNet, Kimi Delta Attention, lightning and mLSTM layers"),
    # Falcon-H1's 'H' layers and muP scales
    (dict(hybrid_override_pattern="M*-M-", attention_out_multiplier=0.5),
     "--attention-out-multiplier applies to the 'H' layers"),
    (dict(attention_in_multiplier=0.5), "--attention-in-multiplier applies to the 'H' layers"),
    (dict(hybrid_override_pattern="H-H--", ssm_multipliers=(1.0, 2.0)), "--ssm-multipliers takes five scales"),
    (dict(hybrid_override_pattern="H-H--", mamba_rmsnorm=False, mamba_norm_before_gate=True),
     "--mamba-norm-before-gate places the gated norm, which --disable-mamba-rmsnorm removes"),
    (dict(hybrid_override_pattern="M*-M-", mamba_version=1, mamba_rmsnorm=False),
     "--disable-mamba-rmsnorm applies to --mamba-version 2"),
    (dict(ssm_in_multiplier=2.0), "--ssm-in-multiplier applies to Mamba layers"),
    (dict(mlp_multipliers=(1.0, 2.0, 3.0)), "--mlp-multipliers takes two scales"),
    (dict(mlp_multipliers=(1.0, 2.0)), "--mlp-multipliers scales a gated MLP's gate"),
    (dict(mlp_multipliers=(1.0, 2.0), activation="swiglu", num_experts=4), "--mlp-multipliers applies to the dense MLP"),
    (dict(hybrid_override_pattern="H-H--", multi_latent_attention=True), "drop --multi-latent-attention"),
    # OLMo-Hybrid's DeltaNet flags
    (dict(hybrid_override_pattern="GG*--", linear_attention_pre_norm=True),
     "--linear-attention-pre-norm keeps pre-norms in the linear-attention layers of a --post-norm-only model"),
    (dict(hybrid_override_pattern="KK*--", linear_allow_neg_eigval=True),
     "--linear-allow-neg-eigval applies to gated DeltaNet layers"),
    (dict(hybrid_override_pattern="KK*--", linear_norm_epsilon=1e-5), "--linear-norm-epsilon applies to gated DeltaNet"),
    (dict(linear_allow_neg_eigval=True), "--linear-allow-neg-eigval applies to gated DeltaNet, Kimi Delta Attention"),
    # Bailing's KDA flags
    (dict(hybrid_override_pattern="GG*--", kda_full_rank_gates=True),
     "--kda-full-rank-gates applies to Kimi Delta Attention layers"),
    (dict(hybrid_override_pattern="KK*--", kda_gate_lower_bound=2.0), "--kda-gate-lower-bound 2.0 must be negative"),
    # no conv in lightning (or mLSTM) layers
    (dict(hybrid_override_pattern="LL*--", linear_conv_kernel_dim=3, linear_num_key_heads=4, linear_num_value_heads=4),
     "--linear-conv-kernel-dim applies to the short conv of gated DeltaNet and Kimi Delta Attention layers"),
    # Zamba's shared blocks: their fields only with 'Z' layers, and what the 'Z' layer cannot do
    (dict(hybrid_override_pattern="MM*--", num_shared_blocks=2), "--num-shared-blocks applies to the 'Z' layers"),
    (dict(hybrid_override_pattern="MM*--", shared_block_adapter_rank=4),
     "--shared-block-adapter-rank applies to the 'Z' layers"),
    (dict(hybrid_override_pattern="ZMZMM", num_shared_blocks=0), "--num-shared-blocks 0 must be at least 1"),
    (dict(hybrid_override_pattern="ZMZMM", shared_block_adapter_rank=0),
     "--shared-block-adapter-rank 0 must be at least 1"),
    (dict(hybrid_override_pattern="ZMZMM", shared_block_attention_adapters=True),
     "--shared-block-attention-adapters needs --shared-block-adapter-rank"),
    (dict(hybrid_override_pattern="ZMZMM", residual_multiplier=0.5),
     "--residual-multiplier is not defined for the 'Z' layers"),
    (dict(hybrid_override_pattern="ZMZMM", mtp_num_layers=1), "--mtp-num-layers is not defined for the 'Z' layers"),
])
def test_bad_layouts_are_one_line(overrides: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        _config(**overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_hybrid_layer_pattern_is_an_alias() -> None:
    base = ["--num-layers", "3", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--max-position-embeddings", "16", "--micro-batch-size", "1", "--vocab-size", "64",
            "--mamba-head-dim", "16", "--mamba-num-groups", "1"]
    for flag in ("--hybrid-override-pattern", "--hybrid-layer-pattern"):
        config = transformer_config_from_args(parse_args(base + [flag, "M*-"]))
        assert config.hybrid_override_pattern == "M*-"


def test_falcon_h1_layer_and_its_scale_flags() -> None:
    """'H' builds a Mamba2 beside an attention on one norm; the muP flags parse as numbers into the config."""
    base = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--max-position-embeddings", "16", "--micro-batch-size", "1", "--vocab-size", "64", "--swiglu",
            "--mamba-head-dim", "16", "--mamba-num-groups", "1", "--hybrid-override-pattern", "H-"]
    scales = ["--ssm-multipliers", "0.5", "1", "1", "1", "2", "--mlp-multipliers", "0.25", "4",
              "--attention-in-multiplier", "0.5", "--ssm-out-multiplier", "3", "--disable-mamba-rmsnorm"]
    config = transformer_config_from_args(parse_args(base + scales))
    assert config.ssm_multipliers == (0.5, 1.0, 1.0, 1.0, 2.0) and config.mlp_multipliers == (0.25, 4.0)
    assert config.attention_in_multiplier == 0.5 and config.ssm_out_multiplier == 3.0 and not config.mamba_rmsnorm
    assert config.layer_parts(0) == ("mamba_and_attention", None) and config.has_mamba_layers
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    mixer = model.decoder.layers["0"].self_attention
    assert type(mixer).__name__ == "MambaAndAttention" and mixer.mamba.norm is None
    assert isinstance(mixer.attention, SelfAttention)
    model.eval()
    assert torch.isfinite(model(torch.randint(0, 64, (1, 8)))).all()


def test_linear_attention_pre_norm_places_norms_by_layer_kind() -> None:
    """OLMo-Hybrid: under --post-norm-only the DeltaNet layers keep Llama's pre-norms, the attention layers have
    output norms only."""
    config = _config(num_layers=2, experimental_attention_variant="gdn", linear_attention_freq="[1,0]",
                     post_norm_only=True, linear_attention_pre_norm=True, linear_allow_neg_eigval=True)
    gdn, attention = build_model(config, layout_state(1), torch.device("cpu"), seed=0).decoder.layers.values()
    assert gdn.post_self_attn_layernorm is None and gdn.post_mlp_layernorm is None
    assert not isinstance(gdn.input_layernorm, torch.nn.Identity) and gdn.self_attention.beta_scale == 2.0
    assert isinstance(attention.input_layernorm, torch.nn.Identity) and attention.post_mlp_layernorm is not None


def test_z_layers_run_their_shared_block_on_hidden_and_embeddings() -> None:
    """'Z' layers d = 0, 1, 2 run blocks 0, 1, 0 (--num-shared-blocks 2), one copy each; a layer's output is
    x + mamba(norm(x + proj(block([x; e])))) with its own adapters, and the word embeddings reach every block:
    changing them (the hidden state held) changes the layer's output."""
    config = _config(hybrid_override_pattern="ZMZZM", num_shared_blocks=2, shared_block_adapter_rank=2,
                     shared_block_attention_adapters=True, position_embedding_type="none")
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0).eval()
    layers = model.decoder.layers
    assert [layers[str(i)].block_index for i in (0, 2, 3)] == [0, 1, 0]
    assert sorted(model.decoder.shared_blocks) == ["0", "1"]
    block = model.decoder.shared_blocks["0"]
    assert block.self_attention.linear_qkv.weight.shape[1] == 2 * 32  # attention reads [hidden; embeddings]
    hidden, embeds = torch.randn(6, 2, 32), torch.randn(6, 2, 32)
    with torch.no_grad():
        out = layers["3"](hidden, None, None, embeds, block)
        adapters = layers["3"].adapters
        shared = adapters.proj(block(hidden, embeds, None, None, adapters))
        expected = hidden + layers["3"].mixer(layers["3"].norm(hidden + shared))
        assert torch.equal(out, expected)
        assert not torch.allclose(out, layers["3"](hidden, None, None, embeds + 1.0, block))
        # each layer's adapters change its block's output: layer 0 and layer 3 run block 0 differently
        assert not torch.allclose(block(hidden, embeds, None, None, layers["0"].adapters),
                                  block(hidden, embeds, None, None, adapters))

"""LFM2's short-conv mixer (core/transformer/short_conv.py) against ``transformers``, as a stateful core.

* At TP 1 the module, given the weights of ``transformers``' ``Lfm2ShortConv`` (perturbed, with and
  without biases, two conv widths), gives its output and input gradient in fp32 (max abs <= 1e-5).
* The conv core run over a sequence cut in pieces (one shorter than the conv's reach), each piece
  from the previous piece's carry, gives the whole sequence's outputs and final carry.
* Packed documents (a layout with document numbers) give every document the output it has alone.
* The short-conv flags without short-conv layers, and bad sizes, are one-line refusals.

The TP 2 / SP checks are tests/distributed/test_short_conv_tp.py.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest
import torch
import transformers
from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

from core.models.gpt_model import layout_state
from core.transformer.config import SHORT_CONV_MIXER, TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.short_conv import ShortConv

SEQ, BATCH, HIDDEN = 10, 2, 16
TOLERANCE = 1e-5
CASES: Dict[str, Dict[str, Any]] = {"width3_bias": dict(kernel=3, bias=True), "width4": dict(kernel=4, bias=False)}


def hf_conv(name: str) -> Lfm2ShortConv:
    case = CASES[name]
    config = transformers.Lfm2Config(hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=2, vocab_size=16, conv_L_cache=case["kernel"],
                                     conv_bias=case["bias"], layer_types=["conv"])
    torch.manual_seed(0)
    module = Lfm2ShortConv(config, layer_idx=0).eval()
    with torch.no_grad():
        for param in module.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return module


def short_conv_config(name: str = "width3_bias", tp: int = 1, sp: bool = False, **overrides: Any) -> TransformerConfig:
    """Two layers, the first a short-conv layer (``--linear-attention-freq [1,0]``)."""
    case = CASES[name]
    fields = dict(num_layers=2, hidden_size=HIDDEN, num_attention_heads=2, vocab_size=16, normalization="RMSNorm",
                  hidden_dropout=0.0, attention_dropout=0.0, tensor_model_parallel_size=tp, sequence_parallel=sp,
                  experimental_attention_variant="short_conv", linear_attention_freq="[1,0]",
                  short_conv_kernel_size=case["kernel"], short_conv_bias=case["bias"])
    fields.update(overrides)
    return TransformerConfig(**fields)


def our_conv(name: str) -> ShortConv:
    """The TP-1 module holding ``hf_conv(name)``'s weights under the same names."""
    module = ShortConv(short_conv_config(name), layout_state(1))
    weights = hf_conv(name).state_dict()
    assert set(dict(module.named_parameters())) == set(weights)
    with torch.no_grad():
        for key, param in module.named_parameters():
            param.copy_(weights[key])
    return module


def inputs(seq: int = SEQ) -> torch.Tensor:
    return torch.randn(seq, BATCH, HIDDEN, generator=torch.Generator().manual_seed(3))  # [s, b, h]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_transformers_forward_and_input_gradient(name: str) -> None:
    x_hf = inputs().transpose(0, 1).contiguous().requires_grad_(True)  # HF is [b, s, h]
    expected = hf_conv(name)(x_hf)
    expected.pow(2).sum().backward()
    x = inputs().requires_grad_(True)
    ours = our_conv(name)(x, None, None)  # [s, b, h]
    ours.pow(2).sum().backward()
    assert (ours.transpose(0, 1) - expected).abs().max().item() <= TOLERANCE
    assert (x.grad.transpose(0, 1) - x_hf.grad).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize("name", sorted(CASES))
def test_sequence_in_pieces_with_carry_equals_whole(name: str) -> None:
    module = our_conv(name)
    gated = torch.randn(BATCH, SEQ, HIDDEN, generator=torch.Generator().manual_seed(4))  # [b, s, h] (B * x)
    whole, whole_carry = module._core(gated, None)
    pieces, carry = [], None
    for start, end in ((0, 1), (1, 5), (5, 6), (6, SEQ)):  # pieces shorter and longer than k - 1
        out, carry = module._core(gated[:, start:end], carry)
        assert carry[0].shape == (BATCH, module.kernel_size - 1, HIDDEN)
        pieces.append(out)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, rtol=0, atol=TOLERANCE)
    torch.testing.assert_close(carry[0], whole_carry[0], rtol=0, atol=0)
    torch.testing.assert_close(carry[0], gated[:, SEQ - module.kernel_size + 1:], rtol=0, atol=0)


def test_packed_documents_give_each_document_its_own_output() -> None:
    module = our_conv("width4")
    x = inputs()  # [s, b, h]
    documents = torch.tensor([[0] * 3 + [1] * 5 + [2] * 2, [0] * 6 + [1] * 4])  # [b, s]
    layout = SequenceLayout(SEQ, torch.arange(SEQ), documents)
    packed = module(x, None, layout)  # [s, b, h]
    whole = module(x, None, None)
    for row in range(BATCH):
        for doc in documents[row].unique().tolist():
            where = torch.nonzero(documents[row] == doc).flatten()
            alone = module(x[where, row:row + 1], None, None)  # [s_doc, 1, h]
            torch.testing.assert_close(packed[where, row:row + 1], alone, rtol=0, atol=TOLERANCE)
    assert not torch.allclose(packed, whole, atol=1e-3)  # the restarts change later documents


def test_layer_parts_name_the_short_conv() -> None:
    config = short_conv_config()
    assert config.layer_parts(0)[0] == SHORT_CONV_MIXER and config.layer_parts(1)[0] == "attention"
    assert config.has_short_conv_layers and not config.has_linear_attention_layers


@pytest.mark.parametrize("name, overrides, message", [
    ("width4", dict(experimental_attention_variant=None, linear_attention_freq=None),
     "--short-conv-kernel-size applies to short-conv layers"),
    ("width3_bias", dict(experimental_attention_variant=None, linear_attention_freq=None),
     "--short-conv-bias applies to short-conv layers"),
    ("width4", dict(experimental_attention_variant="gated_delta_net"), "--short-conv-kernel-size applies to "
                                                                      "short-conv layers"),
    ("width4", dict(linear_attention_freq="[0,0]"), "marks no layer"),
    ("width4", dict(short_conv_kernel_size=0), "--short-conv-kernel-size 0 must be at least 1"),
    ("width4", dict(tensor_model_parallel_size=4, num_attention_heads=4, hidden_size=10, kv_channels=2),
     "TP splits the short conv"),
    ("width4", dict(linear_attention_freq=None), "needs --linear-attention-freq"),
    ("width4", dict(hybrid_override_pattern="**"), "drop one of them"),
])
def test_refusals_are_one_line(name: str, overrides: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        short_conv_config(name, **overrides)
    assert "\n" not in str(error.value)


def test_gated_deltanet_fields_still_refused_without_its_layers() -> None:
    with pytest.raises(ValueError, match="--linear-num-key-heads applies to gated DeltaNet, Kimi Delta Attention, lightning and mLSTM layers"):
        dataclasses.replace(short_conv_config(), linear_num_key_heads=4)


def test_flops_per_token_count_the_short_conv_weights() -> None:
    """6 x every weight a token meets (projections, the conv, MLPs, the tied output layer) + the attention
    layer's scores (3 x 4 s q)."""
    from core.models.gpt_model import build_model
    from mindspeed_llm.training.metrics import training_flops_per_token

    config = short_conv_config("width4", make_vocab_size_divisible_by=16)
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    weights = sum(p.numel() for key, p in model.named_parameters() if p.dim() >= 2 and "word_embeddings" not in key)
    weights += config.hidden_size * config.padded_vocab_size  # the tied output layer
    seq = 32
    scores = 4 * seq * config.num_attention_heads * config.kv_channels  # the one attention layer
    assert training_flops_per_token(config, seq) == pytest.approx(6 * weights + 3 * scores)


def test_lfm_family_refusals_are_one_line() -> None:
    """LFM3 refuses attention biases and, on export, a per-channel gate; a model lfm2 cannot hold (Mamba layers,
    experts) is not exported as it."""
    from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family

    lfm3 = dict(model_type="lfm3", hidden_size=HIDDEN, intermediate_size=32, num_hidden_layers=3,
                num_attention_heads=2, num_key_value_heads=1, head_dim=8, vocab_size=16,
                layer_types=["conv", "sliding_attention", "full_attention"])
    with pytest.raises(RegistryError, match="lfm3 attention_bias=True is not supported: .*g_proj") as error:
        config_from_hf({**lfm3, "attention_bias": True}, "lfm3")
    assert "\n" not in str(error.value)
    cfg = config_from_hf(lfm3, "lfm3")
    assert cfg.attention_output_gate and cfg.attention_output_gate_per_head and cfg.post_norm
    assert cfg.full_attention_layers == (0, 2) and cfg.sliding_window == 256 and cfg.rotary_percent == 0.5
    per_channel = dataclasses.replace(cfg, attention_output_gate_per_head=False)
    with pytest.raises(RegistryError, match="lfm3 cannot express this model's attention_output_gate_per_head=False"):
        get_family("lfm3").to_hf_config(per_channel)
    mamba = TransformerConfig(num_layers=2, hidden_size=HIDDEN, num_attention_heads=2, vocab_size=16,
                              hybrid_override_pattern="M*", position_embedding_type="rope", mamba_head_dim=8,
                              mamba_num_groups=1)
    with pytest.raises(RegistryError, match="lfm2 has short-conv and attention layers only"):
        get_family("lfm2").to_hf_config(mamba)
    with pytest.raises(RegistryError, match="lfm2 cannot express num_experts=4"):
        get_family("lfm2").to_hf_config(short_conv_config(num_experts=4, moe_router_topk=2))

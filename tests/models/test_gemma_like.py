"""Checks of the Gemma-style families (mindspeed_llm/models/families/gemma_like.py) that the shared zoo tests
cannot make.

Gemma4's ``layer_scalar`` is a buffer in transformers, which ``build_hf_model``
does not perturb (it perturbs parameters), so the shared parity test sees it at
1. Here every layer's scalar gets its own value, the model is converted with
the production converter and our TP=1 logits must match transformers' within
1e-4; they must not match once our scalars are reset to 1 (the check can fail).
The Gemma4 settings the decoder does not model are one-line RegistryErrors
naming their key (for Gemma4 text also its per-layer inputs and MoE block);
transformers' default full-layer head dim (512 without
``global_head_dim``) is read as it builds it.

    python -m pytest tests/models/test_gemma_like.py -q
"""
from __future__ import annotations

import pytest
import torch

from core.models.gpt_model import layout_state
from mindspeed_llm.models.registry import RegistryError, config_from_hf
from tests.models.test_hf_parity import convert, hf_logits, our_logits
from tests.models.test_zoo_parity import CASES, SEQ, BATCH, TOLERANCE, build_hf_model, load_ours


def test_gemma4_layer_scalars_convert(tmp_path) -> None:
    model = build_hf_model(CASES["gemma4_unified"])
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            layer.layer_scalar.fill_(0.5 + 0.3 * index)
    hf_dir, mg_dir = str(tmp_path / "hf"), str(tmp_path / "mg")
    model.save_pretrained(hf_dir)
    convert(hf_dir, mg_dir, "gemma4_unified", 1)
    input_ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    expected = hf_logits(model, input_ids)
    ours = load_ours(mg_dir, layout_state(1))
    assert (our_logits(ours, input_ids) - expected).abs().max().item() <= TOLERANCE
    with torch.no_grad():
        for layer in ours.decoder.layers.values():
            layer.layer_scalar.fill_(1.0)
    assert (our_logits(ours, input_ids) - expected).abs().max().item() > 100 * TOLERANCE


GEMMA4_SMALL = dict(model_type="gemma4_unified_text", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=128, head_dim=16, global_head_dim=16,
                    sliding_window=4, rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                       "full_attention": {"rope_type": "default", "rope_theta": 1e6}})


@pytest.mark.parametrize("change, key", [
    (dict(num_kv_shared_layers=1), "num_kv_shared_layers"),
    (dict(per_layer_config={"0": {"head_dim": 32}}), "per_layer_config"),  # a sliding layer with its own shape
    (dict(use_bidirectional_attention="all"), "use_bidirectional_attention"),
    (dict(rope_parameters={"sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
                           "full_attention": {"rope_type": "default", "rope_theta": 1e6}}), "rope_parameters"),
    (dict(layer_types=["full_attention", "full_attention"], attention_k_eq_v=True), "attention_k_eq_v"),
])
def test_gemma4_unmodelled_settings_are_refused(change, key) -> None:
    assert config_from_hf(GEMMA4_SMALL, "gemma4_unified").value_norm  # the base config converts
    with pytest.raises(RegistryError) as error:
        config_from_hf({**GEMMA4_SMALL, **change}, "gemma4_unified")
    assert key in str(error.value) and "\n" not in str(error.value)


def test_gemma4_default_global_head_dim_is_transformers() -> None:
    import transformers

    hf = {k: v for k, v in GEMMA4_SMALL.items() if k != "global_head_dim"}
    ours = config_from_hf(hf, "gemma4_unified")
    theirs = transformers.Gemma4UnifiedTextConfig(**{k: v for k, v in hf.items() if k != "model_type"})
    assert ours.layer_kv_channels(1) == theirs.per_layer_config[1].head_dim == 512
    assert ours.layer_kv_channels(0) == theirs.per_layer_config[0].head_dim == 16


@pytest.mark.parametrize("change, key", [
    (dict(hidden_size_per_layer_input=256), "hidden_size_per_layer_input"),
    ({}, "hidden_size_per_layer_input"),  # transformers' default is 256
    (dict(hidden_size_per_layer_input=0, enable_moe_block=True), "enable_moe_block"),
])
def test_gemma4_text_per_layer_inputs_and_moe_are_refused(change, key) -> None:
    base = {**GEMMA4_SMALL, "model_type": "gemma4_text"}
    assert config_from_hf({**base, "hidden_size_per_layer_input": 0}, "gemma4").layer_scalar
    with pytest.raises(RegistryError) as error:
        config_from_hf({**base, **change}, "gemma4")
    assert key in str(error.value) and "\n" not in str(error.value)

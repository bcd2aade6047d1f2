"""Registry edges of the families whose export is checked (``registry._checked_family``: Bloom and MPT in
``families/alibi.py``, Jais2, Starcoder2 and Nemotron in ``families/mlp_variants.py``): HF settings transformers
would not compute as written are one-line RegistryErrors naming the family and key; an export the family cannot
express is refused naming the fields; every parity case's exported config.json reloads in transformers with the
model's logits (the round-trip test covers only the base case of each family).

    python -m pytest tests/models/test_checked_export.py -q
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family
from tests.models import cases_alibi, cases_mlp_variants
from tests.models.test_zoo_parity import build_hf_model

CHECKED_MLP_VARIANTS = ("jais2", "starcoder2", "nemotron")
CASES = {**cases_alibi.CASES,
         **{name: case for name, case in cases_mlp_variants.CASES.items() if case[3] in CHECKED_MLP_VARIANTS}}

MPT = dict(model_type="mpt", d_model=64, n_heads=4, n_layers=2, vocab_size=128)

REFUSED = [
    ("mpt", {**MPT, "attn_config": {"qk_ln": True}}, "mpt attn_config.qk_ln=True"),
    ("mpt", {**MPT, "attn_config": {"prefix_lm": True}}, "mpt attn_config.prefix_lm=True"),
    ("mpt", {**MPT, "attn_config": {"attn_uses_sequence_id": True}}, "mpt attn_config.attn_uses_sequence_id=True"),
    ("mpt", {**MPT, "attn_config": {"alibi": False}}, "mpt attn_config.alibi=False"),
    ("mpt", {**MPT, "attn_config": {"alibi_bias_max": 16}}, "mpt attn_config.alibi_bias_max=16"),
    ("mpt", {**MPT, "attn_config": {"attn_type": "multiquery_attention"}}, "mpt attn_config.attn_type"),
    ("mpt", {**MPT, "attn_config": {"rope": True}}, "mpt attn_config.rope=True"),
    ("mpt", {**MPT, "ffn_config": {"ffn_type": "mptglu"}}, "mpt ffn_config.ffn_type='mptglu'"),
    ("mpt", {**MPT, "no_bias": False}, "mpt no_bias=False"),
    ("mpt", {**MPT, "expansion_ratio": 2}, "mpt expansion_ratio=2"),
    ("mpt", {**MPT, "logit_scale": 0.5}, "mpt logit_scale=0.5"),
    ("mpt", {**MPT, "embedding_fraction": 0.1}, "mpt embedding_fraction=0.1"),
    ("mpt", {**MPT, "norm_type": "rmsnorm"}, "mpt norm_type='rmsnorm'"),
    ("bloom", dict(model_type="bloom", hidden_size=64, n_head=4, n_layer=2, vocab_size=128,
                   apply_residual_connection_post_layernorm=True), "bloom apply_residual_connection_post_layernorm"),
    ("jais2", dict(model_type="jais2", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                   num_hidden_layers=2, vocab_size=128, hidden_act="silu"), "jais2 hidden_act='silu'"),
]


@pytest.mark.parametrize("family, hf, message", REFUSED, ids=[r[2][:40] for r in REFUSED])
def test_unsupported_hf_settings_are_refused(family: str, hf: Dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf(hf, family)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("family, change, field", [
    ("bloom", dict(embed_layernorm=False), "embed_layernorm=False"),
    ("bloom", dict(position_embedding_type="none"), "position_embedding_type='none'"),
    ("mpt", dict(alibi_bias_max=4.0), "alibi_bias_max=4.0"),
    ("starcoder2", dict(add_bias_linear=False, add_qkv_bias=True), "bias_places="),
    ("nemotron", dict(apply_layernorm_1p=False), "apply_layernorm_1p=False"),
    ("jais2", dict(activation="swiglu", ffn_hidden_size=128), "activation=swiglu"),
])
def test_export_refuses_what_the_family_cannot_express(family: str, change: Dict[str, Any], field: str) -> None:
    case = CASES[family]
    model = build_hf_model(case)
    cfg = dataclasses.replace(config_from_hf(model.config.to_dict(), family), **change)
    with pytest.raises(RegistryError) as error:
        get_family(family).to_hf_config(cfg)
    assert f"{family} cannot express" in str(error.value) and field in str(error.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_config_reloads_with_the_same_logits(name: str) -> None:
    case = CASES[name]
    model = build_hf_model(case)
    family = get_family(case[3])
    cfg: TransformerConfig = config_from_hf(model.config.to_dict(), case[3])
    exported = family.to_hf_config(cfg)  # no original config: every architecture field comes from ours
    config = transformers.AutoConfig.for_model(**exported)
    reloaded = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                             attn_implementation="eager").eval()
    reloaded.load_state_dict(model.state_dict())
    input_ids = torch.randint(0, cfg.vocab_size, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids).logits, model(input_ids).logits), name

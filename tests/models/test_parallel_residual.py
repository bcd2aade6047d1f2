"""The parallel-residual families beyond the shared parity/round-trip/training tests
(mindspeed_llm/models/families/parallel_residual.py): CodeGen's blocked q/v/k layout against an explicit loop, the
round trip HF -> TP2 PP2 -> HF of the variant cases (Falcon's other layouts, sequential GPT-NeoX, Phi with
q/k norms), Hub-style config keys, and the HF settings that are refused with a one-line RegistryError.

    python -m pytest tests/models/test_parallel_residual.py -q
"""
from __future__ import annotations

from typing import Any, Dict

import pytest
import torch

import tests.models.test_zoo_roundtrip as roundtrip
from mindspeed_llm.models.qkv_layout import blocked_to_ours, ours_to_blocked
from mindspeed_llm.models.registry import RegistryError, get_family
from tests.models.test_zoo_parity import CASES, build_hf_model


def codegen_rows_by_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: int) -> torch.Tensor:
    """transformers' CodeGen: the fused output viewed as [blocks, 3 * width] splits into q, v, k per block."""
    width = q.size(0) // blocks
    rows = []
    for b in range(blocks):
        rows += [q[b * width:(b + 1) * width], v[b * width:(b + 1) * width], k[b * width:(b + 1) * width]]
    return torch.cat(rows)


@pytest.mark.parametrize("bias", [False, True])
def test_codegen_layout_matches_loop_and_inverts(bias: bool) -> None:
    q, k, v = (torch.randn(24, *(() if bias else (5,))) for _ in range(3))
    ours = torch.cat([q, k, v])
    blocked = codegen_rows_by_loop(q, k, v, 4)
    assert torch.equal(ours_to_blocked(ours, 4), blocked)
    assert torch.equal(blocked_to_ours(blocked, 4), ours)


@pytest.mark.parametrize("name", ["gpt_neox_sequential", "phi_qk_layernorm_gqa", "falcon_new_arch",
                                  "falcon_new_arch_one_norm", "falcon_rw"])
def test_variant_round_trip_is_exact(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(roundtrip, "case_for", lambda family: CASES[name])
    roundtrip.test_hf_tp2_pp2_hf_round_trip_is_exact(name, tmp_path)


NEOX_20B = dict(model_type="gpt_neox", hidden_size=6144, intermediate_size=24576, num_attention_heads=64,
                num_hidden_layers=44, vocab_size=50432, rotary_emb_base=10000, rotary_pct=0.25,
                use_parallel_residual=True, hidden_act="gelu_fast", layer_norm_eps=1e-5, tie_word_embeddings=False)


def test_hub_config_keys() -> None:
    neox = get_family("gpt_neox").to_config(NEOX_20B)
    assert neox["rotary_percent"] == 0.25 and neox["activation"] == "gelu_tanh" and neox["parallel_residual"]
    falcon_7b = dict(model_type="falcon", hidden_size=4544, num_attention_heads=71, num_hidden_layers=32,
                     vocab_size=65024, multi_query=True, parallel_attn=True, bias=False, alibi=False,
                     new_decoder_architecture=False)
    falcon = get_family("falcon").to_config(falcon_7b)
    assert falcon["num_query_groups"] == 1 and falcon["parallel_residual_shared_norm"]
    assert falcon["ffn_hidden_size"] == 4 * 4544 and not falcon["untie_embeddings_and_output_weights"]


@pytest.mark.parametrize("family, changes, key", [
    ("falcon", dict(alibi=True), "alibi"),
    ("falcon", dict(new_decoder_architecture=True, parallel_attn=False), "parallel_attn"),
    ("falcon", dict(num_ln_in_parallel_attn=2), "num_ln_in_parallel_attn"),
    ("falcon", dict(multi_query=False, num_kv_heads=2), "num_kv_heads"),
    ("gptj", dict(rotary_dim=None), "rotary_dim"),
    ("gptj", dict(tie_word_embeddings=True), "tie_word_embeddings"),
    ("phi", dict(tie_word_embeddings=True), "tie_word_embeddings"),
    ("phi", dict(head_dim=8), "head_dim"),
    ("codegen", dict(tie_word_embeddings=True), "tie_word_embeddings"),
    ("gpt_neox_japanese", dict(hidden_act="gelu_10"), "hidden_act"),
    ("persimmon", dict(rope_parameters={"rope_type": "longrope", "factor": 2.0}), "longrope"),
    ("gpt_neox", dict(hidden_act="silu"), "hidden_act"),
    ("gpt_neox", dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}), "dynamic"),
])
def test_unsupported_settings_are_one_line_errors(family: str, changes: Dict[str, Any], key: str) -> None:
    case = next(case for case in CASES.values() if case[3] == family)
    hf = {**build_hf_model(case).config.to_dict(), **changes}
    with pytest.raises(RegistryError) as error:
        get_family(family).to_config(hf)
    message = str(error.value)
    assert family in message and key in message and "\n" not in message


def test_tied_checkpoint_with_its_own_output_copy_converts(tmp_path) -> None:
    """Old tied GPT-NeoX-Japanese checkpoints also store ``embed_out.weight`` (the tied copy): not an unused
    tensor, as ``lm_head.weight`` is not for Llama-layout families."""
    from safetensors.torch import load_file, save_file

    model = build_hf_model(CASES["gpt_neox_japanese"])
    hf_dir = tmp_path / "hf"
    model.save_pretrained(hf_dir)
    path = hf_dir / "model.safetensors"
    tensors = load_file(str(path))
    assert "embed_out.weight" not in tensors
    tensors["embed_out.weight"] = tensors["gpt_neox_japanese.embed_in.weight"].clone()
    save_file(tensors, str(path), metadata={"format": "pt"})
    roundtrip.convert("hf", "mg", str(hf_dir), str(tmp_path / "mg"), "--model-type-hf", "gpt_neox_japanese")

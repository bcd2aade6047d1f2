"""The absolute-position families (mindspeed_llm/models/families/absolute_positions.py): refusals and variant
round trips.

HF settings the decoder does not model are one-line RegistryErrors naming
the family and the key; configs our HF families cannot express are refused
on the way back; and the variant cases of ``cases_absolute_positions`` (not only the
one named after each family, which test_zoo_roundtrip covers) convert HF ->
TP 2 x PP 2 -> HF with identical tensors and logits.

    python -m pytest tests/models/test_absolute_positions.py -q
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family
from tests.models.test_hf_parity import hf_logits
from tests.models.test_zoo_parity import CASES, build_hf_model
from tests.models.test_zoo_roundtrip import convert, layer_split
from tests.unit.test_convert_ckpt import read_safetensors

SIZES: Dict[str, Dict[str, Any]] = {
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=128),
    "opt": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, max_position_embeddings=64,
                vocab_size=128),
    "xglm": dict(d_model=64, num_layers=2, attention_heads=4, ffn_dim=128, max_position_embeddings=64, vocab_size=128),
    "gpt_neo": dict(hidden_size=64, num_layers=2, num_heads=4, max_position_embeddings=64, vocab_size=128,
                    attention_types=[[["global", "local"], 1]]),
}


@pytest.mark.parametrize("family, settings, message", [
    ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), "gpt2 scale_attn_by_inverse_layer_idx=True is not supported"),
    ("gpt2", dict(reorder_and_upcast_attn=True), "gpt2 reorder_and_upcast_attn=True is not supported"),
    ("gpt2", dict(activation_function="quick_gelu"), "gpt2 activation_function='quick_gelu' is not supported"),
    ("opt", dict(do_layer_norm_before=False), "opt do_layer_norm_before=False is not supported"),
    ("opt", dict(_remove_final_layer_norm=True), "opt _remove_final_layer_norm=True is not supported"),
    ("opt", dict(word_embed_proj_dim=32), "opt word_embed_proj_dim=32 != hidden_size=64"),
    ("xglm", dict(pad_token_id=5), "xglm pad_token_id=5 zeroes sinusoidal position row 5"),
    ("xglm", dict(add_cross_attention=True), "xglm add_cross_attention=True is not supported"),
    ("gpt_neo", dict(attention_types=[[["global", "local"], 2]]), "gpt_neo attention_types give 4 layers"),
])
def test_unsupported_settings_are_one_line_errors(family: str, settings: Dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**SIZES[family], **settings}, family)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_gpt_neo_layers_map_to_windows_and_back() -> None:
    hf = {**SIZES["gpt_neo"], "attention_types": [[["global", "local"], 3]], "num_layers": 6, "window_size": 5}
    config = config_from_hf(hf, "gpt_neo")
    assert [config.layer_window(i) for i in range(6)] == [None, 5, None, 5, None, 5]
    back = get_family("gpt_neo").to_hf_config(config)
    assert back["attention_types"] == [[["global", "local"], 3]] and back["window_size"] == 5


@pytest.mark.parametrize("family, change, message", [
    ("gpt2", dict(num_query_groups=2), "gpt2 cannot express num_query_groups=2"),
    ("gpt2", dict(softmax_scale=0.5), "gpt2 cannot express softmax_scale=0.5"),
    ("opt", dict(position_embedding_offset=0), "opt cannot express position_embedding_offset=0"),
    ("xglm", dict(position_embedding_type="learned_absolute"), "xglm cannot express position_embedding_type"),
])
def test_configs_without_an_hf_equivalent_are_refused(family: str, change: Dict[str, Any], message: str) -> None:
    config = dataclasses.replace(config_from_hf(SIZES[family], family), **change)
    with pytest.raises(RegistryError, match=message):
        get_family(family).to_hf_config(config)


@pytest.mark.parametrize("name", ["gpt2_untied_unscaled", "gpt_bigcode_mha", "opt_no_bias_no_affine",
                                  "biogpt_unscaled_untied", "xglm_untied_relu"])
def test_variant_round_trip_is_exact(name: str, tmp_path) -> None:
    case = CASES[name]
    model = build_hf_model(case)
    hf_dir, mg_dir, out_dir = (str(tmp_path / n) for n in ("hf", "mg", "hf_out"))
    model.save_pretrained(hf_dir)
    convert("hf", "mg", hf_dir, mg_dir, "--model-type-hf", case[3], "--target-tensor-parallel-size", "2",
            "--target-pipeline-parallel-size", "2", *layer_split(model.config.num_hidden_layers, 2))
    convert("mg", "hf", mg_dir, out_dir)
    expected, written = read_safetensors(hf_dir), read_safetensors(out_dir)
    assert sorted(written) == sorted(expected)
    assert all(torch.equal(written[n], t) for n, t in expected.items())
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
    input_ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    assert (hf_logits(reloaded, input_ids) - hf_logits(model, input_ids)).abs().max().item() <= 1e-6

"""The text model of a multimodal checkpoint: Qwen3.5 and Qwen3.5-MoE saved as ``*ForConditionalGeneration``.

The converter reads ``text_config`` and the ``model.language_model.*`` tensors as the text family's
(``qwen3_5_text``, ``qwen3_5_moe_text``), leaves the vision tower (``model.visual.*``) out with a note, and gives
the logits transformers' multimodal model gives for text alone (fp32, 1e-4) at TP 1 and, through TP 2 x PP 2, the
text model's tensors back, identical, as the text family's checkpoint (``*ForCausalLM``).

    python -m pytest -q tests/models/test_multimodal_text.py
"""
from __future__ import annotations

import json
import os
from typing import Dict

import pytest
import torch
import transformers

from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.convert.hf import HFSource
from tests.models.test_hf_parity import hf_logits, our_logits
from tests.models.test_zoo_parity import BASE, CASES, load_ours
from tests.models.test_zoo_roundtrip import convert, layer_split
from tests.unit.test_convert_ckpt import read_safetensors
from tools.convert_ckpt import main as convert_main
from core.models.gpt_model import layout_state

VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
              num_position_embeddings=16)
# multimodal classes -> the parity case of their text model
MULTIMODAL = {"qwen3_5": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", "qwen3_5_text"),
              "qwen3_5_moe": ("Qwen3_5MoeConfig", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe_text")}
SEQ, BATCH = 12, 2


def multimodal_model(model_type: str) -> transformers.PreTrainedModel:
    """A tiny random multimodal model whose text model is the parity case's, every weight perturbed."""
    config_cls, model_cls, case = MULTIMODAL[model_type]
    text = {**BASE, **CASES[case][2]}
    config = getattr(transformers, config_cls)(text_config=text, vision_config=VISION)
    config.text_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


@pytest.mark.parametrize("model_type", sorted(MULTIMODAL))
def test_the_text_model_of_a_multimodal_checkpoint_converts(model_type: str, tmp_path, capfd) -> None:
    model = multimodal_model(model_type)
    hf_dir, mg_dir, pp_dir, out_dir = (str(tmp_path / name) for name in ("hf", "mg", "mg_pp", "hf_out"))
    model.save_pretrained(hf_dir, max_shard_size="60KB")
    saved = read_safetensors(hf_dir)
    tower = [name for name in saved if name.startswith("model.visual.")]
    assert tower and json.load(open(os.path.join(hf_dir, "config.json")))["model_type"] == model_type

    convert("hf", "mg", hf_dir, mg_dir)  # the family from config.json
    assert f"leaving out {len(tower)} tensor(s) of model.visual.*" in capfd.readouterr().err
    input_ids = torch.randint(0, BASE["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    diff = (our_logits(load_ours(mg_dir, layout_state(1)), input_ids) - hf_logits(model, input_ids)).abs().max()
    assert diff.item() <= 1e-4, f"{model_type}: max abs diff {diff.item()}"

    case = CASES[MULTIMODAL[model_type][2]]
    convert("hf", "mg", hf_dir, pp_dir, "--model-type-hf", model_type, "--target-tensor-parallel-size", "2",
            "--target-pipeline-parallel-size", "2", *layer_split(BASE["num_hidden_layers"], 2))
    convert("mg", "hf", pp_dir, out_dir)
    written = read_safetensors(out_dir)
    expected: Dict[str, torch.Tensor] = {name.replace("model.language_model.", "model.", 1): tensor
                                         for name, tensor in saved.items() if name not in tower}
    assert sorted(written) == sorted(expected)
    assert all(torch.equal(written[name], tensor) for name, tensor in expected.items())
    exported = json.load(open(os.path.join(out_dir, "config.json")))
    assert exported["model_type"] == case[3] and exported["architectures"] == [case[1]]


def test_a_multimodal_config_must_agree_on_tied_embeddings(tmp_path) -> None:
    model = multimodal_model("qwen3_5")
    model.save_pretrained(tmp_path)
    config = json.load(open(tmp_path / "config.json"))
    config["text_config"]["tie_word_embeddings"] = not config["tie_word_embeddings"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match="tie_word_embeddings is False but text_config says True"):
        HFSource(str(tmp_path), None)


def test_the_mtp_layer_transformers_does_not_load_is_left_out(tmp_path, capfd) -> None:
    """Published Qwen3-Next checkpoints carry their MTP layer (``mtp.*``), which Qwen3NextForCausalLM ignores:
    the converter leaves it out with a note and converts the rest exactly; any other stray tensor is refused."""
    from safetensors.torch import load_file, save_file

    from tests.models.test_zoo_parity import build_hf_model

    model = build_hf_model(CASES["qwen3_next"])
    model.save_pretrained(tmp_path / "hf")
    single = tmp_path / "hf" / "model.safetensors"
    tensors = load_file(single)
    mtp = {"mtp.fc.weight": torch.randn(64, 128), "mtp.norm.weight": torch.ones(64),
           "mtp.layers.0.input_layernorm.weight": torch.ones(64)}
    save_file({**tensors, **mtp}, single, metadata={"format": "pt"})
    convert("hf", "mg", str(tmp_path / "hf"), str(tmp_path / "mg"))
    assert "leaving out 3 tensor(s) of mtp.*, which Qwen3NextForCausalLM does not load either" in capfd.readouterr().err
    input_ids = torch.randint(0, BASE["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    diff = (our_logits(load_ours(str(tmp_path / "mg"), layout_state(1)), input_ids) - hf_logits(model, input_ids))
    assert diff.abs().max().item() <= 1e-4
    save_file({**tensors, "extra.weight": torch.ones(2)}, single, metadata={"format": "pt"})
    code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(tmp_path / "hf"),
                         "--save-dir", str(tmp_path / "mg_stray")])
    assert code != 0 and "1 tensor(s) in" in capfd.readouterr().err

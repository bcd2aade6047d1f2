"""The converter carries MTP layers in DeepSeek-V3's HF layout both ways, at TP 2 x PP 2.

A test-only family (Llama layers plus :func:`mtp_weight_rules`, ``num_nextn_predict_layers`` in
config.json) stands for DeepSeek-V3, whose family another change adds. HF -> mg (TP 2, PP 2) -> HF
gives identical tensors, the MTP layers' copies of ``embed_tokens`` and ``shared_head.head``
included; every mg file holds exactly what training builds (the last stage: the MTP modules and
its copy of the word embeddings), and a differing copy is refused in one line.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import pytest
import torch
from safetensors.torch import save_file

from core.models.gpt_model import build_model, layout_state
from mindspeed_llm.models import registry
from mindspeed_llm.models.registry import LLAMA_WEIGHTS, Family, get_family, mtp_weight_rules
from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_ckpt_pp import assert_same_hf, assert_training_layout, chunk_dicts, convert
from tests.unit.test_mtp import DEPTH, LAYERS, _config, _to_hf
from tools.convert_ckpt import main as convert_main

FAMILY = "llama-mtp-test"


def _to_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**get_family("llama").to_config(hf), "mtp_num_layers": hf.get("num_nextn_predict_layers") or None}


def _to_hf_config(cfg) -> Dict[str, Any]:
    return {**get_family("llama").to_hf_config_fn(cfg), "num_nextn_predict_layers": cfg.mtp_num_layers or 0}


@pytest.fixture()
def mtp_family(monkeypatch) -> str:
    family = Family(FAMILY, "llama", "LlamaForCausalLM", _to_config, _to_hf_config,
                    weights_for=lambda cfg: mtp_weight_rules(cfg) + LLAMA_WEIGHTS)
    monkeypatch.setitem(registry.FAMILIES, FAMILY, family)
    return FAMILY


def _save_hf(path: str, tensors: Dict[str, torch.Tensor]) -> str:
    cfg = _config()
    os.makedirs(path)
    save_file({name: t.clone() for name, t in tensors.items()}, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json"), "w") as handle:
        json.dump(_to_hf_config(cfg) | {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, handle)
    return path


@pytest.fixture()
def hf_dir(tmp_path) -> str:
    model = build_model(_config(), layout_state(), torch.device("cpu"), seed=5)
    return _save_hf(str(tmp_path / "hf"), _to_hf(model, _config()))


def test_hf_mg_tp2_pp2_hf_round_trip_is_exact(mtp_family, hf_dir, tmp_path) -> None:
    mg_dir, out_dir = str(tmp_path / "mg"), str(tmp_path / "out")
    convert("hf", "mg", hf_dir, mg_dir, "--model-type-hf", mtp_family, "--target-tensor-parallel-size", "2",
            "--target-pipeline-parallel-size", "2")
    files = assert_training_layout(mg_dir)
    first, last = chunk_dicts(files[(0, 0)])[0], chunk_dicts(files[(0, 1)])[0]
    assert not any(name.startswith("mtp.") for name in first)
    assert {f"mtp.layers.{k}.eh_proj.weight" for k in range(DEPTH)} <= set(last)
    assert torch.equal(last["embedding.word_embeddings.weight"], first["embedding.word_embeddings.weight"])
    assert last["mtp.layers.0.eh_proj.weight"].shape == (16, 64)  # [h/tp, 2h]
    convert("mg", "hf", mg_dir, out_dir, "--model-type-hf", mtp_family)
    assert_same_hf(hf_dir, out_dir)
    out = read_safetensors(out_dir)
    assert f"model.layers.{LAYERS + DEPTH - 1}.shared_head.head.weight" in out


def test_a_differing_copy_is_refused(mtp_family, tmp_path, capsys) -> None:
    model = build_model(_config(), layout_state(), torch.device("cpu"), seed=5)
    tensors = _to_hf(model, _config())
    tensors[f"model.layers.{LAYERS}.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] + 1
    hf_dir = _save_hf(str(tmp_path / "bad"), tensors)
    code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", str(tmp_path / "mg"), "--model-type-hf", mtp_family])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "copy of the word embeddings" in err[-1]
    assert not os.path.exists(tmp_path / "mg")

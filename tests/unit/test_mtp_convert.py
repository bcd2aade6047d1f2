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


@pytest.mark.parametrize("case_name", ["deepseek_v3", "glm4_moe"])
def test_deepseek_v3_layout_mtp_layers_round_trip_at_tp2_pp2_ep2(case_name: str, tmp_path) -> None:
    """The registered families with MTP (DeepSeek-V3, GLM-4.5): a tiny transformers model one layer deeper gives
    the MTP layer's decoder tensors, plus enorm / hnorm / eh_proj / shared_head and the embedding copies; HF ->
    mg TP 2 x PP 2 x EP 2 -> HF is exact, the mg files hold the MTP module, and the same weights without the MTP
    layer (as transformers saves them) convert without MTP."""
    from tests.models.test_zoo_parity import CASES, build_hf_model

    config_cls, model_cls, overrides, name = CASES[case_name]
    layers = 3
    model = build_hf_model((config_cls, model_cls, {**overrides, "num_hidden_layers": layers + 1}, name))
    model.save_pretrained(str(tmp_path / "deeper"))  # transformers' saved layout (one tensor per expert)
    tensors = read_safetensors(str(tmp_path / "deeper"))
    hidden = model.config.hidden_size
    generator = torch.Generator().manual_seed(11)
    mtp = f"model.layers.{layers}."
    for norm in ("enorm", "hnorm", "shared_head.norm"):
        tensors[mtp + norm + ".weight"] = 1 + 0.1 * torch.randn(hidden, generator=generator)
    tensors[mtp + "eh_proj.weight"] = 0.05 * torch.randn(hidden, 2 * hidden, generator=generator)
    tensors[mtp + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
    tensors[mtp + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    hf_config = {**model.config.to_dict(), "num_hidden_layers": layers, "num_nextn_predict_layers": 1}
    last = _round_trip_with_and_without_mtp(tensors, hf_config, mtp, tmp_path)
    assert "mtp.layers.0.eh_proj.weight" in last["model"]


def _round_trip_with_and_without_mtp(tensors: Dict[str, torch.Tensor], hf_config: Dict[str, Any], mtp: str,
                                     tmp_path) -> Dict[str, Any]:
    """HF (``tensors``, ``hf_config`` with one MTP layer) -> mg TP 2 x PP 2 x EP 2 -> HF must be exact; the tensors
    without those under ``mtp`` convert (without MTP). Returns the last stage's mg file of TP rank 0, EP rank 1."""
    source = tmp_path / "hf"
    os.makedirs(source)
    save_file(tensors, str(source / "model.safetensors"))
    (source / "config.json").write_text(json.dumps(hf_config))
    mg, back = str(tmp_path / "mg"), str(tmp_path / "back")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(source),
                         "--save-dir", mg, "--target-tensor-parallel-size", "2", "--target-pipeline-parallel-size",
                         "2", "--num-layer-list", "1,2", "--target-expert-parallel-size", "2"]) == 0
    last = torch.load(os.path.join(mg, "release", "mp_rank_00_001_001", "model_optim_rng.pt"), weights_only=True)
    assert last["transformer_config"]["mtp_num_layers"] == 1
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", mg,
                         "--save-dir", back]) == 0
    written = read_safetensors(back)
    assert sorted(written) == sorted(tensors)
    assert all(torch.equal(written[k], v) for k, v in tensors.items())
    without = tmp_path / "hf_without_mtp"
    os.makedirs(without)
    save_file({k: v for k, v in tensors.items() if not k.startswith(mtp)}, str(without / "model.safetensors"))
    (without / "config.json").write_text(json.dumps(hf_config))
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(without),
                         "--save-dir", str(tmp_path / "mg_without")]) == 0
    return last


def test_deepseek_v4_mtp_layer_round_trips_at_tp2_pp2_ep2(tmp_path) -> None:
    """DeepSeek-V4's MTP module in DeepSeek's layout (``mtp.0.*``: enorm, hnorm, e_proj, h_proj, norm, hc_head_* and a
    sliding-window layer's tensors, taken from a transformers model one layer deeper): HF -> mg TP 2 x PP 2 x EP 2 ->
    HF is exact, e_proj and h_proj are the columns of eh_proj, and the weights without ``mtp.*`` (as transformers
    saves them) convert without MTP."""
    from tests.models.test_zoo_parity import CASES, build_hf_model

    config_cls, model_cls, overrides, name = CASES["deepseek_v4"]
    layers = len(overrides["layer_types"])
    deeper = {**overrides, "num_hidden_layers": layers + 1,
              "layer_types": overrides["layer_types"] + ["sliding_attention"],
              "mlp_layer_types": overrides["mlp_layer_types"] + ["moe"]}
    model = build_hf_model((config_cls, model_cls, deeper, name))
    model.save_pretrained(str(tmp_path / "deeper"))
    saved = read_safetensors(str(tmp_path / "deeper"))
    layer = f"model.layers.{layers}."
    tensors = {("mtp.0." + key[len(layer):] if key.startswith(layer) else key): value for key, value in saved.items()}
    hidden, streams = model.config.hidden_size, model.config.hc_mult
    generator = torch.Generator().manual_seed(7)
    for norm in ("enorm", "hnorm", "norm"):
        tensors[f"mtp.0.{norm}.weight"] = 1 + 0.1 * torch.randn(hidden, generator=generator)
    for proj in ("e_proj", "h_proj"):
        tensors[f"mtp.0.{proj}.weight"] = 0.05 * torch.randn(hidden, hidden, generator=generator)
    tensors["mtp.0.hc_head_fn"] = 0.05 * torch.randn(streams, streams * hidden, generator=generator)
    tensors["mtp.0.hc_head_base"] = 0.1 * torch.randn(streams, generator=generator)
    tensors["mtp.0.hc_head_scale"] = torch.ones(1)
    hf_config = {**model.config.to_dict(), "num_hidden_layers": layers, "layer_types": overrides["layer_types"],
                 "mlp_layer_types": overrides["mlp_layer_types"], "num_nextn_predict_layers": 1}
    last = _round_trip_with_and_without_mtp(tensors, hf_config, "mtp.", tmp_path)
    eh_proj = last["model"]["mtp.layers.0.eh_proj.weight"]  # [h / tp, 2h]: TP rank 0's rows of [e_proj | h_proj]
    fused = torch.cat([tensors["mtp.0.e_proj.weight"], tensors["mtp.0.h_proj.weight"]], dim=1)  # [h, 2h]
    assert eh_proj.shape == (hidden // 2, 2 * hidden) and torch.equal(eh_proj, fused[:hidden // 2])
    assert "mtp.layers.0.hc_head.fn" in last["model"]

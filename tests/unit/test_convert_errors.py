"""Converter bad input: one line naming the family and the tensor, key or file, exit
status 2, and no output directory that looks complete.

    python -m pytest tests/unit/test_convert_errors.py -q
"""
from __future__ import annotations

import json
import os
import shutil
from typing import List

import pytest
import torch
import transformers

from core.checkpointing import TRACKER_FILENAME, checkpoint_file, load_file
from mindspeed_llm.convert.hf import HFSource
from tools.convert_ckpt import main as convert_main

HF = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          vocab_size=64, max_position_embeddings=64)
HF_MG = ["--load-model-type", "hf", "--save-model-type", "mg"]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> str:
    """A tiny Llama saved in several shards with an index."""
    path = str(tmp_path_factory.mktemp("errors") / "llama")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF, dtype="float32")).save_pretrained(
        path, max_shard_size="20KB")
    assert os.path.isfile(os.path.join(path, "model.safetensors.index.json"))
    return path


def copy(hf_dir: str, tmp_path) -> str:
    return shutil.copytree(hf_dir, str(tmp_path / "src"))


def expect_error(capsys, argv: List[str], *fragments: str) -> str:
    """Exit status 2, one stderr line with every fragment, and nothing at --save-dir or beside it."""
    save = argv[argv.index("--save-dir") + 1]
    assert convert_main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convert_ckpt: error")]
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not os.path.exists(save)
    parent = os.path.dirname(os.path.abspath(save))
    assert not [n for n in os.listdir(parent) if ".converting-" in n]
    return lines[0]


def test_model_type_by_hf_and_mindspeed_names(hf_dir: str, tmp_path) -> None:
    """The family from config.json, from an HF model_type and from MindSpeed's name give the same files."""
    outputs = {}
    for name in (None, "llama", "llama2"):
        out = str(tmp_path / f"mg_{name}")
        flags = ["--model-type-hf", name] if name else []
        assert convert_main(HF_MG + ["--load-dir", hf_dir, "--save-dir", out] + flags) == 0
        outputs[name] = load_file(checkpoint_file(out, None, 0, 0, 1, release=True))
        assert outputs[name]["args"].model_type_hf == "llama2"
    for key, value in outputs[None]["model"].items():
        assert torch.equal(value, outputs["llama"]["model"][key]) and torch.equal(value, outputs["llama2"]["model"][key])
    back = str(tmp_path / "hf_back")  # mg -> hf: the family from the checkpoint
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                         str(tmp_path / "mg_None"), "--save-dir", back]) == 0
    assert json.load(open(os.path.join(back, "config.json")))["model_type"] == "llama"


def test_unsupported_model_type(capsys, hf_dir: str, tmp_path) -> None:
    """A model type nobody knows lists the supported ones; one transformers has but we refuse gives its reason."""
    src = copy(hf_dir, tmp_path)
    config = json.load(open(os.path.join(src, "config.json")))
    json.dump({**config, "model_type": "made_up_lm"}, open(os.path.join(src, "config.json"), "w"))
    expect_error(capsys, HF_MG + ["--load-dir", src, "--save-dir", str(tmp_path / "out")],
                 "model_type 'made_up_lm' is not supported; supported model types: ", "llama", "mistral", "qwen2",
                 "config.json")
    json.dump({**config, "model_type": "gemma3n_text"}, open(os.path.join(src, "config.json"), "w"))
    expect_error(capsys, HF_MG + ["--load-dir", src, "--save-dir", str(tmp_path / "out")],
                 "config.json: gemma3n_text is not supported: Gemma 3n's AltUp")


def test_index_names_a_missing_shard(capsys, hf_dir: str, tmp_path) -> None:
    src = copy(hf_dir, tmp_path)
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    shard = sorted(set(index["weight_map"].values()))[-1]
    os.remove(os.path.join(src, shard))
    expect_error(capsys, HF_MG + ["--load-dir", src, "--save-dir", str(tmp_path / "out")],
                 f"lists shard {shard}, which is missing", "family llama2")


# An HF index or file lacking a tensor: tests/unit/test_convert_ckpt.py::test_error_missing_tensor_in_index.
def test_megatron_checkpoint_lacks_a_tensor(capsys, hf_dir: str, tmp_path) -> None:
    mg = str(tmp_path / "mg")
    assert convert_main(HF_MG + ["--load-dir", hf_dir, "--save-dir", mg]) == 0
    path = checkpoint_file(mg, None, 0, 0, 1, release=True)
    checkpoint = load_file(path)
    del checkpoint["model"]["decoder.layers.0.self_attention.linear_qkv.weight"]
    torch.save(checkpoint, path)
    expect_error(capsys, ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", mg, "--save-dir",
                          str(tmp_path / "out")],
                 "'decoder.layers.0.self_attention.linear_qkv.weight' needed by family llama2 is missing")


@pytest.mark.parametrize("target", ["mg", "hf"])
def test_failure_midway_leaves_nothing_and_keeps_an_earlier_conversion(hf_dir: str, tmp_path, monkeypatch,
                                                                        target: str) -> None:
    save = str(tmp_path / "out")
    argv = ["--load-model-type", "hf", "--save-model-type", target, "--load-dir", hf_dir]
    assert convert_main(argv + ["--save-dir", save]) == 0
    before = sorted(os.listdir(save))
    calls = []
    read = HFSource.read

    def failing_read(self, name, hf_names, layout):  # fails after some tensors were written
        calls.append(name)
        if len(calls) > 5:
            raise RuntimeError("disk full")
        return read(self, name, hf_names, layout)

    monkeypatch.setattr(HFSource, "read", failing_read)
    for directory in (save, str(tmp_path / "fresh")):
        calls.clear()
        with pytest.raises(RuntimeError, match="disk full"):
            convert_main(argv + ["--save-dir", directory, "--target-tensor-parallel-size", "1", "--overwrite"]
                         if target == "mg" else argv + ["--save-dir", directory, "--max-shard-size", "1KB",
                                                        "--overwrite"])
        assert not [n for n in os.listdir(tmp_path) if ".converting-" in n]
    assert not os.path.exists(str(tmp_path / "fresh"))
    assert sorted(os.listdir(save)) == before  # the earlier, complete conversion is untouched
    marker = TRACKER_FILENAME if target == "mg" else "config.json"
    assert os.path.isfile(os.path.join(save, marker))

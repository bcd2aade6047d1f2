"""Checkpoint conversion (``tools/convert_ckpt.py``) and the architecture registry.

Round trips HF -> mg (TP 1 and 2) -> HF give identical tensors and an
equivalent config; mg TP2 -> mg TP1 re-sharding equals the direct conversion;
every bad input gives its one-line error with exit code 2 and leaves nothing
that looks like a valid checkpoint in ``--save-dir``.

    python -m pytest tests/unit/test_convert_ckpt.py -q
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

from core.checkpointing import TRACKER_FILENAME, checkpoint_file, load_file
from mindspeed_llm.models import FAMILIES, RegistryError, config_from_hf, get_family, known_families
from mindspeed_llm.models.registry import family_for_hf_config
from tools.convert_ckpt import main as convert_main
from mindspeed_llm.convert.arguments import parse_size

BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=101, max_position_embeddings=256)
ARCH_FIELDS = ("model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
               "rms_norm_eps", "hidden_act", "tie_word_embeddings")


def save_hf(root: str, name: str, config_cls: str, model_cls: str, max_shard_size: str = "60KB",
            **overrides: Any) -> str:
    """Save a tiny random HF model (fp32, weights perturbed) under ``root/name``; return its dir."""
    config = getattr(transformers, config_cls)(**{**BASE, **overrides}, dtype="float32")
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    path = os.path.join(root, name)
    model.save_pretrained(path, max_shard_size=max_shard_size)
    return path


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory) -> Dict[str, str]:
    root = str(tmp_path_factory.mktemp("hf"))
    return {
        "llama": save_hf(root, "llama", "LlamaConfig", "LlamaForCausalLM",
                         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=64)),
        "qwen2_tied": save_hf(root, "qwen2_tied", "Qwen2Config", "Qwen2ForCausalLM", tie_word_embeddings=True,
                              num_key_value_heads=1),
        "mistral_single": save_hf(root, "mistral_single", "MistralConfig", "MistralForCausalLM",
                                  max_shard_size="50MB", sliding_window=128),
        "odd_heads": save_hf(root, "odd_heads", "LlamaConfig", "LlamaForCausalLM", max_shard_size="50MB",
                             hidden_size=48, num_attention_heads=6, num_key_value_heads=3, intermediate_size=100),
    }


def run(*flags: str) -> int:
    return convert_main(list(flags))


def hf_to_mg(hf_dir: str, mg_dir: str, tp: int, *extra: str) -> None:
    assert run("--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir, "--save-dir", mg_dir,
               "--target-tensor-parallel-size", str(tp), *extra) == 0


def mg_to(kind: str, mg_dir: str, out_dir: str, *extra: str) -> None:
    assert run("--load-model-type", "mg", "--save-model-type", kind, "--load-dir", mg_dir, "--save-dir", out_dir,
               *extra) == 0


def read_safetensors(hf_dir: str) -> Dict[str, torch.Tensor]:
    files = [f for f in os.listdir(hf_dir) if f.endswith(".safetensors")]
    tensors = {}
    for file in files:
        with safe_open(os.path.join(hf_dir, file), framework="pt") as handle:
            tensors.update({name: handle.get_tensor(name) for name in handle.keys()})
    return tensors


def read_json(path: str) -> Dict[str, Any]:
    with open(path) as handle:
        return json.load(handle)


def effective(config: Dict[str, Any], key: str) -> Any:
    """A config value, with HF's defaults for keys older configs omit."""
    if key == "head_dim" and config.get(key) is None:
        return config["hidden_size"] // config["num_attention_heads"]
    return config.get(key)


def mg_states(mg_dir: str, tp: int) -> List[Dict[str, Any]]:
    return [load_file(checkpoint_file(mg_dir, None, rank, 0, 1, release=True)) for rank in range(tp)]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("case", ["llama", "qwen2_tied", "mistral_single"])
@pytest.mark.parametrize("tp", [1, 2])
def test_hf_mg_hf_round_trip_is_exact(hf_dirs, tmp_path, case: str, tp: int) -> None:
    hf_dir = hf_dirs[case]
    mg_dir, out_dir = str(tmp_path / "mg"), str(tmp_path / "hf")
    hf_to_mg(hf_dir, mg_dir, tp)
    assert open(os.path.join(mg_dir, TRACKER_FILENAME)).read() == "release"
    mg_to("hf", mg_dir, out_dir, "--max-shard-size", "60KB")

    original, result = read_safetensors(hf_dir), read_safetensors(out_dir)
    assert sorted(original) == sorted(result)
    for name, tensor in original.items():
        assert torch.equal(tensor, result[name]), name

    before, after = read_json(os.path.join(hf_dir, "config.json")), read_json(os.path.join(out_dir, "config.json"))
    family = {"llama": "llama2", "qwen2_tied": "qwen2", "mistral_single": "mistral"}[case]
    assert config_from_hf(before, family).to_dict() == config_from_hf(after, family).to_dict()
    for key in ARCH_FIELDS:
        assert effective(before, key) == effective(after, key), key
    reloaded = transformers.AutoConfig.from_pretrained(out_dir)  # transformers reads it back
    assert reloaded.model_type == before["model_type"]
    if case == "mistral_single":
        assert after["sliding_window"] == 128
    index = os.path.join(out_dir, "model.safetensors.index.json")
    assert os.path.isfile(index) and set(read_json(index)["weight_map"]) == set(original)


def test_checkpoint_contents(hf_dirs, tmp_path) -> None:
    mg_dir = str(tmp_path / "mg")
    hf_to_mg(hf_dirs["qwen2_tied"], mg_dir, 2, "--params-dtype", "bf16", "--make-vocab-size-divisible-by", "8")
    ranks = mg_states(mg_dir, 2)
    args = ranks[0]["args"]
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (2, 1)
    assert (args.vocab_size, args.padded_vocab_size, args.num_query_groups) == (101, 112, 1)
    assert args.group_query_attention and args.model_type_hf == "qwen2" and args.bf16
    assert ranks[0]["iteration"] == 0 and ranks[0]["hf_config"]["model_type"] == "qwen2"
    assert ranks[0]["transformer_config"]["add_qkv_bias"] is True
    embedding = ranks[1]["model"]["embedding.word_embeddings.weight"]  # [112/2, 64], rows 101.. padding
    assert embedding.shape == (56, 64) and embedding.dtype == torch.bfloat16
    assert torch.count_nonzero(embedding[101 - 56:]) == 0
    assert "output_layer.weight" not in ranks[0]["model"]  # tied


def test_mg_reshard_equals_direct(hf_dirs, tmp_path) -> None:
    hf_dir = hf_dirs["llama"]
    direct1, direct2 = str(tmp_path / "tp1"), str(tmp_path / "tp2")
    hf_to_mg(hf_dir, direct1, 1)
    hf_to_mg(hf_dir, direct2, 2, "--make-vocab-size-divisible-by", "16")
    down, up = str(tmp_path / "tp2_to_tp1"), str(tmp_path / "tp1_to_tp2")
    mg_to("mg", direct2, down, "--target-tensor-parallel-size", "1", "--make-vocab-size-divisible-by", "1")
    mg_to("mg", direct1, up, "--target-tensor-parallel-size", "2", "--make-vocab-size-divisible-by", "16")
    for left, right, tp in ((direct1, down, 1), (direct2, up, 2)):
        for a, b in zip(mg_states(left, tp), mg_states(right, tp)):
            assert a["transformer_config"] == b["transformer_config"]
            assert sorted(a["model"]) == sorted(b["model"])
            for name, tensor in a["model"].items():
                assert torch.equal(tensor, b["model"][name]), name


# --------------------------------------------------------------------------- errors


def expect_error(capsys, save_dir: str, flags: List[str], *fragments: str) -> str:
    """Run with bad input: exit code 2, one line naming the problem, nothing valid in save_dir."""
    code = run(*flags, "--save-dir", save_dir)
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert message.startswith("convert_ckpt: error: ")
    for fragment in fragments:
        assert fragment in message, message
    for marker in (TRACKER_FILENAME, "config.json", "model.safetensors", "model.safetensors.index.json"):
        assert not os.path.exists(os.path.join(save_dir, marker))
    return message


HF_MG = ["--load-model-type", "hf", "--save-model-type", "mg"]


def test_error_load_dir_missing(capsys, tmp_path) -> None:
    missing = str(tmp_path / "nowhere")
    expect_error(capsys, str(tmp_path / "out"), HF_MG + ["--load-dir", missing],
                 f"--load-dir {missing} does not exist")


def test_error_hf_dir_without_config(capsys, hf_dirs, tmp_path) -> None:
    broken = str(tmp_path / "no_config")
    shutil.copytree(hf_dirs["llama"], broken)
    os.remove(os.path.join(broken, "config.json"))
    expect_error(capsys, str(tmp_path / "out"), HF_MG + ["--load-dir", broken],
                 f"--load-dir {broken} has no config.json", "--load-model-type mg")


def test_error_missing_tensor_in_index(capsys, hf_dirs, tmp_path) -> None:
    broken = str(tmp_path / "no_tensor")
    shutil.copytree(hf_dirs["llama"], broken)
    index_path = os.path.join(broken, "model.safetensors.index.json")
    index = read_json(index_path)
    del index["weight_map"]["model.layers.1.mlp.up_proj.weight"]
    with open(index_path, "w") as handle:
        json.dump(index, handle)
    expect_error(capsys, str(tmp_path / "out"), HF_MG + ["--load-dir", broken],
                 "tensor 'model.layers.1.mlp.up_proj.weight' needed by family llama2 is missing from", index_path)


def test_error_missing_tensor_in_single_file(capsys, hf_dirs, tmp_path) -> None:
    broken = str(tmp_path / "no_tensor_single")
    shutil.copytree(hf_dirs["mistral_single"], broken)
    path = os.path.join(broken, "model.safetensors")
    tensors = read_safetensors(broken)
    del tensors["model.norm.weight"]
    save_file(tensors, path, metadata={"format": "pt"})
    expect_error(capsys, str(tmp_path / "out"), HF_MG + ["--load-dir", broken],
                 "tensor 'model.norm.weight' needed by family mistral is missing from", path)


def test_error_unknown_family(capsys, hf_dirs, tmp_path) -> None:
    message = expect_error(capsys, str(tmp_path / "out"),
                           HF_MG + ["--load-dir", hf_dirs["llama"], "--model-type-hf", "gpt5"],
                           "--model-type-hf 'gpt5' is unknown; known: ")
    assert all(name in message for name in ("llama2", "llama3", "mistral", "qwen2"))


def test_error_wrong_family_leaves_tensors_unused(capsys, hf_dirs, tmp_path) -> None:
    expect_error(capsys, str(tmp_path / "out"), HF_MG + ["--load-dir", hf_dirs["qwen2_tied"], "--model-type-hf",
                                                         "llama2"],
                 "not used by --model-type-hf llama2", "self_attn.k_proj.bias")


@pytest.mark.parametrize("tp, fragments", [
    (4, ["--target-tensor-parallel-size 4 does not divide num_attention_heads 6"]),
    (2, ["--target-tensor-parallel-size 2 does not divide num_key_value_heads 3"]),
    (3, ["--target-tensor-parallel-size 3 does not divide ffn_hidden_size 100"]),
])
def test_error_tp_does_not_divide(capsys, hf_dirs, tmp_path, tp: int, fragments: List[str]) -> None:
    message = expect_error(capsys, str(tmp_path / "out"),
                           HF_MG + ["--load-dir", hf_dirs["odd_heads"], "--target-tensor-parallel-size", str(tp)],
                           *fragments)
    if tp != 3:
        assert "ffn_hidden_size" not in message


def test_error_pipeline_size_does_not_divide_layers(capsys, hf_dirs, tmp_path) -> None:
    # more pipeline errors: tests/unit/test_convert_ckpt_pp.py
    expect_error(capsys, str(tmp_path / "out"),
                 HF_MG + ["--load-dir", hf_dirs["llama"], "--target-pipeline-parallel-size", "3"],
                 "is not divisible by --target-pipeline-parallel-size (3)", "--num-layer-list")


def test_error_mg_dir_without_tracker(capsys, hf_dirs, tmp_path) -> None:
    expect_error(capsys, str(tmp_path / "out"),
                 ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", hf_dirs["llama"]],
                 f"--load-dir {hf_dirs['llama']} has no {TRACKER_FILENAME}", "--load-model-type hf")


def test_error_bad_shard_size(capsys, hf_dirs, tmp_path) -> None:
    expect_error(capsys, str(tmp_path / "out"),
                 ["--load-model-type", "hf", "--save-model-type", "hf", "--load-dir", hf_dirs["llama"],
                  "--max-shard-size", "lots"], "--max-shard-size 'lots' is not a size")


def test_failed_run_removes_stale_tracker(capsys, hf_dirs, tmp_path) -> None:
    """A previous conversion's tracker is not left pointing at a half-rewritten checkpoint."""
    save = str(tmp_path / "out")
    hf_to_mg(hf_dirs["llama"], save, 1)
    broken = str(tmp_path / "broken")
    shutil.copytree(hf_dirs["llama"], broken)
    os.remove(os.path.join(broken, "config.json"))
    code = run(*HF_MG, "--load-dir", broken, "--save-dir", save, "--overwrite")
    assert code == 2  # rejected before writing: the earlier, complete checkpoint stays valid
    assert os.path.isfile(os.path.join(save, TRACKER_FILENAME))


# --------------------------------------------------------------------------- registry


def test_registry_reads_both_rope_styles() -> None:
    legacy = dict(BASE, model_type="llama", rope_theta=500000.0,
                  rope_scaling=dict(type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_max_position_embeddings=8192))
    new = dict(BASE, model_type="llama", rope_parameters=dict(rope_theta=500000.0, rope_type="llama3", factor=8.0,
                                                              low_freq_factor=1.0, high_freq_factor=4.0,
                                                              original_max_position_embeddings=8192))
    a, b = config_from_hf(legacy, "llama3"), config_from_hf(new, "llama3")
    assert a.to_dict() == b.to_dict()
    assert (a.rotary_base, a.rope_scaling_type, a.rope_original_max_position_embeddings) == (500000.0, "llama3", 8192)
    linear = config_from_hf(dict(BASE, rope_scaling=dict(rope_type="linear", factor=2.0)), "llama2")
    assert (linear.rope_scaling_type, linear.rope_scaling_factor) == ("linear", 2.0)
    assert config_from_hf(BASE, "llama2").make_vocab_size_divisible_by == 1


def test_registry_rejects_what_the_decoder_cannot_model() -> None:
    with pytest.raises(RegistryError, match="rope scaling type 'dynamic' is not supported"):
        config_from_hf(dict(BASE, rope_scaling=dict(rope_type="dynamic", factor=4.0)), "llama2")
    with pytest.raises(RegistryError, match="yarn rope attention_factor=2.0 is not supported"):
        config_from_hf(dict(BASE, rope_scaling=dict(rope_type="yarn", factor=4.0, attention_factor=2.0)), "llama2")
    with pytest.raises(RegistryError, match="hidden_act 'relu'"):
        config_from_hf(dict(BASE, hidden_act="relu"), "mistral")
    with pytest.raises(RegistryError, match="attention_bias=True with mlp_bias=False"):
        config_from_hf(dict(BASE, attention_bias=True), "llama2")
    with pytest.raises(RegistryError, match="'no-such-family' is unknown; known: .*llama2, .*qwen2"):
        get_family("no-such-family")


def test_family_names_resolve_from_mindspeed_and_hf_names() -> None:
    """MindSpeed's --model-type-hf names and HF model_type strings name the same family; every
    registered family resolves by its own name and its model_type, and from a config.json."""
    for name, family in (("llama2", "llama2"), ("llama", "llama2"), ("mistral", "mistral"), ("qwen", "qwen2"),
                         ("qwen2", "qwen2")):
        assert get_family(name).name == family
    for family in FAMILIES.values():
        assert get_family(family.name) is family and get_family(family.model_type).model_type == family.model_type
        assert family_for_hf_config({"model_type": family.model_type}).model_type == family.model_type
        assert {family.name, family.model_type} <= set(known_families())
    with pytest.raises(RegistryError, match=r"^cfg: model_type 'no_such_type' is not supported; supported "
                                            r"model types: .*llama.*qwen2"):
        family_for_hf_config({"model_type": "no_such_type"}, "cfg")


def test_inverse_config_is_equivalent_without_the_original() -> None:
    for family, extra in (("llama2", dict(rope_scaling=dict(rope_type="linear", factor=2.0))),
                          ("mistral", {}), ("qwen2", dict(tie_word_embeddings=True))):
        config = config_from_hf(dict(BASE, **extra), family)
        hf = get_family(family).to_hf_config(config)
        assert config_from_hf(hf, family).to_dict() == config.to_dict()
        assert hf["architectures"] == [get_family(family).architecture]


def test_parse_size() -> None:
    assert parse_size("5GB") == 5 * 10**9
    assert parse_size("2GiB") == 2 * 2**30
    assert parse_size("100KB") == 100_000
    assert parse_size("1234") == 1234


def test_streaming_checkpoint_loads_like_torch_save(tmp_path) -> None:
    """Tensors written one at a time (views, bf16, one tensor in two places) load back equal, with
    ``weights_only`` and with ``mmap``; the file appears only when closed."""
    import argparse

    from core.checkpointing import StreamingCheckpoint

    path = str(tmp_path / "mp_rank_00" / "model_optim_rng.pt")
    writer = StreamingCheckpoint(path)
    base = torch.arange(24, dtype=torch.float32)
    tensors = {"view": base[5:17].reshape(3, 4), "bf16": torch.randn(4, 6).to(torch.bfloat16),
               "column": torch.randn(6, 4).t(), "empty": torch.zeros(0, 3)}
    stored = {name: writer.add(tensor) for name, tensor in tensors.items()}
    assert not os.path.exists(path)
    writer.close({"model": stored, "model_again": {"view": stored["view"]}, "args": argparse.Namespace(tp=2),
                  "checkpoint_version": 3.0})
    for mmap in (False, True):
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        for name, tensor in tensors.items():
            assert loaded["model"][name].dtype == tensor.dtype and torch.equal(loaded["model"][name], tensor), name
        assert torch.equal(loaded["model_again"]["view"], tensors["view"])
        assert loaded["args"].tp == 2 and loaded["checkpoint_version"] == 3.0
    assert os.listdir(os.path.dirname(path)) == ["model_optim_rng.pt"]

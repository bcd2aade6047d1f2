"""The converter never damages what it is pointed at.

- ``--save-dir`` holding a checkpoint of the target's kind (a training run's tracker and ``iter_*``
  directories, an earlier ``release``, an HF model) is refused without ``--overwrite``: one line naming the
  directory and the flag, exit 2, every byte in the directory unchanged. A new or empty directory is written.
- A tensor holding NaN / Inf is refused (one line naming the tensor and its source file, nothing written)
  unless ``--allow-non-finite`` (a warning).
- Written files get the permissions the umask allows (0644 under 022), not 0600.

    python -m pytest tests/unit/test_convert_safety.py -q
"""
from __future__ import annotations

import os
import shutil
from typing import Dict, List

import pytest
import torch
import transformers

from core.checkpointing import COMPLETE_MARKER, TRACKER_FILENAME, checkpoint_file, read_tracker
from tools.convert_ckpt import main as convert_main

HF = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          vocab_size=64, max_position_embeddings=64)
POISONED = "decoder.layers.1.mlp.linear_fc1.weight"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Dict[str, str]:
    """A tiny Llama in HF form and converted to mg (TP 1)."""
    root = tmp_path_factory.mktemp("safety")
    hf = str(root / "hf")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF, dtype="float32")).save_pretrained(hf)
    mg = str(root / "mg")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf, "--save-dir", mg]) == 0
    return {"hf": hf, "mg": mg}


def snapshot(root: str) -> Dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), directories included as empty entries."""
    files = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            files[os.path.relpath(os.path.join(folder, name), root) + "/"] = b""
        for name in names:
            path = os.path.join(folder, name)
            files[os.path.relpath(path, root)] = open(path, "rb").read()
    return files


def error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if "convert_ckpt: error" in line]
    assert len(lines) == 1, lines
    return lines[0][lines[0].index("convert_ckpt: error"):]


def training_dir(mg: str, path: str, iterations: List[int], tracker: bool = True) -> str:
    """A training run's --save: ``iter_*`` directories with their completion markers and (optionally) a tracker."""
    for iteration in iterations:
        target = os.path.join(path, f"iter_{iteration:07d}")
        shutil.copytree(os.path.join(mg, "release"), target)
        with open(os.path.join(target, COMPLETE_MARKER), "w") as handle:
            handle.write(str(iteration))
    if tracker:
        with open(os.path.join(path, TRACKER_FILENAME), "w") as handle:
            handle.write(str(iterations[-1]))
    return path


def hf_to(kind: str, hf: str, save: str, *extra: str) -> int:
    return convert_main(["--load-model-type", "hf", "--save-model-type", kind, "--load-dir", hf, "--save-dir", save,
                         *extra])


def mg_to(kind: str, mg: str, save: str, *extra: str) -> int:
    return convert_main(["--load-model-type", "mg", "--save-model-type", kind, "--load-dir", mg, "--save-dir", save,
                         *extra])


@pytest.mark.parametrize("tracker", [True, False], ids=["tracker", "iter-dirs-only"])
@pytest.mark.parametrize("kind", ["mg", "megatron"])
def test_a_training_directory_is_never_overwritten_without_the_flag(sources, tmp_path, capsys, tracker: bool,
                                                                    kind: str) -> None:
    save = training_dir(sources["mg"], str(tmp_path / "run"), [10, 20], tracker=tracker)
    before = snapshot(save)
    assert hf_to(kind, sources["hf"], save) == 2
    line = error_line(capsys)
    assert f"--save-dir {save} already holds a checkpoint" in line and "--overwrite" in line, line
    assert snapshot(save) == before  # every byte as it was
    assert not [n for n in os.listdir(tmp_path) if ".converting-" in n]
    assert hf_to(kind, sources["hf"], save, "--overwrite") == 0  # asked for: replaced, the iterations kept
    assert read_tracker(save) == (0, True)
    assert {k: v for k, v in snapshot(save).items() if k.startswith("iter_")} == \
        {k: v for k, v in before.items() if k.startswith("iter_")}


def test_an_earlier_release_is_not_replaced_without_the_flag(sources, tmp_path, capsys) -> None:
    save = str(tmp_path / "out")
    assert hf_to("mg", sources["hf"], save) == 0  # a new directory
    before = snapshot(save)
    assert hf_to("mg", sources["hf"], save, "--target-tensor-parallel-size", "2") == 2
    assert "--overwrite" in error_line(capsys)
    assert snapshot(save) == before
    assert hf_to("mg", sources["hf"], save, "--target-tensor-parallel-size", "2", "--overwrite") == 0
    assert os.path.isfile(checkpoint_file(save, None, 1, 0, 1, release=True))


def test_a_new_or_empty_directory_or_one_without_a_checkpoint_is_written(sources, tmp_path) -> None:
    empty = str(tmp_path / "empty")
    os.makedirs(empty)
    assert hf_to("mg", sources["hf"], empty) == 0 and read_tracker(empty) == (0, True)
    assert mg_to("hf", sources["mg"], str(tmp_path / "new" / "hf")) == 0
    other = str(tmp_path / "notes")
    os.makedirs(other)
    open(os.path.join(other, "README.md"), "w").write("notes\n")
    assert mg_to("hf", sources["mg"], other) == 0
    assert open(os.path.join(other, "README.md")).read() == "notes\n"
    # a Megatron checkpoint beside an HF model: neither kind replaces the other
    assert hf_to("mg", sources["hf"], other) == 0
    assert sorted(os.listdir(other)) == sorted(["README.md", TRACKER_FILENAME, "config.json", "model.safetensors",
                                               "release"])


def test_an_hf_model_directory_is_never_overwritten_without_the_flag(sources, tmp_path, capsys) -> None:
    save = shutil.copytree(sources["hf"], str(tmp_path / "model"))
    before = snapshot(save)
    assert mg_to("hf", sources["mg"], save, "--max-shard-size", "20KB") == 2
    line = error_line(capsys)
    assert f"--save-dir {save} already holds a checkpoint (config.json, model.safetensors)" in line, line
    assert snapshot(save) == before
    assert mg_to("hf", sources["mg"], save, "--max-shard-size", "20KB", "--overwrite") == 0
    names = os.listdir(save)
    assert "model.safetensors" not in names and "model.safetensors.index.json" in names  # replaced, not mixed


def test_a_save_dir_that_is_a_file_is_refused(sources, tmp_path, capsys) -> None:
    path = str(tmp_path / "file")
    open(path, "w").write("x")
    assert hf_to("mg", sources["hf"], path) == 2
    assert f"--save-dir {path} is a file" in error_line(capsys)
    assert open(path).read() == "x"


def poisoned_mg(mg: str, path: str, value: float) -> str:
    """A copy of the mg checkpoint with one element of ``POISONED`` set to ``value``."""
    shutil.copytree(mg, path)
    file = checkpoint_file(path, None, 0, 0, 1, release=True)
    state = torch.load(file, weights_only=False)
    state["model"][POISONED][3, 5] = value
    torch.save(state, file)
    return file


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("kind", ["hf", "mg"])
def test_non_finite_weights_are_refused_naming_the_tensor_and_file(sources, tmp_path, capsys, kind: str,
                                                                   value: float) -> None:
    file = poisoned_mg(sources["mg"], str(tmp_path / "diverged"), value)
    save = str(tmp_path / "out")
    extra = ["--target-tensor-parallel-size", "2"] if kind == "mg" else []
    assert mg_to(kind, str(tmp_path / "diverged"), save, *extra) == 2
    line = error_line(capsys)
    assert f"tensor '{POISONED}' in {file} holds 1 NaN/Inf value(s)" in line and "--allow-non-finite" in line, line
    assert not os.path.exists(save)
    assert not [n for n in os.listdir(tmp_path) if ".converting-" in n]  # the staging directory is gone
    assert mg_to(kind, str(tmp_path / "diverged"), save, *extra, "--allow-non-finite") == 0
    assert "warning: tensor" in capsys.readouterr().err


def test_non_finite_hf_weights_are_refused(sources, tmp_path, capsys) -> None:
    poisoned_mg(sources["mg"], str(tmp_path / "diverged"), float("nan"))
    hf = str(tmp_path / "hf_nan")
    assert mg_to("hf", str(tmp_path / "diverged"), hf, "--allow-non-finite") == 0
    capsys.readouterr()
    save = str(tmp_path / "out")
    assert hf_to("mg", hf, save) == 2
    line = error_line(capsys)
    # linear_fc1 is [gate; up]: row 3 is the gate projection's
    assert f"tensor 'model.layers.1.mlp.gate_proj.weight' in {os.path.join(hf, 'model.safetensors')}" in line, line
    assert not os.path.exists(save)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664)])
def test_written_files_follow_the_umask(sources, tmp_path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        outputs = [str(tmp_path / "mg"), str(tmp_path / "hf")]
        assert hf_to("mg", sources["hf"], outputs[0], "--target-tensor-parallel-size", "2") == 0
        assert mg_to("hf", outputs[0], outputs[1], "--max-shard-size", "20KB") == 0
    finally:
        os.umask(previous)
    for root in outputs:
        for folder, _, names in os.walk(root):
            assert os.stat(folder).st_mode & 0o777 == 0o777 & ~umask, folder
            for name in names:
                assert os.stat(os.path.join(folder, name)).st_mode & 0o777 == mode, (name, oct(mode))


# --------------------------------------------------------------------------- further bad inputs


def test_a_training_directory_without_its_tracker_converts_its_newest_complete_iteration(sources, tmp_path,
                                                                                          capsys) -> None:
    run = training_dir(sources["mg"], str(tmp_path / "run"), [10, 20], tracker=False)
    half = os.path.join(run, "iter_0000030")  # a save that did not finish: no marker
    shutil.copytree(os.path.join(sources["mg"], "release"), half)
    assert mg_to("hf", run, str(tmp_path / "hf")) == 0
    err = capsys.readouterr().err
    assert "iter_0000030 has no checkpoint_complete marker" in err and "newest complete iteration" in err
    assert f"{os.path.join(run, 'iter_0000020')}" in err
    for iteration in (10, 20):
        os.remove(os.path.join(run, f"iter_{iteration:07d}", COMPLETE_MARKER))
    assert mg_to("hf", run, str(tmp_path / "hf2")) == 2
    assert "none of its 3 iteration directories (the newest: iter_0000030) is complete" in error_line(capsys)


@pytest.mark.parametrize("tracker, fragment", [
    ("garbage", "expected an iteration number or 'release', found 'garbage'"),
    ("7", "names iteration 7, but"),
])
def test_a_bad_tracker_is_one_line(sources, tmp_path, capsys, tracker: str, fragment: str) -> None:
    source = shutil.copytree(sources["mg"], str(tmp_path / "mg"))
    open(os.path.join(source, TRACKER_FILENAME), "w").write(tracker)
    assert mg_to("hf", source, str(tmp_path / "out")) == 2
    assert fragment in error_line(capsys)


def test_a_truncated_safetensors_file_is_one_line(sources, tmp_path, capsys) -> None:
    source = shutil.copytree(sources["hf"], str(tmp_path / "hf"))
    path = os.path.join(source, "model.safetensors")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:1000])
    assert hf_to("mg", source, str(tmp_path / "out")) == 2
    assert f"{path} is truncated or not a safetensors file" in error_line(capsys)


def test_a_zero_shard_size_is_refused(sources, tmp_path, capsys) -> None:
    assert mg_to("hf", sources["mg"], str(tmp_path / "out"), "--max-shard-size", "0") == 2
    assert "--max-shard-size '0' must be more than 0" in error_line(capsys)


def test_params_dtype_overflow_is_refused(sources, tmp_path, capsys) -> None:
    poisoned_mg(sources["mg"], str(tmp_path / "big"), 1e6)  # finite in fp32, Inf in fp16
    assert mg_to("hf", str(tmp_path / "big"), str(tmp_path / "out"), "--params-dtype", "fp16") == 2
    line = error_line(capsys)
    assert f"--params-dtype fp16: 1 value(s) of tensor '{POISONED}'" in line and "would become Inf" in line, line
    assert not os.path.exists(str(tmp_path / "out"))
    assert mg_to("hf", str(tmp_path / "big"), str(tmp_path / "out"), "--params-dtype", "bf16") == 0


def test_the_tools_run_as_scripts_outside_the_checkout(tmp_path) -> None:
    """``python tools/convert_ckpt.py`` (as the docs write it) from any directory, without pip install -e."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for tool in ("convert_ckpt.py", "preprocess_data.py"):
        done = subprocess.run([sys.executable, os.path.join(repo, "tools", tool), "--help"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-1000:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_non_finite_count_is_exact_when_the_fast_sum_overflows(dtype: torch.dtype) -> None:
    from core.checkpointing import non_finite_count

    big = torch.full((64,), torch.finfo(dtype).max, dtype=dtype)  # finite values whose sum overflows
    assert non_finite_count(big) == 0
    big[[3, 7]] = torch.tensor([float("nan"), float("-inf")], dtype=dtype)
    assert non_finite_count(big) == 2 and non_finite_count(torch.arange(5)) == 0

"""Bad flags and bad checkpoints stop ``pretrain`` before any training step.

Each case must exit with status 2 and print exactly one line on stderr,
``error: ...``, that names the offending flag or file and says what to do.
A few cases run ``pretrain_gpt.py`` as a user would (a subprocess from the
repository root); the rest call ``pretrain(argv)`` in-process, with the
training step, the model build and the process-group setup replaced by
tripwires so that "before any training step" (and, for flag errors, "before
any process-group work") is checked, not assumed. Cases that need another
world size go through ``parse_and_validate(argv, world_size)``. A refused
checkpoint is left byte-for-byte as it was.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from mindspeed_llm.arguments import parse_and_validate
from mindspeed_llm import runtime
from mindspeed_llm.training import training
from mindspeed_llm.training.training import pretrain, setup, train

REPO = Path(__file__).resolve().parents[2]
ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2", "--lr", "1e-3",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "1", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1",
]
CKPT_FILE = os.path.join("iter_0000001", "mp_rank_00", "model_optim_rng.pt")


def _with(argv: List[str], **flags: Optional[str]) -> List[str]:
    """``argv`` with ``--flag value`` replaced or added (names use underscores; None: a bare switch)."""
    out = list(argv)
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is None:
            out.append(flag)
        elif flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def _snapshot(root: str) -> Dict[str, bytes]:
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            files[os.path.relpath(path, root)] = Path(path).read_bytes()
    return files


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory) -> str:
    """A real checkpoint of ARGV's model at iteration 1 (same schedule: it stops with --exit-interval)."""
    root = str(tmp_path_factory.mktemp("ckpt") / "run")
    train(setup(ARGV + ["--save", root, "--exit-interval", "1"]))
    assert os.path.isfile(os.path.join(root, CKPT_FILE))
    return root


def _damaged_copy(saved_checkpoint: str, tmp_path: Path, how: str) -> str:
    root = str(tmp_path / "ckpt")
    shutil.copytree(saved_checkpoint, root)
    path = os.path.join(root, CKPT_FILE)
    data = Path(path).read_bytes()
    if how == "truncated":
        Path(path).write_bytes(data[: len(data) // 2])
    else:
        Path(path).write_bytes(os.urandom(len(data)))
    return root


# ---------------------------------------------------------------------------- in-process tripwires

@pytest.fixture
def tripwires(monkeypatch):
    """Fail the test if pretrain gets as far as these stages."""
    reached = []

    def no_training(*_args, **_kwargs):
        reached.append("train_step")
        raise AssertionError("a training step ran")

    monkeypatch.setattr(training.Trainer, "train_step", no_training)
    real_initialize = runtime.initialize

    def watched_initialize(*args, **kwargs):
        reached.append("initialize")
        return real_initialize(*args, **kwargs)

    monkeypatch.setattr(runtime, "initialize", watched_initialize)
    return reached


def _pretrain_fails(argv: List[str], capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        pretrain(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert " iteration " not in captured.out  # no log line: nothing trained
    return _one_error_line(captured.err)


FLAG_CASES = {
    # name: (flags to set, substrings the message must contain)
    "fp16_and_bf16": ({"fp16": None, "bf16": None}, ["--fp16", "--bf16", "only one"]),
    "tp_exceeds_world": ({"tensor_model_parallel_size": "2"},
                         ["world size 1", "--tensor-model-parallel-size (2)", "--nproc-per-node"]),
    "global_batch": ({"global_batch_size": "5"}, ["--global-batch-size (5)", "--micro-batch-size (2)",
                                                  "multiple of 2"]),
    "load_missing": ({"load": "/nonexistent/ckpt/dir"}, ["--load /nonexistent/ckpt/dir", "drop --load"]),
    "context_parallel": ({"context_parallel_size": "2"},
                         ["world size 1", "--context-parallel-size (2)", "--nproc-per-node"]),
    "recompute_method_alone": ({"recompute_method": "uniform"},
                               ["--recompute-method uniform needs --recompute-granularity full"]),
    # a flag of another entry is not pretrain_gpt.py's: argparse refuses it, naming the entries that have it
    "generation_flag": ({"top_k": "5"}, ["unrecognized arguments: --top-k 5 (--top-k is a flag of inference.py, "
                                         "evaluation.py, posttrain.py --stage grpo)"]),
    "evaluation_flag": ({"task_data_path": "mmlu"}, ["--task-data-path is a flag of evaluation.py"]),
    "posttrain_flag": ({"dpo_beta": "0.2"}, ["--dpo-beta is a flag of posttrain.py --stage dpo"]),
}


@pytest.mark.parametrize("case", list(FLAG_CASES))
def test_flag_errors_stop_before_process_groups(case, capsys, tripwires):
    flags, expected = FLAG_CASES[case]
    line = _pretrain_fails(_with(ARGV, **flags), capsys)
    for text in expected:
        assert text in line, f"{text!r} not in {line!r}"
    assert tripwires == []  # parsing failed before any process-group or training work


WORLD_CASES = {
    # name: (world size, flags, substrings)
    "heads_vs_tp": (4, {"tensor_model_parallel_size": "4", "num_attention_heads": "2"},
                    ["--num-attention-heads (2)", "--tensor-model-parallel-size (4)", "TP size that divides"]),
    "kv_heads_vs_tp": (3, {"tensor_model_parallel_size": "3", "num_attention_heads": "6", "kv_channels": "16",
                           "group_query_attention": None, "num_query_groups": "2"},
                       ["--num-query-groups (2)", "--tensor-model-parallel-size (3)", "divide one another"]),
    "kv_heads_vs_heads": (1, {"num_attention_heads": "4", "group_query_attention": None, "num_query_groups": "3"},
                          ["--num-attention-heads (4)", "--num-query-groups (3)"]),
    "world_vs_tp_pp": (3, {"tensor_model_parallel_size": "2"},
                       ["world size 3", "--tensor-model-parallel-size (2)", "--pipeline-model-parallel-size (1)"]),
    "global_batch_vs_dp": (2, {"global_batch_size": "6"},
                           ["--global-batch-size (6)", "--micro-batch-size (2)", "data-parallel size (2",
                            "multiple of 4"]),
}


@pytest.mark.parametrize("case", list(WORLD_CASES))
def test_parallel_layout_errors_name_the_flags(case, capsys):
    world_size, flags, expected = WORLD_CASES[case]
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        parse_and_validate(_with(ARGV, **flags), world_size)
    assert info.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    for text in expected:
        assert text in line, f"{text!r} not in {line!r}"


def test_the_same_layouts_are_valid_when_they_fit():
    """Control: the world-size cases pass once the sizes fit (the checks are not over-eager)."""
    args = parse_and_validate(_with(ARGV, tensor_model_parallel_size="2", global_batch_size="8"), 4)
    assert (args.data_parallel_size, args.num_micro_batches) == (2, 2)
    args = parse_and_validate(_with(ARGV, tensor_model_parallel_size="2", group_query_attention=None,
                                    num_query_groups="2"), 2)
    assert args.num_query_groups == 2


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_damaged_checkpoint_is_refused_and_left_untouched(how, saved_checkpoint, tmp_path, capsys, tripwires):
    root = _damaged_copy(saved_checkpoint, tmp_path, how)
    before = _snapshot(root)
    line = _pretrain_fails(ARGV + ["--load", root, "--save", root], capsys)
    assert os.path.join(root, CKPT_FILE) in line  # names the file
    assert "truncated or corrupt" in line and "load an earlier iteration or re-save it" in line
    assert tripwires == ["initialize"]  # it got as far as building the model, no further
    assert _snapshot(root) == before  # nothing modified, deleted or added


def test_checkpoint_missing_its_file_is_refused(saved_checkpoint, tmp_path, capsys, tripwires):
    root = str(tmp_path / "ckpt")
    shutil.copytree(saved_checkpoint, root)
    os.remove(os.path.join(root, CKPT_FILE))
    before = _snapshot(root)
    line = _pretrain_fails(ARGV + ["--load", root], capsys)
    assert os.path.join(root, CKPT_FILE) in line and "missing" in line and "tools/convert_ckpt.py" in line
    assert _snapshot(root) == before


def test_bad_tracker_is_refused(saved_checkpoint, tmp_path, capsys, tripwires):
    root = str(tmp_path / "ckpt")
    shutil.copytree(saved_checkpoint, root)
    Path(root, "latest_checkpointed_iteration.txt").write_text("banana")
    before = _snapshot(root)
    line = _pretrain_fails(ARGV + ["--load", root], capsys)
    assert "latest_checkpointed_iteration.txt" in line and "'banana'" in line
    assert _snapshot(root) == before


def test_intact_checkpoint_loads(saved_checkpoint):
    """Control for the damaged cases: the undamaged copy loads and resumes at iteration 1."""
    trainer = setup(ARGV + ["--load", saved_checkpoint])
    assert trainer.iteration == 1


# ---------------------------------------------------------------------------- as a user runs it

def _run_script(argv: List[str], world_size: int = 1) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["WORLD_SIZE"] = str(world_size)
    return subprocess.run([sys.executable, "pretrain_gpt.py", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_script_heads_not_divisible_by_tp():
    # WORLD_SIZE=4 as torchrun would set it; validation fails before the process group is started
    result = _run_script(_with(ARGV, tensor_model_parallel_size="4", num_attention_heads="2"), world_size=4)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "--num-attention-heads (2)" in line and "--tensor-model-parallel-size (4)" in line
    assert " iteration " not in result.stdout


def test_script_load_path_missing(tmp_path):
    missing = str(tmp_path / "no_such_dir")
    result = _run_script(ARGV + ["--load", missing])
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert f"--load {missing}" in line and "fix the path or drop --load" in line
    assert result.stdout == ""


def test_script_truncated_checkpoint(saved_checkpoint, tmp_path):
    root = _damaged_copy(saved_checkpoint, tmp_path, "truncated")
    before = _snapshot(root)
    result = _run_script(ARGV + ["--load", root, "--save", root])
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert os.path.join(root, CKPT_FILE) in line and "truncated or corrupt" in line
    assert " iteration " not in result.stdout
    assert _snapshot(root) == before


def test_training_without_data_flags_is_refused_before_setup(capsys):
    """Neither --data-path nor --mock-data: one line naming both, exit 2."""
    from mindspeed_llm.training.training import pretrain

    argv = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
            "--micro-batch-size", "2", "--train-iters", "2", "--lr", "1e-3", "--device", "cpu"]
    with pytest.raises(SystemExit) as info:
        pretrain(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no training data") and "--data-path" in err and "--mock-data" in err

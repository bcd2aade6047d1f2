"""Resuming from a checkpoint continues training exactly where it stopped.

A run of 6 iterations is compared with a run that saves at iteration 3
(``--save --save-interval 3 --exit-interval 3``, through ``train()``) and a
fresh ``setup(argv + ['--load', DIR])`` that continues to 6. Dropout is on and
the learning rate follows a cosine schedule with warmup, so the data position,
every RNG state, the Adam moments, the schedule and (for bf16/fp16) the fp32
master weights and the loss scaler must all resume for the losses and the
weights to be bit-identical (``==`` / ``torch.equal``, no tolerance).

Also: ``--finetune`` / ``--no-load-optim`` load weights only, and the files on
disk follow Megatron's layout.
"""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Dict, List

import pytest
import torch

from core import checkpointing
from core.tensor_parallel.random import get_rng_tracker
from mindspeed_llm.training.training import Trainer, setup, train

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6", "--lr", "1e-3",
    "--lr-warmup-iters", "2", "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--weight-decay", "0.1",
    "--clip-grad", "1.0", "--attention-dropout", "0.1", "--hidden-dropout", "0.1", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "11", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1000",
]
STOP = 3
TOTAL = 6
GBS = 4
PRECISIONS = {
    "fp32": [],
    "bf16": ["--bf16"],
    # A small window makes the scaler grow at iteration 2, so at the save (iteration 3) its scale and
    # growth tracker differ from a fresh scaler's: a resume that dropped them would diverge.
    "fp16": ["--fp16", "--initial-loss-scale", "1024", "--loss-scale-window", "2"],
}



def _replace(argv: List[str], flag: str, value: str) -> List[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def _snapshot(trainer: Trainer) -> Dict[str, object]:
    """Everything that must match between two runs after the same iteration."""
    opt = trainer.optimizer
    return {
        "iteration": trainer.iteration,
        "consumed": trainer.consumed_samples,
        "weights": [p.detach().clone() for p in trainer.model.parameters()],
        "masters": [m.detach().clone() for m in opt.master_params],
        "torch_rng": torch.get_rng_state().clone(),
        "tracker_rng": get_rng_tracker().get_states(),
        "scheduler_lr": trainer.scheduler.get_lr(),
        "applied_lr": [g["lr"] for g in opt.optimizer.param_groups],
        "scaler": dict(opt.grad_scaler.state_dict()) if opt.grad_scaler is not None else None,
        "skipped": trainer.skipped_iterations,
    }


def _steps(trainer: Trainer, count: int) -> List[Dict[str, object]]:
    iterator = trainer.train_iterator()
    snaps = []
    for _ in range(count):
        trainer.train_step(iterator)
        snaps.append(_snapshot(trainer))
    return snaps


def _same_tensors(a: List[torch.Tensor], b: List[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, Dict[str, object]]:
    results = {}
    for name, extra in PRECISIONS.items():
        ckpt = str(tmp_path_factory.mktemp(f"ckpt_{name}"))
        full = setup(ARGV + extra)
        full_snaps = _steps(full, TOTAL)
        first = train(setup(ARGV + extra + ["--save", ckpt, "--save-interval", str(STOP),
                                            "--exit-interval", str(STOP)]))
        resumed = setup(ARGV + extra + ["--load", ckpt])
        loaded = _snapshot(resumed)
        resumed_snaps = _steps(resumed, TOTAL - STOP)
        results[name] = {"ckpt": ckpt, "full": full, "full_snaps": full_snaps, "first": first,
                         "resumed": resumed, "loaded": loaded, "resumed_snaps": resumed_snaps}
    return results


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_interrupted_run_stops_and_saves_at_exit_interval(runs, precision):
    run = runs[precision]
    assert run["first"].iteration == STOP
    assert run["first"].losses == run["full"].losses[:STOP]  # same seeds, same first iterations
    assert checkpointing.read_tracker(run["ckpt"]) == (STOP, False)


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_load_restores_the_state_at_the_save(runs, precision):
    """Right after --load, iteration, samples, weights, master weights, RNG and scaler equal the full run's."""
    run = runs[precision]
    loaded, ref = run["loaded"], run["full_snaps"][STOP - 1]
    assert loaded["iteration"] == STOP and loaded["consumed"] == STOP * GBS
    assert _same_tensors(loaded["weights"], ref["weights"])
    assert _same_tensors(loaded["masters"], ref["masters"])
    assert torch.equal(loaded["torch_rng"], ref["torch_rng"])
    assert set(loaded["tracker_rng"]) == set(ref["tracker_rng"])
    assert all(torch.equal(loaded["tracker_rng"][k], ref["tracker_rng"][k]) for k in ref["tracker_rng"])
    assert loaded["scheduler_lr"] == ref["scheduler_lr"]
    assert loaded["scaler"] == ref["scaler"]
    if precision == "fp16":
        # the scaler really moved before the save: grown once, one clean step into the next window
        assert loaded["scaler"] == {"scale": 2048.0, "growth_tracker": 1, "hysteresis_tracker": 2}


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_first_resumed_iteration_is_exact(runs, precision):
    """Iteration 4 (data, dropout masks, Adam moments, master weights) is bit-identical."""
    run = runs[precision]
    assert run["resumed"].losses[0] == run["full"].losses[STOP]
    ref, got = run["full_snaps"][STOP], run["resumed_snaps"][0]
    assert _same_tensors(got["weights"], ref["weights"])
    assert _same_tensors(got["masters"], ref["masters"])
    assert torch.equal(got["torch_rng"], ref["torch_rng"])
    assert got["scaler"] == ref["scaler"]


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_resumed_run_equals_uninterrupted_run(runs, precision):
    run = runs[precision]
    assert run["resumed"].losses == run["full"].losses[STOP:]  # exact, iterations 4..6
    final_ref, final = run["full_snaps"][-1], run["resumed_snaps"][-1]
    assert final["iteration"] == TOTAL and final["consumed"] == TOTAL * GBS
    assert _same_tensors(final["weights"], final_ref["weights"])
    assert _same_tensors(final["masters"], final_ref["masters"])
    assert final["scaler"] == final_ref["scaler"]


def test_optimizer_applies_the_scheduled_lr_after_resume(runs):
    """The lr inside the torch optimizer follows the schedule after a resume (load_state_dict replaces torch's group list: the scheduler must reach the new one)."""
    run = runs["fp32"]
    for ref, got in zip(run["full_snaps"][STOP:], run["resumed_snaps"]):
        assert got["scheduler_lr"] == ref["scheduler_lr"]  # the scheduler itself resumed fine
        assert got["applied_lr"] == [got["scheduler_lr"]] * len(got["applied_lr"])


def test_mixed_precision_checkpoint_holds_master_weights_and_scaler(runs):
    for precision, key in (("bf16", "fp32_from_fp16_params"), ("fp16", "grad_scaler")):
        run = runs[precision]
        path = checkpointing.checkpoint_file(run["ckpt"], STOP, 0, 0, 1)
        optimizer = torch.load(path, map_location="cpu", weights_only=True)["optimizer"]
        assert key in optimizer
        if key == "fp32_from_fp16_params":
            assert all(t.dtype == torch.float32 for t in optimizer[key])
            assert _same_tensors(optimizer[key], runs[precision]["full_snaps"][STOP - 1]["masters"])
        else:
            assert optimizer[key]["scale"] == 2048.0


# ---------------------------------------------------------------------------- weights-only loads

@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_finetune_loads_weights_only_and_restarts_at_zero(runs, precision):
    run = runs[precision]
    trainer = setup(ARGV + PRECISIONS[precision] + ["--load", run["ckpt"], "--finetune"])
    saved = run["full_snaps"][STOP - 1]
    assert _same_tensors([p.detach() for p in trainer.model.parameters()], saved["weights"])
    # master weights are refreshed from the loaded model, not left at the fresh init
    assert _same_tensors([m.detach() for m in trainer.optimizer.master_params],
                         [p.detach().float() for p in trainer.optimizer.model_params])
    assert trainer.iteration == 0 and trainer.consumed_samples == 0
    assert trainer.optimizer.optimizer.state_dict()["state"] == {}  # fresh Adam moments
    assert trainer.scheduler.num_steps == 0
    result = trainer.train_step(trainer.train_iterator())
    assert result.applied and trainer.iteration == 1


def test_no_load_optim_loads_weights_but_not_the_optimizer(runs):
    run = runs["bf16"]
    trainer = setup(ARGV + PRECISIONS["bf16"] + ["--load", run["ckpt"], "--no-load-optim"])
    saved = run["full_snaps"][STOP - 1]
    assert _same_tensors([p.detach() for p in trainer.model.parameters()], saved["weights"])
    # master weights come from the (bf16) model, not from the checkpoint's fp32 masters
    assert _same_tensors([m.detach() for m in trainer.optimizer.master_params],
                         [p.detach().float() for p in trainer.optimizer.model_params])
    assert not _same_tensors([m.detach() for m in trainer.optimizer.master_params], saved["masters"])
    assert trainer.optimizer.optimizer.state_dict()["state"] == {}
    assert trainer.iteration == STOP and trainer.consumed_samples == STOP * GBS  # not a finetune


# ---------------------------------------------------------------------------- on-disk layout

def test_checkpoint_layout(tmp_path):
    """Saves at --save-interval and at the end, Megatron names, tracker last, no temporary files."""
    root = tmp_path / "ckpt"
    trainer = train(setup(_replace(ARGV, "--train-iters", "4") + ["--save", str(root), "--save-interval", "3"]))
    assert trainer.iteration == 4
    assert sorted(os.listdir(root)) == ["iter_0000003", "iter_0000004", "latest_checkpointed_iteration.txt"]
    assert (root / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    for it in (3, 4):
        assert sorted(os.listdir(root / f"iter_{it:07d}")) == ["checkpoint_complete", "mp_rank_00"]
        assert os.listdir(root / f"iter_{it:07d}" / "mp_rank_00") == ["model_optim_rng.pt"]
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".tmp")]
    assert leftovers == []

    checkpoint = torch.load(root / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt", map_location="cpu",
                            weights_only=True)
    for key in ("model", "optimizer", "opt_param_scheduler", "rng_state", "args", "iteration",
                "checkpoint_version", "consumed_train_samples"):
        assert key in checkpoint, key
    assert checkpoint["iteration"] == 4
    assert checkpoint["consumed_train_samples"] == 4 * GBS
    assert checkpoint["checkpoint_version"] == checkpointing.CHECKPOINT_VERSION
    assert isinstance(checkpoint["args"], argparse.Namespace)
    assert checkpoint["args"].tensor_model_parallel_size == 1
    assert checkpoint["args"].pipeline_model_parallel_size == 1
    assert checkpoint["opt_param_scheduler"]["num_steps"] == 4
    assert isinstance(checkpoint["rng_state"], list) and len(checkpoint["rng_state"]) == 1  # one per DP rank
    assert set(checkpoint["model"]) == set(trainer.model.state_dict())
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(checkpoint["model"][name], value), name


def test_resuming_a_finished_run_trains_nothing(runs, tmp_path):
    """Relaunching a job whose checkpoint is at --train-iters: Megatron skips the loop."""
    ckpt = str(tmp_path / "ckpt")
    shutil.copytree(runs["fp32"]["ckpt"], ckpt)
    done = train(setup(ARGV + ["--load", ckpt, "--save", ckpt]))  # continues 3 -> 6, saves at 6
    assert checkpointing.read_tracker(ckpt) == (TOTAL, False)
    again = setup(ARGV + ["--load", ckpt])
    assert again.iteration == TOTAL
    train(again)
    assert again.losses == [] and again.iteration == TOTAL and done.iteration == TOTAL

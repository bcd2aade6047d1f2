"""Resume at TP=2 equals an uninterrupted TP=2 run; a TP=2 checkpoint is refused at TP=1.

One launch of 2 gloo processes runs, per rank: 6 uninterrupted iterations at
TP=2, then 3 iterations through ``train()`` that save at iteration 3
(``--save-interval 3 --exit-interval 3``), then a fresh ``setup`` with
``--load`` that continues to 6. Dropout is on (the per-TP-rank tracker RNG
must resume too) and the lr follows a cosine schedule with warmup. Each rank
compares its own shards, exactly. The checkpoint is then loaded by a single
process at TP=1, which must refuse it with a message naming
``--tensor-model-parallel-size`` and ``tools/convert_ckpt.py``.
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "32", "--swiglu",
    "--normalization", "RMSNorm", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6",
    "--lr", "1e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine", "--min-lr", "1e-4",
    "--weight-decay", "0.1", "--clip-grad", "1.0", "--attention-dropout", "0.1", "--hidden-dropout", "0.1",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "5", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1000",
]
TP2 = ["--tensor-model-parallel-size", "2"]
STOP, TOTAL = 3, 6



def _snapshot(trainer) -> Dict[str, object]:
    from core.tensor_parallel.random import get_rng_tracker
    return {"weights": [p.detach().clone() for p in trainer.model.parameters()],
            "torch_rng": torch.get_rng_state().clone(),
            "tracker_rng": get_rng_tracker().get_states()}


def _steps(trainer, count: int) -> List[Dict[str, object]]:
    iterator = trainer.train_iterator()
    snaps = []
    for _ in range(count):
        trainer.train_step(iterator)
        snaps.append(_snapshot(trainer))
    return snaps


def worker(rank: int, world_size: int, ckpt: str) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup, train

    full = setup(ARGV + TP2)
    full_snaps = _steps(full, TOTAL)
    first = train(setup(ARGV + TP2 + ["--save", ckpt, "--save-interval", str(STOP), "--exit-interval", str(STOP)]))
    resumed = setup(ARGV + TP2 + ["--load", ckpt])
    loaded = {"iteration": resumed.iteration, "consumed": resumed.consumed_samples, **_snapshot(resumed)}
    resumed_snaps = _steps(resumed, TOTAL - STOP)
    return {"tp_rank": full.state.tp_rank, "full_losses": full.losses, "first_losses": first.losses,
            "resumed_losses": resumed.losses, "full_snaps": full_snaps, "loaded": loaded,
            "resumed_snaps": resumed_snaps}


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("ckpt_tp2"))


@pytest.fixture(scope="module")
def results(ckpt_dir) -> List[Dict[str, object]]:
    return run_distributed(2, worker, ckpt_dir)


def _same(a: List[torch.Tensor], b: List[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def _same_states(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> bool:
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_tp2_checkpoint_has_one_file_per_tp_rank(results, ckpt_dir):
    assert [r["tp_rank"] for r in results] == [0, 1]
    assert open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")).read().strip() == str(STOP)
    assert sorted(os.listdir(os.path.join(ckpt_dir, f"iter_{STOP:07d}"))) == ["checkpoint_complete", "mp_rank_00", "mp_rank_01"]
    for rank_dir in ("mp_rank_00", "mp_rank_01"):
        assert os.listdir(os.path.join(ckpt_dir, f"iter_{STOP:07d}", rank_dir)) == ["model_optim_rng.pt"]


def test_tp2_load_restores_the_state_at_the_save(results):
    for r in results:
        assert r["first_losses"] == r["full_losses"][:STOP]
        ref, loaded = r["full_snaps"][STOP - 1], r["loaded"]
        assert loaded["iteration"] == STOP and loaded["consumed"] == STOP * 4
        assert _same(loaded["weights"], ref["weights"])
        assert torch.equal(loaded["torch_rng"], ref["torch_rng"])
        assert _same_states(loaded["tracker_rng"], ref["tracker_rng"])  # per-TP-rank dropout RNG


def test_tp2_first_resumed_iteration_is_exact(results):
    # the two TP ranks hold different tracker states (different dropout in their heads)
    assert not _same_states(results[0]["loaded"]["tracker_rng"], results[1]["loaded"]["tracker_rng"])
    for r in results:
        assert r["resumed_losses"][0] == r["full_losses"][STOP]
        ref, got = r["full_snaps"][STOP], r["resumed_snaps"][0]
        assert _same(got["weights"], ref["weights"])
        assert _same_states(got["tracker_rng"], ref["tracker_rng"])


def test_tp2_resume_equals_uninterrupted(results):
    for r in results:
        assert r["resumed_losses"] == r["full_losses"][STOP:]
        assert _same(r["resumed_snaps"][-1]["weights"], r["full_snaps"][-1]["weights"])


def test_tp2_checkpoint_refused_at_tp1(results, ckpt_dir, capsys):
    from core.checkpointing import CheckpointError
    from mindspeed_llm.training.training import pretrain, setup

    with pytest.raises(CheckpointError) as info:
        setup(ARGV + ["--load", ckpt_dir])
    message = str(info.value)
    assert "--tensor-model-parallel-size" in message and "tools/convert_ckpt.py" in message
    assert "mp_rank_00" in message  # names the file

    before = {name: open(os.path.join(ckpt_dir, f"iter_{STOP:07d}", name, "model_optim_rng.pt"), "rb").read()
              for name in ("mp_rank_00", "mp_rank_01")}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        pretrain(ARGV + ["--load", ckpt_dir])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--tensor-model-parallel-size" in err[0]
    assert "tools/convert_ckpt.py" in err[0]
    for name, data in before.items():  # the refused checkpoint is left untouched
        assert open(os.path.join(ckpt_dir, f"iter_{STOP:07d}", name, "model_optim_rng.pt"), "rb").read() == data

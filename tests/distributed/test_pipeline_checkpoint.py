"""Resume at PP=2 (1F1B) and PP=2 + VPP=2 (interleaved) equals an uninterrupted run.

One launch of 2 gloo processes runs, per configuration: 4 uninterrupted
iterations, then ``train()`` with ``--save-interval 2 --exit-interval 2``
(save at iteration 2), then a fresh ``setup`` with ``--load`` that continues to
4. Dropout is on (each pipeline rank's RNG must resume) and the lr follows a
cosine schedule with warmup. The losses of iterations 3-4 and the final weights
of every chunk must equal the uninterrupted run exactly. The pipeline
checkpoint has one ``mp_rank_00_00P`` directory per stage, ``model`` (PP) or
``model0``/``model1`` (VPP) keys, and is refused with a one-line hint at
``tools/convert_ckpt.py`` by a run with another pipeline layout.

    python -m pytest tests/distributed/test_pipeline_checkpoint.py -q
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed

ARGV = [
    "--num-layers", "4", "--hidden-size", "32", "--ffn-hidden-size", "64", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "16", "--max-position-embeddings", "16",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-3",
    "--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--weight-decay", "0.1",
    "--clip-grad", "1.0", "--attention-dropout", "0.1", "--hidden-dropout", "0.1", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "9", "--device", "cpu",
    "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
]
CONFIGS = {
    "pp2_tied": ["--pipeline-model-parallel-size", "2"],
    "pp2_vpp2_untied": ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                        "--untie-embeddings-and-output-weights"],
}
STOP, TOTAL = 2, 4


def _weights(trainer) -> Dict[str, torch.Tensor]:
    return {f"{chunk}:{name}": param.detach().clone()
            for chunk, model in enumerate(trainer.models) for name, param in model.named_parameters()}


def _run(argv: List[str], ckpt: str) -> Dict[str, object]:
    from core.checkpointing import CheckpointError
    from mindspeed_llm.training.training import setup, train

    full = setup(argv)
    iterator = full.train_iterator()
    for _ in range(TOTAL):
        full.train_step(iterator)
    first = train(setup(argv + ["--save", ckpt, "--save-interval", str(STOP), "--exit-interval", str(STOP)]))
    resumed = setup(argv + ["--load", ckpt])
    loaded = {"iteration": resumed.iteration, "consumed": resumed.consumed_samples}
    iterator = resumed.train_iterator()
    for _ in range(TOTAL - STOP):
        resumed.train_step(iterator)
    # another pipeline layout is refused: VPP <-> no VPP
    other = [a for a in argv]
    if "--num-layers-per-virtual-pipeline-stage" in other:
        at = other.index("--num-layers-per-virtual-pipeline-stage")
        del other[at:at + 2]
    else:
        other += ["--num-layers-per-virtual-pipeline-stage", "1"]
    try:
        setup(other + ["--load", ckpt])
        refusal = None
    except CheckpointError as error:
        refusal = str(error)
    return {"full_losses": full.losses, "first_losses": first.losses, "resumed_losses": resumed.losses,
            "full_weights": _weights(full), "resumed_weights": _weights(resumed), "loaded": loaded,
            "refusal": refusal, "pp_rank": full.state.pp_rank}


def worker(rank: int, world_size: int, root: str) -> Dict[str, Dict[str, object]]:
    return {name: _run(ARGV + flags, os.path.join(root, name)) for name, flags in CONFIGS.items()}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("pp_ckpt"))


@pytest.fixture(scope="module")
def results(root) -> List[Dict[str, Dict[str, object]]]:
    return run_distributed(2, worker, root)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pipeline_checkpoint_layout(results, root, name):
    from core.checkpointing import load_file

    ckpt = os.path.join(root, name)
    assert open(os.path.join(ckpt, "latest_checkpointed_iteration.txt")).read().strip() == str(STOP)
    iteration_dir = os.path.join(ckpt, f"iter_{STOP:07d}")
    assert sorted(os.listdir(iteration_dir)) == ["checkpoint_complete", "mp_rank_00_000", "mp_rank_00_001"]
    keys = ["model0", "model1"] if "vpp2" in name else ["model"]
    for stage in range(2):
        checkpoint = load_file(os.path.join(iteration_dir, f"mp_rank_00_{stage:03d}", "model_optim_rng.pt"))
        assert sorted(k for k in checkpoint if k.startswith("model")) == keys
        assert checkpoint["args"].pipeline_model_parallel_size == 2
        names = {n for k in keys for n in checkpoint[k]}
        assert ("embedding.word_embeddings.weight" in names) == (stage == 0)
        assert ("output_layer.weight" in names) == (stage == 1)  # tied: the last stage's copy
    assert [r[name]["pp_rank"] for r in results] == [0, 1]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pipeline_resume_equals_uninterrupted(results, name):
    for per_rank in results:
        r = per_rank[name]
        assert r["first_losses"] == r["full_losses"][:STOP]
        assert r["loaded"] == {"iteration": STOP, "consumed": STOP * 4}
        assert r["resumed_losses"] == r["full_losses"][STOP:]  # iterations 3-4, exactly
        assert r["resumed_losses"][0] != r["full_losses"][0]
        assert set(r["resumed_weights"]) == set(r["full_weights"])
        for key, value in r["full_weights"].items():
            assert torch.equal(r["resumed_weights"][key], value), key


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_other_pipeline_layout_is_refused(results, name):
    for per_rank in results:
        message = per_rank[name]["refusal"]
        assert message is not None and "virtual pipeline chunk" in message and "tools/convert_ckpt.py" in message


def test_pp2_checkpoint_refused_at_pp1(results, root):
    from core.checkpointing import CheckpointError
    from mindspeed_llm.training.training import setup

    expected = "--pipeline-model-parallel-size 2 .*this run uses --pipeline-model-parallel-size 1.*convert_ckpt.py"
    with pytest.raises(CheckpointError, match=expected):
        setup(ARGV + ["--load", os.path.join(root, "pp2_tied")])

"""``--ckpt-format torch_dist``: a checkpoint saved at one layout loads at another, optimizer state included.

One launch of 4 gloo processes. A TP2 x PP2 run (GQA with 2 KV heads, SwiGLU,
a vocabulary that TP pads differently at every TP size) saves at iteration 3
and stops. Each target layout then loads it:

- TP1 x PP1 x DP4 with the distributed optimizer,
- TP4 x PP1 (the two KV heads replicated over four TP ranks),
- TP1 x PP2 x DP2 with the distributed optimizer,
- TP1 x DP4 under FSDP2,
- TP2 x DP2 under FSDP1 (FullyShardedDataParallel),
- TP2 x DP2 under FSDP2 after an asynchronous save from the distributed optimizer at TP1 x PP2 x DP2;
- FSDP2 at TP2 x DP2 (each rank writes its own shards) loads at TP1 x PP2 x DP2;
- a mixture of experts saved at TP2 x EP2 loads at EP4 with the distributed optimizer.

The distributed optimizer and FSDP2 write and read only each rank's own share (no gather over DP).
For each, the whole state right after the load (every weight, fp32 master and
Adam moment, assembled from every rank's pieces) equals, bit for bit, the
state that was saved, and the iteration, consumed samples and learning rate
continue; the next three losses equal those of the uninterrupted TP2 x PP2 run
within the tolerance the layout-equivalence tests use (other layouts sum in
another order).
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed

ARGV = [
    "--num-layers", "4", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "32", "--swiglu",
    "--normalization", "RMSNorm", "--micro-batch-size", "1", "--global-batch-size", "8", "--train-iters", "6",
    "--lr", "1e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine", "--min-lr", "1e-4",
    "--weight-decay", "0.1", "--clip-grad", "1.0", "--untie-embeddings-and-output-weights",
    "--hidden-dropout", "0", "--attention-dropout", "0",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "5", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1000",
]
SAVE_LAYOUT = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
DIST = ["--ckpt-format", "torch_dist"]
STOP = 3
TARGETS = {
    "tp1_dp4_distopt": ["--use-distributed-optimizer"],
    "tp4": ["--tensor-model-parallel-size", "4"],
    "tp1_pp2_dp2_distopt": ["--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"],
    "fsdp2_dp4": ["--use-torch-fsdp2"],
    "fsdp1_tp2_dp2": ["--tensor-model-parallel-size", "2", "--use-torch-fsdp"],
}
FSDP_SOURCE = ["--tensor-model-parallel-size", "2", "--use-torch-fsdp2"]
FSDP_TARGET = ["--pipeline-model-parallel-size", "2"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "32", "--moe-aux-loss-coeff", "0.01"]
MOE_SOURCE = ["--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2"]
MOE_TARGET = ["--expert-model-parallel-size", "4", "--use-distributed-optimizer"]
ASYNC_SOURCE = ["--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"]
ASYNC_TARGET = ["--tensor-model-parallel-size", "2", "--use-torch-fsdp2"]


def full_state(trainer) -> Dict[str, torch.Tensor]:
    """Every stored tensor, whole, assembled from every rank's pieces (on every rank). Collective."""
    import torch.distributed as dist
    from core import dist_checkpointing as fmt
    from mindspeed_llm.training import dist_checkpoint

    pieces, _ = fmt.state_to_save(trainer.dp, dist_checkpoint._where(trainer), dist_checkpoint._tied(trainer), True)
    mine = {key: (tuple(value.global_shape), [(tuple(o), t) for o, t in value.pieces.items()])
            for key, value in pieces.items()}
    every: List[Dict] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    whole: Dict[str, torch.Tensor] = {}
    for rank_pieces in every:
        for key, (shape, parts) in rank_pieces.items():
            target = whole.setdefault(key, torch.full(shape, float("nan"), dtype=parts[0][1].dtype)
                                      if parts else torch.full(shape, float("nan")))
            for offsets, tensor in parts:
                view = target
                for dim, (start, size) in enumerate(zip(offsets, tensor.shape)):
                    view = view.narrow(dim, start, size)
                view.copy_(tensor)
    return whole


def _loaded(trainer) -> Dict[str, object]:
    return {"state": full_state(trainer), "iteration": trainer.iteration, "consumed": trainer.consumed_samples,
            "lr": trainer.optimizer.param_groups[0]["lr"], "step": trainer.optimizer.scalars()["step"]}


def worker(rank: int, world_size: int, root: str) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup, train

    saved_dir, async_dir = os.path.join(root, "tp2pp2"), os.path.join(root, "async")
    reference = train(setup(ARGV + SAVE_LAYOUT))
    first = train(setup(ARGV + SAVE_LAYOUT + DIST + ["--save", saved_dir, "--save-interval", str(STOP),
                                                     "--exit-interval", str(STOP)]))
    result = {"reference": reference.losses, "first": first.losses,
              "saved": {**_loaded(first), "lr": first.optimizer.param_groups[0]["lr"]}}
    for name, layout in TARGETS.items():
        trainer = setup(ARGV + layout + ["--load", saved_dir])
        loaded = _loaded(trainer)
        result[name] = {**loaded, "losses": train(trainer).losses}
    source = train(setup(ARGV + ASYNC_SOURCE + DIST + ["--async-save", "--save", async_dir, "--save-interval",
                                                       str(STOP), "--exit-interval", str(STOP)]))
    result["async_saved"] = _loaded(source)
    trainer = setup(ARGV + ASYNC_TARGET + ["--load", async_dir])
    result["async_loaded"] = {**_loaded(trainer), "losses": train(trainer).losses}
    fsdp_dir = os.path.join(root, "fsdp2")
    fsdp = train(setup(ARGV + FSDP_SOURCE + DIST + ["--save", fsdp_dir, "--save-interval", str(STOP),
                                                    "--exit-interval", str(STOP)]))
    result["fsdp_saved"] = _loaded(fsdp)
    trainer = setup(ARGV + FSDP_TARGET + ["--load", fsdp_dir])
    result["fsdp_loaded"] = {**_loaded(trainer), "losses": train(trainer).losses}
    moe_dir = os.path.join(root, "moe")
    result["moe_reference"] = train(setup(ARGV + MOE + MOE_SOURCE)).losses
    moe = train(setup(ARGV + MOE + MOE_SOURCE + DIST + ["--save", moe_dir, "--save-interval", str(STOP),
                                                        "--exit-interval", str(STOP)]))
    result["moe_saved"] = _loaded(moe)
    trainer = setup(ARGV + MOE + MOE_TARGET + ["--load", moe_dir])
    result["moe_loaded"] = {**_loaded(trainer), "losses": train(trainer).losses}
    return result


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> List[Dict[str, object]]:
    return run_distributed(4, worker, str(tmp_path_factory.mktemp("dist_ckpt")))


def _losses(results: List[Dict], name: str) -> List[float]:
    found = [r[name]["losses"] if name in r and "losses" in r[name] else r[name] for r in results]
    found = [losses for losses in found if losses]
    assert found and all(losses == found[0] for losses in found)
    return found[0]


def _assert_same_state(got: Dict[str, torch.Tensor], saved: Dict[str, torch.Tensor]) -> None:
    assert set(got) == set(saved)
    for key, value in saved.items():
        assert not torch.isnan(value).any(), f"{key}: a part of the saved tensor was on no rank"
        assert torch.equal(got[key], value), f"{key} differs after the load"


def test_saved_state_holds_model_and_adam_state(results):
    saved = results[0]["saved"]["state"]
    assert "model.embedding.word_embeddings.weight" in saved
    assert saved["model.embedding.word_embeddings.weight"].shape == (100, 64)  # the vocabulary without padding
    assert saved["model.decoder.layers.0.self_attention.linear_qkv.weight"].shape == (128, 64)  # q 64 + k 32 + v 32
    assert any(key.startswith("optimizer.exp_avg_sq.decoder.layers.3.") for key in saved)


@pytest.mark.parametrize("name", list(TARGETS))
def test_load_at_another_layout_restores_the_whole_state(results, name):
    for r in results:
        loaded, saved = r[name], r["saved"]
        _assert_same_state(loaded["state"], saved["state"])
        assert (loaded["iteration"], loaded["consumed"]) == (STOP, STOP * 8)
        assert loaded["lr"] == saved["lr"] and loaded["step"] == saved["step"] == STOP


@pytest.mark.parametrize("name", list(TARGETS))
def test_losses_continue_as_the_uninterrupted_run(results, name):
    reference = _losses(results, "reference")
    assert _losses(results, "first") == reference[:STOP]
    torch.testing.assert_close(torch.tensor(_losses(results, name)), torch.tensor(reference[STOP:]),
                               rtol=1e-5, atol=0)


def test_async_save_from_the_distributed_optimizer_loads_under_fsdp2_tp2(results, tmp_path_factory):
    reference = _losses(results, "reference")
    for r in results:
        _assert_same_state(r["async_loaded"]["state"], r["async_saved"]["state"])
    torch.testing.assert_close(torch.tensor(_losses(results, "async_loaded")), torch.tensor(reference[STOP:]),
                               rtol=1e-5, atol=0)


def test_experts_saved_at_tp2_ep2_load_at_ep4_with_the_distributed_optimizer(results):
    for r in results:
        _assert_same_state(r["moe_loaded"]["state"], r["moe_saved"]["state"])
    saved = results[0]["moe_saved"]["state"]
    assert saved["model.decoder.layers.0.mlp.experts.linear_fc1.weight"].shape[0] == 4  # every expert, once
    reference = _losses(results, "moe_reference")
    torch.testing.assert_close(torch.tensor(_losses(results, "moe_loaded")), torch.tensor(reference[STOP:]),
                               rtol=1e-5, atol=0)


def test_fsdp2_shards_saved_at_tp2_dp2_load_at_pp2_dp2(results):
    """FSDP2 writes each rank's DTensor shards (row ranges of the TP-local tensors) without gathering."""
    for r in results:
        _assert_same_state(r["fsdp_loaded"]["state"], r["fsdp_saved"]["state"])
    reference = _losses(results, "reference")
    torch.testing.assert_close(torch.tensor(_losses(results, "fsdp_loaded")), torch.tensor(reference[STOP:]),
                               rtol=1e-5, atol=0)

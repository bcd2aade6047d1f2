"""Pipeline parallelism equals one process: 1F1B, interleaved, zero-bubble, with TP/SP and DP.

Three iterations of the real training step (fp32, dropout off) on the same
mock data and seed. The losses (from the last stage, shared over the pipeline),
the gradient norms, the final gradients (``main_grad``) and the final weights of every stage,
unsharded over TP, must match the single-process run to about 1e-5 relative,
for every TP rank and DP replica (each one's union of stages), so a replica
that missed an all-gather or an all-reduce fails.
With tied embeddings the last stage's copy (``output_layer.weight``) must equal
the word embeddings and carry their full gradient. One launch per world size:

    world 2: pp2 (tied, untied), pp2 + vpp2, --num-layer-list 1,3, --noop-layers,
             zero-bubble (also with --overlap-grad-reduce), --variable-seq-lengths
    world 4: pp4, pp4 + vpp2, pp4 zero-bubble (8 layers), tp2 x pp2 with SP (also zero-bubble),
             pp2 x dp2 (also zero-bubble with --overlap-grad-reduce and small buckets)
    hybrid (M*-E: Mamba2, attention, MLP and MoE layers): pp2 + vpp2; tp2 x pp2 with SP and uneven
             stages (1,3); pp2 x dp2 with the distributed optimizer (EP 2 of it: test_expert_parallel.py)
    world 8: tp2 x pp2 x dp2 with SP, and with vpp2

Zero-bubble defers the linear layers' weight-gradient GEMMs from B to W: every
rank of a zero-bubble run must have deferred some, and no other run any. With
--overlap-grad-reduce no gradient may reach a bucket whose reduction has started,
and every bucket must have started before ``finish_grad_sync`` (from the hooks).
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Optional

import pytest
import torch

from core.distributed.grad_buffer import GradBuffers
from core.tensor_parallel.layers import WeightGradStore
from core.launcher import run_distributed
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from tests.distributed.test_training_equivalence import BASE as TRAINING_BASE
from tests.distributed.test_training_equivalence import STEPS

BASE = [a for a in TRAINING_BASE]
BASE[BASE.index("--num-layers") + 1] = "4"
UNTIED = ["--untie-embeddings-and-output-weights"]
EIGHT = ["--num-layers", "8"]
NOOP = ["--noop-layers", "0,3"]
ZB = ["--schedules-method", "zero-bubble"]
OVERLAP = ["--overlap-grad-reduce", "--ddp-bucket-size", "4000"]  # several buckets per stage
VOCAB = 100
# a hybrid stack of every layer letter, Mamba2 at TP 2 with one replicated group: M*-E (4 layers)
HYBRID = ["--hybrid-override-pattern", "M*-E", "--mamba-head-dim", "16", "--mamba-num-groups", "1",
          "--mamba-state-dim", "8", "--mamba-chunk-size", "8", "--num-experts", "4", "--moe-router-topk", "2"]

# Zamba's 'Z' layers over two shared blocks (ZMZZ: blocks 0, 1, 0) with every adapter: block 0 runs on both
# stages of pp2 (layers 0 and 3), so its gradient is the sum of the two copies'
ZAMBA = ["--hybrid-override-pattern", "ZMZZ", "--mamba-head-dim", "16", "--mamba-num-groups", "1",
         "--mamba-state-dim", "8", "--mamba-chunk-size", "8", "--num-shared-blocks", "2",
         "--shared-block-adapter-rank", "4", "--shared-block-attention-adapters"]


def run_training(argv: List[str]) -> Optional[Dict[str, object]]:
    """Three steps; losses plus this stage's grads and weights, unsharded over TP, and where they come from."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    steps = [trainer.train_step(iterator) for _ in range(STEPS)]
    losses, grad_norms = [step.loss for step in steps], [step.grad_norm for step in steps]
    trainer.finish_param_sync()  # --overlap-param-gather: the last step's weight all-gathers are in flight
    grads, weights = {}, {}
    for model in trainer.models:
        for name, param in model.named_parameters():
            grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
            weights[name] = gather_full_tensor(param.data, param_meta(param).tp_shard, trainer.state.tp_group)
    replica = (trainer.state.dp_rank, trainer.state.tp_rank)
    return {"losses": losses, "grad_norms": grad_norms, "grads": grads, "weights": weights,
            "stage": trainer.state.pp_rank, "replica": replica}


@contextlib.contextmanager
def _probe() -> Iterator[Dict[str, list]]:
    """Count deferred weight-gradient entries; record gradients that reach a started bucket, and
    buckets that had not started (from the hooks) by the time ``finish_grad_sync`` waits for them."""
    seen: Dict[str, list] = {"deferred": [], "late": [], "not_started": []}
    push, accumulate, finish = WeightGradStore.push, GradBuffers.accumulate, GradBuffers.finish_grad_sync

    def counting_push(self, entry):
        seen["deferred"].append(1)
        push(self, entry)

    def checked_accumulate(self, param, grad):
        if self.bucket_of[id(param)].launched:
            seen["late"].append(tuple(param.shape))
        accumulate(self, param, grad)

    def checked_finish(self):
        seen["not_started"].extend(i for i, bucket in enumerate(self.buckets) if not bucket.launched)
        finish(self)

    WeightGradStore.push, GradBuffers.accumulate, GradBuffers.finish_grad_sync = (
        counting_push, checked_accumulate, checked_finish)
    try:
        yield seen
    finally:
        WeightGradStore.push, GradBuffers.accumulate, GradBuffers.finish_grad_sync = push, accumulate, finish


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    results = {}
    for name, argv in configs.items():
        with _probe() as seen:
            results[name] = run_training(argv)
        zero_bubble = "zero-bubble" in argv
        assert bool(seen["deferred"]) == zero_bubble, f"{name} rank {rank}: {len(seen['deferred'])} deferred"
        if "--overlap-grad-reduce" in argv:
            assert not seen["late"], f"{name} rank {rank}: gradients after their bucket started: {seen['late']}"
            assert not seen["not_started"], f"{name} rank {rank}: buckets {seen['not_started']} never overlapped"
    return results


def _merge(per_rank: List[Dict[str, Dict]]) -> Dict[str, Dict[tuple, Dict]]:
    """Per config and (DP rank, TP rank): the losses (every stage's must agree) and the union of the
    stages' tensors."""
    merged: Dict[str, Dict[tuple, Dict]] = {}
    for results in per_rank:
        for name, result in results.items():
            replicas = merged.setdefault(name, {})
            entry = replicas.setdefault(result["replica"], {"losses": result["losses"],
                                                            "grad_norms": result["grad_norms"], "grads": {},
                                                            "weights": {}, "copies": {}})
            torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(entry["losses"]))
            torch.testing.assert_close(torch.tensor(result["grad_norms"]), torch.tensor(entry["grad_norms"]))
            for kind in ("grads", "weights"):
                for key, value in result[kind].items():
                    if key == "output_layer.weight" and name.endswith("_tied"):
                        entry["copies"][kind] = value  # the last stage's copy of tied embeddings
                    elif key in entry[kind] and key.startswith("decoder.shared_blocks."):  # copies stay equal
                        torch.testing.assert_close(value, entry[kind][key], rtol=0, atol=0,
                                                   msg=lambda m: f"{name}: copies of {kind} {key}: {m}")
                    else:
                        entry[kind][key] = value
    return merged


def _unpad(tensor: torch.Tensor, name: str) -> torch.Tensor:
    return tensor[:VOCAB] if "word_embeddings" in name or "output_layer" in name else tensor


def _assert_same(result: Dict, reference: Dict, kinds: tuple = ("grads", "weights")) -> None:
    """Losses, then full gradients and weights. After the distributed optimizer's reduce-scatter a
    rank's buffer holds the reduced gradient of its own DP chunk only: compare weights alone then."""
    torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(reference["losses"]), rtol=1e-5, atol=0)
    # the gradient norm (clipped at 0.5) counts every parameter once: a stage's copy of tied embeddings or of a
    # shared block is left out
    torch.testing.assert_close(torch.tensor(result["grad_norms"]), torch.tensor(reference["grad_norms"]), rtol=1e-5,
                               atol=0, msg=lambda m: f"grad norms: {m}")
    for kind in kinds:
        assert set(result[kind]) == set(reference[kind])
        for name, value in result[kind].items():
            torch.testing.assert_close(_unpad(value, name), _unpad(reference[kind][name], name), rtol=1e-5,
                                       atol=1e-6, msg=lambda m: f"{kind} {name}: {m}")
        if kind in result["copies"]:
            embedding = reference[kind]["embedding.word_embeddings.weight"]
            torch.testing.assert_close(_unpad(result["copies"][kind], "output_layer"), _unpad(embedding, "word_embeddings"),
                                       rtol=1e-5, atol=1e-6, msg=lambda m: f"tied copy {kind}: {m}")


REFERENCES = {
    "tied": BASE, "untied": BASE + UNTIED, "noop": BASE + NOOP, "tied8": BASE + EIGHT, "hybrid": BASE + UNTIED + HYBRID,
    "zamba": BASE + ZAMBA,
}
WORLD2 = {
    "pp2_tied": (BASE + ["--pipeline-model-parallel-size", "2"], "tied"),
    "pp2_untied": (BASE + UNTIED + ["--pipeline-model-parallel-size", "2"], "untied"),
    "pp2_vpp2_tied": (BASE + ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"],
                      "tied"),
    "pp2_list_tied": (BASE + ["--pipeline-model-parallel-size", "2", "--num-layer-list", "1,3"], "tied"),
    "pp2_noop_tied": (BASE + NOOP + ["--pipeline-model-parallel-size", "2"], "noop"),
    "pp2_zb_tied": (BASE + ZB + ["--pipeline-model-parallel-size", "2"], "tied"),
    "pp2_zb_overlap_untied": (BASE + UNTIED + ZB + OVERLAP + ["--pipeline-model-parallel-size", "2"], "untied"),
    "pp2_varlen_untied": (BASE + UNTIED + ["--pipeline-model-parallel-size", "2", "--variable-seq-lengths"],
                          "untied"),
    "pp2_vpp2_hybrid": (BASE + UNTIED + HYBRID + ["--pipeline-model-parallel-size", "2",
                                         "--num-layers-per-virtual-pipeline-stage", "1"], "hybrid"),
    "pp2_zamba_tied": (BASE + ZAMBA + ["--pipeline-model-parallel-size", "2"], "zamba"),
    "pp2_vpp2_zamba_tied": (BASE + ZAMBA + ["--pipeline-model-parallel-size", "2",
                                       "--num-layers-per-virtual-pipeline-stage", "1"], "zamba"),
}
WORLD4 = {
    "pp4_tied": (BASE + EIGHT + ["--pipeline-model-parallel-size", "4"], "tied8"),
    "pp4_vpp2_tied": (BASE + EIGHT + ["--pipeline-model-parallel-size", "4",
                                      "--num-layers-per-virtual-pipeline-stage", "1"], "tied8"),
    "pp4_zb_tied": (BASE + EIGHT + ZB + ["--pipeline-model-parallel-size", "4"], "tied8"),
    "tp2_pp2_sp_tied": (BASE + ["--pipeline-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
                                "--sequence-parallel"], "tied"),
    "tp2_pp2_sp_zb_tied": (BASE + ZB + ["--pipeline-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
                                        "--sequence-parallel"], "tied"),
    "pp2_dp2_tied": (BASE + ["--pipeline-model-parallel-size", "2"], "tied"),
    "pp2_dp2_zb_overlap_tied": (BASE + ZB + OVERLAP + ["--pipeline-model-parallel-size", "2"], "tied"),
    "pp2_dp2_distopt_overlap_tied": (BASE + OVERLAP + ["--pipeline-model-parallel-size", "2",
                                                       "--use-distributed-optimizer", "--overlap-param-gather"],
                                     "tied"),
    "tp2_pp2_sp_hybrid": (BASE + UNTIED + HYBRID + ["--pipeline-model-parallel-size", "2", "--tensor-model-parallel-size",
                                           "2", "--sequence-parallel", "--num-layer-list", "1,3"], "hybrid"),
    "pp2_dp2_distopt_hybrid": (BASE + UNTIED + HYBRID + ["--pipeline-model-parallel-size", "2",
                                                         "--use-distributed-optimizer"], "hybrid"),
    "tp2_pp2_sp_zamba_tied": (BASE + ZAMBA + ["--pipeline-model-parallel-size", "2",
                                              "--tensor-model-parallel-size", "2", "--sequence-parallel",
                                              "--num-layer-list", "1,3"], "zamba"),
    "pp2_dp2_distopt_zamba_tied": (BASE + ZAMBA + ["--pipeline-model-parallel-size", "2",
                                                   "--use-distributed-optimizer"], "zamba"),
}
WORLD8 = {
    "tp2_pp2_dp2_sp_tied": (BASE + ["--pipeline-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
                                    "--sequence-parallel"], "tied"),
    "tp2_pp2_dp2_vpp2_untied": (BASE + UNTIED + ["--pipeline-model-parallel-size", "2",
                                                    "--tensor-model-parallel-size", "2", "--sequence-parallel",
                                                    "--num-layers-per-virtual-pipeline-stage", "1"], "untied"),
}


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict]:
    return {name: replicas[(0, 0)] for name, replicas in _merge(run_distributed(1, worker, REFERENCES)).items()}


def _assert_every_replica(replicas: Dict[tuple, Dict], reference: Dict, world_size: int, pp: int,
                          kinds: tuple = ("grads", "weights")) -> None:
    assert len(replicas) == world_size // pp
    for (dp_rank, tp_rank), result in sorted(replicas.items()):
        try:
            _assert_same(result, reference, kinds)
        except AssertionError as error:
            raise AssertionError(f"DP rank {dp_rank}, TP rank {tp_rank}: {error}") from None


def _pp_size(argv: List[str]) -> int:
    return int(argv[argv.index("--pipeline-model-parallel-size") + 1])


def _launch(world_size: int, configs: Dict) -> Dict[str, Dict]:
    return _merge(run_distributed(world_size, worker, {name: argv for name, (argv, _) in configs.items()}))


@pytest.fixture(scope="module")
def world2() -> Dict[str, Dict]:
    return _launch(2, WORLD2)


@pytest.fixture(scope="module")
def world4() -> Dict[str, Dict]:
    return _launch(4, WORLD4)


@pytest.fixture(scope="module")
def world8() -> Dict[str, Dict]:
    return _launch(8, WORLD8)


@pytest.mark.parametrize("name", sorted(WORLD2))
def test_world2_equals_single_process(world2, references, name):
    argv, reference = WORLD2[name]
    _assert_every_replica(world2[name], references[reference], 2, _pp_size(argv))


@pytest.mark.parametrize("name", sorted(WORLD4))
def test_world4_equals_single_process(world4, references, name):
    kinds = ("weights",) if "distopt" in name else ("grads", "weights")
    argv, reference = WORLD4[name]
    _assert_every_replica(world4[name], references[reference], 4, _pp_size(argv), kinds)


@pytest.mark.parametrize("name", sorted(WORLD8))
def test_world8_equals_single_process(world8, references, name):
    argv, reference = WORLD8[name]
    _assert_every_replica(world8[name], references[reference], 8, _pp_size(argv))

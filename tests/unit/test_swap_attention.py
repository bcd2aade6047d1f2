"""``--swap-attention`` (MindSpeed's activation offload): exact, really offloading, composable.

* The offload path on its own: parameters and views of them stay; an activation comes back bit-identical
  with its offset and strides, views of one storage are copied once.
* Training through the trainer (fp32, dropout on, two steps of two micro-batches): losses and every
  gradient with ``--swap-attention`` equal the run without it exactly (``torch.equal``), for the default
  modules, for every module of a MoE model, with selective and full recompute, and with MindSpeed's
  ``--recompute-num-layers N`` alone (the MLP of the first N layers recomputed; it really reruns).
* The bytes offloaded equal what the chosen modules save, counted independently through module hooks on
  the run without swapping; everything offloaded comes back, prefetched when a layer's backward starts;
  full recompute of one layer in four leaves three quarters, selective recompute less than all.
* The backward frees each layer's copies as it goes (only the current and the next layer are back on
  the device when a layer's backward starts) and nothing is left after a step.
* Bad flags are refused in one line.
* TP2 with SP, PP2, PP2 with VPP (micro-batches in flight), EP2 with every module of the MoE layers
  swapped, and FSDP2 equal their own runs without swapping exactly (losses, gradients, weights), on
  every rank; FSDP2's unsharded parameters are not offloaded. One 2-process launch.

    python -m pytest -q tests/unit/test_swap_attention.py
"""
from __future__ import annotations

import contextlib
import gc
import weakref
from typing import Dict, Iterator, List

import pytest
import torch

from core.launcher import run_distributed
from core.transformer import swap_attention
from core.transformer.block import TransformerLayer
from core.transformer.swap_attention import (ActivationSwapper, LayerRecord, SwapStats, get_activation_swapper,
                                             is_activation, swapped_attributes)
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

ARGV = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "64",
        "--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "64", "--normalization", "RMSNorm",
        "--swiglu", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2",
        "--optimizer", "sgd", "--lr", "0.1", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "5",
        "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
        "--hidden-dropout", "0.1", "--attention-dropout", "0.1", "--make-vocab-size-divisible-by", "1",
        "--position-embedding-type", "rope"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "16", "--moe-aux-loss-coeff", "0.01"]
SWAP = ["--swap-attention"]
ALL_MODULES = ["--swap-modules", "input_norm,self_attention,post_attention_norm,mlp"]
SELECTIVE = ["--recompute-granularity", "selective"]
FULL_BLOCK = ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"]
MLP_RECOMPUTE = ["--recompute-num-layers", "1"]  # MindSpeed: with --swap-attention, the first layer's MLP
STEPS = 2


# ----------------------------------------------------------------------------- the offload path alone

def test_parameters_and_their_views_stay_activations_come_back_identical() -> None:
    swapper = ActivationSwapper(min_bytes=0)
    record = LayerRecord(swapper, None)
    weight = torch.nn.Parameter(torch.randn(6, 4))
    x = torch.randn(3, 6, requires_grad=True)
    fused = (x @ weight) * 2  # [3, 4], an activation
    q, k = fused[:, :2], fused[:, 1:].t()  # a slice and a transposed slice: one storage
    assert not is_activation(weight) and not is_activation(weight.t()) and not is_activation(x)
    assert record.pack(weight) is weight and record.pack(weight.t()).grad_fn is not None
    saved = [record.pack(q), record.pack(k)]
    assert swapper.stats.offloaded_storages == 1 and swapper.stats.offloaded_bytes == fused.numel() * 4
    record.close(fused)
    for original, handle in zip((q, k), saved):
        restored = swap_attention._unpack(handle)
        assert torch.equal(restored, original) and restored.stride() == original.stride()
        assert restored.storage_offset() == original.storage_offset()
        assert restored.untyped_storage().data_ptr() != original.untyped_storage().data_ptr()  # a copy


def test_small_storages_stay_under_the_threshold() -> None:
    record = LayerRecord(ActivationSwapper(min_bytes=1024), None)
    small = torch.randn(4, requires_grad=True) * 2  # 16 bytes
    assert record.pack(small) is small


def test_module_names_map_mindspeeds_onto_the_layer() -> None:
    assert swapped_attributes(("input_norm", "self_attention", "post_attention_norm", "input_layernorm")) == (
        "input_layernorm", "self_attention", "pre_mlp_layernorm")


# ----------------------------------------------------------------------------- training

@contextlib.contextmanager
def _counting_saved_bytes(models: List[torch.nn.Module], names: List[str]) -> Iterator[List[int]]:
    """Bytes of the activation storages the named sub-modules of each transformer layer save (each storage
    once per layer forward), counted through module hooks: independent of the swap path's call sites."""
    total, seen, hooks = [0], [set()], []
    stack: List[contextlib.AbstractContextManager] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        key = tensor.untyped_storage().data_ptr()
        if is_activation(tensor) and key not in seen[0]:
            seen[0].add(key)
            total[0] += tensor.untyped_storage().nbytes()
        return tensor

    def enter(module, args):
        stack.append(torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t))
        stack[-1].__enter__()

    def leave(module, args, output):
        stack.pop().__exit__(None, None, None)

    for model in models:
        for layer in (m for m in model.modules() if isinstance(m, TransformerLayer)):
            hooks.append(layer.register_forward_pre_hook(lambda module, args: seen.__setitem__(0, set())))
            for name in swapped_attributes(tuple(names)):
                hooks += [getattr(layer, name).register_forward_pre_hook(enter),
                          getattr(layer, name).register_forward_hook(leave)]
    try:
        yield total
    finally:
        for hook in hooks:
            hook.remove()


@contextlib.contextmanager
def _counting_mlp_calls(models: List[torch.nn.Module]) -> Iterator[List[int]]:
    calls, hooks = [0], []
    for model in models:
        for layer in (m for m in model.modules() if isinstance(m, TransformerLayer)):
            hooks.append(layer.mlp.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1)))
    try:
        yield calls
    finally:
        for hook in hooks:
            hook.remove()


def _train(argv: List[str], count_modules: List[str] = ()) -> Dict[str, object]:
    """Two steps: losses, this rank's gradients, the swap statistics and (optionally) the counted bytes."""
    from mindspeed_llm.training.training import setup

    swapper = get_activation_swapper()
    swapper.min_bytes, swapper.stats = 0, SwapStats()
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    with _counting_saved_bytes(trainer.models, list(count_modules)) as counted, \
            _counting_mlp_calls(trainer.models) as mlp_calls:
        losses = [trainer.train_step(iterator).loss for _ in range(STEPS)]
    grads, weights = {}, {}
    for chunk, model in enumerate(trainer.models):
        for name, param in model.named_parameters():
            grad = getattr(param, "main_grad", None)
            grad = grad if grad is not None else param.grad  # FSDP2 frees its gradients after the step
            if grad is not None:
                grads[f"{chunk}.{name}"] = _local(grad)
            weights[f"{chunk}.{name}"] = _local(param.detach())
    return {"losses": losses, "grads": grads, "weights": weights, "stats": swapper.stats, "counted": counted[0],
            "mlp_calls": mlp_calls[0]}


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's values (an FSDP2 DTensor's local shard)."""
    return (tensor.to_local() if hasattr(tensor, "to_local") else tensor).detach().clone()


def _assert_exact(result: Dict[str, object], reference: Dict[str, object], label: str) -> None:
    assert result["losses"] == reference["losses"], label
    for kind in ("grads", "weights"):
        assert set(result[kind]) == set(reference[kind]), label
        for name, value in reference[kind].items():
            assert torch.equal(result[kind][name], value), f"{label}: {kind} {name}"


DEFAULT_NAMES = ["input_norm", "self_attention", "post_attention_norm"]
RUNS = {
    "plain": (ARGV, DEFAULT_NAMES),
    "swap": (ARGV + SWAP, ()),
    "selective": (ARGV + SELECTIVE, ()),
    "selective_swap": (ARGV + SELECTIVE + SWAP, ()),
    "full_block": (ARGV + FULL_BLOCK, ()),
    "full_block_swap": (ARGV + FULL_BLOCK + SWAP, ()),
    "mlp_recompute_swap": (ARGV + MLP_RECOMPUTE + SWAP, ()),
    "mlp_swap": (ARGV + SWAP + ["--swap-modules", "mlp"], ()),
    "activation_recompute_mlp_swap": (ARGV + ["--recompute-activation-function"] + SWAP + ["--swap-modules", "mlp"],
                                      ()),
    "moe": (ARGV + MOE, ()),
    "moe_swap_all": (ARGV + MOE + SWAP + ALL_MODULES, ()),
}


@pytest.fixture(scope="module")
def runs() -> Dict[str, Dict[str, object]]:
    return {name: _train(argv, names) for name, (argv, names) in RUNS.items()}


@pytest.mark.parametrize("name, reference", [
    ("swap", "plain"), ("selective_swap", "selective"), ("full_block_swap", "full_block"),
    ("mlp_recompute_swap", "plain"), ("mlp_swap", "plain"), ("activation_recompute_mlp_swap", "plain"),
    ("moe_swap_all", "moe")])
def test_swapping_leaves_losses_and_gradients_unchanged(runs, name, reference) -> None:
    assert runs[reference]["stats"].offloaded_bytes == 0
    assert runs[name]["stats"].offloaded_bytes > 0
    _assert_exact(runs[name], runs[reference], name)


def test_offloaded_bytes_are_what_the_chosen_modules_save(runs) -> None:
    stats, counted = runs["swap"]["stats"], runs["plain"]["counted"]
    assert stats.offloaded_bytes == counted > 0
    # at least the layer input, the normed input and q, k, v of each layer forward: [s, b, h] fp32 each
    layer_forwards = 4 * 2 * STEPS
    assert stats.offloaded_bytes >= layer_forwards * 5 * 16 * 2 * 32 * 4
    assert stats.restored_bytes == stats.offloaded_bytes  # everything came back ...
    assert stats.prefetched_storages == stats.offloaded_storages  # ... ahead of its use


def test_swapping_composes_with_recompute(runs) -> None:
    swapped = runs["swap"]["stats"].offloaded_bytes
    assert runs["full_block_swap"]["stats"].offloaded_bytes * 4 == swapped * 3  # layer 0 of 4 recomputed
    assert 0 < runs["selective_swap"]["stats"].offloaded_bytes < swapped  # the core attention recomputed
    assert runs["mlp_recompute_swap"]["stats"].offloaded_bytes == swapped
    micro_batches = 2 * STEPS  # layer 0's MLP runs again in each backward
    assert runs["mlp_recompute_swap"]["mlp_calls"] == runs["plain"]["mlp_calls"] + micro_batches
    assert runs["moe_swap_all"]["stats"].offloaded_bytes > swapped
    # --recompute-activation-function: neither silu(gate) (not saved) nor the activation's output (refilled
    # for the backward, so its host copy is dropped) is offloaded: 2 x [s, b, ffn] fp32 per layer forward
    activation_tensors = 4 * 2 * STEPS * 2 * (16 * 2 * 64 * 4)
    mlp = runs["mlp_swap"]["stats"].offloaded_bytes
    assert runs["activation_recompute_mlp_swap"]["stats"].offloaded_bytes == mlp - activation_tensors


def test_the_backward_frees_each_layers_copies_as_it_goes(monkeypatch) -> None:
    """When a layer's backward starts, the next layer's copies are prefetched and only those and its own
    are back on the device; the copies of the layers already done are freed, and after the step none is
    left."""
    from mindspeed_llm.training.training import setup

    copies, strays, ahead = [], [], []
    offload, starts = ActivationSwapper.offload, LayerRecord._backward_starts

    def counting_offload(self, tensor):
        copy = offload(self, tensor)
        copies.append(weakref.ref(copy))
        return copy

    def checking_starts(self, grad):
        current = {id(ref()) for record in (self, self.previous) if record is not None for ref in record._copies}
        strays.append(sum(1 for ref in copies if ref() is not None and ref().restored is not None
                          and id(ref()) not in current))
        starts(self, grad)
        if self.previous is not None:  # the layer whose backward comes next is on its way back already
            ahead.append(all(ref().restored is not None for ref in self.previous._copies if ref() is not None))

    monkeypatch.setattr(ActivationSwapper, "offload", counting_offload)
    monkeypatch.setattr(LayerRecord, "_backward_starts", checking_starts)
    get_activation_swapper().min_bytes = 0
    trainer = setup(ARGV + SWAP)
    trainer.train_step(trainer.train_iterator())
    gc.collect()
    assert len(strays) == 4 * 2 and not any(strays)  # every layer backward of both micro-batches
    assert ahead == [True] * 3 * 2  # layers 3, 2, 1 of each micro-batch prefetch layers 2, 1, 0
    assert copies and all(ref() is None for ref in copies)


# ----------------------------------------------------------------------------- bad flags

@pytest.mark.parametrize("extra, message", [
    (["--swap-modules", "self_attention"], "--swap-modules has no effect without --swap-attention"),
    (SWAP + ["--swap-modules", "self_attention,attention"],
     r"unknown module name\(s\) \['attention'\]; choose from input_norm, input_layernorm, self_attention"),
    (SWAP + ["--swap-modules", ","], "unknown module name"),
    (SWAP + ["--swap-modules", "self_attention,post_mlp_layernorm"],
     "--swap-modules post_mlp_layernorm: the layer has no such norm without --post-norm"),
    (SWAP + ["--hybrid-override-pattern", "MMMM"], "--hybrid-override-pattern has only Mamba layers"),
    (MLP_RECOMPUTE, "--recompute-num-layers needs --recompute-granularity full"),
    (SWAP + ["--recompute-num-layers", "5"], r"--recompute-num-layers \(5\) must be between 1 and the layers"),
])
def test_bad_flags_are_refused_in_one_line(extra, message) -> None:
    with pytest.raises(ArgumentError, match=message) as info:
        validate_args(parse_args(ARGV + extra), 1)
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- parallel layouts

LAYOUTS = {  # layout flags, and what the swapped run adds to --swap-attention
    "tp2_sp": (["--tensor-model-parallel-size", "2", "--sequence-parallel"], []),
    "pp2": (["--pipeline-model-parallel-size", "2"], []),
    "pp2_vpp": (["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"], []),
    "pp2_zb": (["--pipeline-model-parallel-size", "2", "--schedules-method", "zero-bubble"], SELECTIVE),
    "ep2_moe": (MOE + ["--expert-model-parallel-size", "2"], ALL_MODULES),
    "fsdp2": (["--use-torch-fsdp2"], []),
}


def _worker(rank: int, world: int, jobs: Dict[str, List[str]]) -> Dict[str, Dict[str, object]]:
    results = {}
    for name, argv in jobs.items():
        result = _train(argv)
        results[name] = {"losses": result["losses"], "grads": result["grads"], "weights": result["weights"],
                         "offloaded": result["stats"].offloaded_bytes, "restored": result["stats"].restored_bytes}
    return results


def test_parallel_layouts_equal_their_runs_without_swapping(runs) -> None:
    jobs = {}
    for layout, (extra, swap_extra) in LAYOUTS.items():
        jobs[f"{layout}/plain"] = ARGV + extra
        jobs[f"{layout}/swap"] = ARGV + extra + SWAP + swap_extra
    for rank, results in enumerate(run_distributed(2, _worker, jobs)):
        for layout in LAYOUTS:
            swapped, plain = results[f"{layout}/swap"], results[f"{layout}/plain"]
            assert swapped["offloaded"] > 0 and swapped["restored"] == swapped["offloaded"], (rank, layout)
            assert plain["offloaded"] == 0
            _assert_exact(swapped, plain, f"rank {rank} {layout}")
        # FSDP2's unsharded parameters stay: each DP rank offloads its one micro-batch of the two per step
        assert results["fsdp2/swap"]["offloaded"] * 2 == runs["swap"]["stats"].offloaded_bytes

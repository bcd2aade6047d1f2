"""Activation recompute on one process: exact, really recomputing, and keeping less.

The decoder (3 layers, hidden 64, seq 32, fp32, dropout 0.1 on attention and
the residual stream) runs one training forward and backward per recompute
setting, from the same weights, data and seed. Every setting must give the
loss, every gradient and the dropout RNG states afterwards (default generator
and tensor-parallel tracker) bit for bit as the run without recompute. Each
setting must also actually recompute (the checkpointed modules run again in
the backward) and keep fewer bytes of saved activations. The layer grouping
of ``full`` (uniform/block) is checked as a pure table, and under zero-bubble's
split backward the recomputed linear layers still defer their weight
gradients to W, with the same results.

    python -m pytest tests/unit/test_recompute.py -q
"""
from __future__ import annotations

import contextlib
from typing import Callable, Dict, Iterator, List

import pytest
import torch
import torch.nn.functional as F

from core.models.gpt_model import build_model
from core.parallel_state import single_process_state
from core.tensor_parallel import checkpoint as checkpoint_module
from core.tensor_parallel.checkpoint import checkpoint, recompute_activation
from core.tensor_parallel.layers import WeightGradStore, defer_weight_grads
from core.tensor_parallel.random import get_dropout_rng_states, get_rng_tracker, model_parallel_seed
from core.transformer.attention import SelfAttention
from core.transformer.block import TransformerLayer, recompute_groups
from core.transformer.config import TransformerConfig
from core.transformer.mlp import MLP

LAYERS = 3
SETTINGS = {
    "full_uniform": dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=2),
    "full_block": dict(recompute_granularity="full", recompute_method="block", recompute_num_layers=2),
    "selective": dict(recompute_granularity="selective"),
    "activation": dict(recompute_activation_function=True),
}


def _config(swiglu: bool, **recompute: object) -> TransformerConfig:
    return TransformerConfig(num_layers=LAYERS, hidden_size=64, num_attention_heads=4, vocab_size=100,
                             ffn_hidden_size=128, activation="swiglu" if swiglu else "gelu", normalization="RMSNorm", attention_dropout=0.1,
                             hidden_dropout=0.1, max_position_embeddings=32, **recompute)


@contextlib.contextmanager
def _counting_calls() -> Iterator[Dict[str, int]]:
    """Count layer forwards, core attentions and MLP activations (the units each setting recomputes)."""
    counts = {"layer": 0, "core_attention": 0, "activation": 0}
    originals = {"layer": (TransformerLayer, "forward"), "core_attention": (SelfAttention, "_core_attention"),
                 "activation": (MLP, "_activation")}

    def counted(key, function):
        def wrapper(*args, **kwargs):
            counts[key] += 1
            return function(*args, **kwargs)
        return wrapper

    saved = {key: getattr(cls, name) for key, (cls, name) in originals.items()}
    for key, (cls, name) in originals.items():
        setattr(cls, name, counted(key, saved[key]))
    try:
        yield counts
    finally:
        for key, (cls, name) in originals.items():
            setattr(cls, name, saved[key])


@contextlib.contextmanager
def _saved_bytes(exclude: List[torch.Tensor]) -> Iterator[Callable[[], int]]:
    """Bytes held by the tensors autograd saves for the backward, other than ``exclude`` (the weights).

    Counted by distinct storage, at the time of asking: a storage that recompute
    released holds nothing, and recompute regions save nothing through this hook.
    """
    saved: List[torch.Tensor] = []
    excluded = {t.untyped_storage().data_ptr() for t in exclude}

    def total() -> int:
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in saved}
        return sum(nbytes for ptr, nbytes in storages.items() if ptr not in excluded)

    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        yield total


def _train_step(swiglu: bool, **recompute: object) -> Dict[str, object]:
    model = build_model(_config(swiglu, **recompute), single_process_state(), torch.device("cpu"), seed=7).train()
    model_parallel_seed(7, tp_rank=0, pp_rank=0)
    ids = torch.randint(0, 100, (2, 32), generator=torch.Generator().manual_seed(1))  # [b, s]
    with _counting_calls() as counts:
        with _saved_bytes(list(model.parameters())) as saved_bytes:
            loss = model(ids, labels=ids).mean()
        saved = saved_bytes()
        forward_counts = dict(counts)
        loss.backward()
    cpu_state, _, tracker_states = get_dropout_rng_states()
    return {"loss": loss.detach(), "grads": {n: p.grad for n, p in model.named_parameters()},
            "rng": (cpu_state, tracker_states), "saved": saved,
            "backward_calls": {k: counts[k] - forward_counts[k] for k in counts}}


@pytest.fixture(scope="module", params=[True, False], ids=["swiglu", "gelu"])
def runs(request) -> Dict[str, Dict[str, object]]:
    results = {"none": _train_step(request.param)}
    results.update({name: _train_step(request.param, **setting) for name, setting in SETTINGS.items()})
    return results


@pytest.mark.parametrize("name", list(SETTINGS))
def test_recompute_is_exact(runs, name):
    result, reference = runs[name], runs["none"]
    assert torch.equal(result["loss"], reference["loss"])
    assert set(result["grads"]) == set(reference["grads"])
    for param_name, grad in reference["grads"].items():
        assert torch.equal(result["grads"][param_name], grad), param_name
    assert torch.equal(result["rng"][0], reference["rng"][0])
    for state_name, state in reference["rng"][1].items():
        assert torch.equal(result["rng"][1][state_name], state), state_name


def test_no_recompute_runs_nothing_twice(runs):
    assert runs["none"]["backward_calls"] == {"layer": 0, "core_attention": 0, "activation": 0}


@pytest.mark.parametrize("name,unit,count", [
    ("full_uniform", "layer", LAYERS),  # groups {0, 1} and {2}: every layer once more
    ("full_block", "layer", 2),  # the first two layers only
    ("selective", "core_attention", LAYERS),
    ("activation", "activation", 2 * LAYERS),  # rebuilt for fc2's weight gradient and for its own backward
])
def test_recompute_happens_and_keeps_less(runs, name, unit, count):
    result = runs[name]
    assert result["backward_calls"][unit] == count
    if unit != "layer":  # a recomputed layer runs its attention and activation again too
        others = [v for k, v in result["backward_calls"].items() if k != unit]
        assert others == [0, 0], result["backward_calls"]
    assert result["saved"] < runs["none"]["saved"]


def test_recompute_groups_follow_megatron():
    assert recompute_groups(4, None, None, None) == [(range(4), False)]
    assert recompute_groups(4, "selective", None, None) == [(range(4), False)]
    assert recompute_groups(5, "full", "uniform", 2) == [(range(0, 2), True), (range(2, 4), True), (range(4, 5), True)]
    assert recompute_groups(4, "full", "block", 1) == [(range(0, 1), True), (range(1, 4), False)]
    assert recompute_groups(2, "full", "block", 3) == [(range(0, 1), True), (range(1, 2), True), (range(2, 2), False)]


@pytest.mark.parametrize("method,num_layers", [(None, 1), ("uniform", None)])
def test_full_recompute_needs_method_and_num_layers(method, num_layers):
    with pytest.raises(ValueError, match="--recompute-method uniform|block and --recompute-num-layers"):
        recompute_groups(4, "full", method, num_layers)


def test_checkpoint_restores_tracker_state_for_dropout():
    """Dropout under the tracker inside a checkpoint: the recomputation draws the forward's mask."""
    model_parallel_seed(3, tp_rank=0, pp_rank=0)
    x = torch.randn(8, 16, requires_grad=True)

    def dropped(t: torch.Tensor) -> torch.Tensor:
        with get_rng_tracker().fork():
            return F.dropout(t, 0.5, training=True) * t

    model_parallel_seed(3, tp_rank=0, pp_rank=0)
    dropped(x).sum().backward()
    expected, x.grad = x.grad, None
    model_parallel_seed(3, tp_rank=0, pp_rank=0)
    out = checkpoint(dropped, x)
    dropped(torch.randn(8, 16))  # the tracker moves on before the backward
    out.sum().backward()
    assert torch.equal(x.grad, expected)


def test_recompute_activation_drops_the_consumers_copy():
    """The consumer's saved input (the activation output) holds no memory until its backward rebuilds it."""
    x = torch.randn(4, 3, 8, requires_grad=True)
    weight = torch.randn(5, 8, requires_grad=True)
    F.linear(F.gelu(x), weight).sum().backward()
    expected = (x.grad, weight.grad)
    x.grad = weight.grad = None
    with _saved_bytes([weight]) as saved_bytes:
        out = recompute_activation(F.gelu, x, lambda act: F.linear(act, weight))
    assert saved_bytes() == x.numel() * x.element_size()  # only the activation's input
    out.sum().backward()
    assert torch.equal(x.grad, expected[0]) and torch.equal(weight.grad, expected[1])


def test_inside_checkpoint_flag_is_scoped():
    seen = []
    x = torch.randn(3, requires_grad=True)
    out = checkpoint(lambda t: (seen.append(checkpoint_module.inside_checkpoint()), t * t)[1], x)
    assert not checkpoint_module.inside_checkpoint()
    out.sum().backward()
    assert seen == [True, True] and not checkpoint_module.inside_checkpoint()


def _deferred_step(**recompute: object) -> Dict[str, torch.Tensor]:
    """Zero-bubble's split backward on one process: B inside ``defer_weight_grads``, then W from the store."""
    config = _config(True, **recompute)
    model = build_model(config, single_process_state(), torch.device("cpu"), seed=7).train()
    model_parallel_seed(7, tp_rank=0, pp_rank=0)
    ids = torch.randint(0, 100, (2, 32), generator=torch.Generator().manual_seed(1))  # [b, s]
    store = WeightGradStore()
    with defer_weight_grads(store):
        model(ids, labels=ids).mean().backward()
    for param, grad in WeightGradStore.weight_grads(store.take()):
        assert isinstance(param, torch.nn.Parameter)  # the entries name the parameters themselves
        param.grad = grad if param.grad is None else param.grad + grad
    return {name: param.grad for name, param in model.named_parameters()}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_recomputed_linears_still_defer_their_weight_gradients(name):
    reference, result = _deferred_step(), _deferred_step(**SETTINGS[name])
    for param_name, grad in reference.items():
        assert result[param_name] is not None and torch.equal(result[param_name], grad), param_name


def test_checkpoint_gives_parameter_gradients_when_no_input_requires_grad():
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    checkpoint(layer, x).sum().backward()
    expected = layer.weight.grad.clone()
    layer.weight.grad = None
    layer(x).sum().backward()
    assert torch.equal(layer.weight.grad, expected)

"""Tensor-parallel layers at TP=2 and TP=4 equal their single-process counterparts.

Every rank builds the full weights, inputs and upstream gradients from the same
seed, takes its slice with ``TPShard.shard``, runs forward and backward and
returns its local output and gradients. The parent gathers them (``unshard``)
and compares against ``nn.Linear`` / ``nn.Embedding`` / ``F.cross_entropy`` on
the full tensors (fp32, rtol 1e-5). One gloo launch per TP degree.

The backward pass is driven by an upstream gradient G of the full output: a
rank whose output is the full tensor receives G, a rank holding a slice receives
its slice of G. For fused weights with replicated segments (GQA K/V heads with
fewer heads than TP ranks) the replicas receive random *partial* gradients that
sum to G, as attention produces them; ``reduce_replicated_grads`` must then
restore the full-model gradient on every replica.
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import initialize
from core.tensor_parallel.cross_entropy import linear_vocab_parallel_cross_entropy, vocab_parallel_cross_entropy
from core.tensor_parallel.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    Segment,
    TPShard,
    VocabParallelEmbedding,
    column_parallel_input,
    reduce_replicated_grads,
)
from core.launcher import run_distributed


SEQ, BATCH = 4, 3          # SEQ divisible by 4 for sequence parallelism
IN, OUT = 8, 12            # column: 8 -> 12; row: 12 -> 8 (both divisible by 4)
VOCAB, PADDED_VOCAB, HIDDEN = 11, 16, 6  # at TP=4 the last rank holds padding only
RTOL, ATOL = 1e-5, 1e-5  # atol: fp32 sums of O(10) terms in a different order

COLUMN_CASES = {
    "col": dict(bias=True, gather_output=False, sequence_parallel=False),
    "col_gather": dict(bias=True, gather_output=True, sequence_parallel=False),
    "col_nobias": dict(bias=False, gather_output=False, sequence_parallel=False),
    "col_nobias_gather": dict(bias=False, gather_output=True, sequence_parallel=False),
    "col_sp": dict(bias=True, gather_output=False, sequence_parallel=True),
}
ROW_CASES = {
    "row": dict(bias=True, input_is_parallel=True, sequence_parallel=False),
    "row_full_input": dict(bias=True, input_is_parallel=False, sequence_parallel=False),
    "row_nobias": dict(bias=False, input_is_parallel=True, sequence_parallel=False),
    "row_sp": dict(bias=True, input_is_parallel=True, sequence_parallel=True),
}
FUSED_CASES = {  # QKV: 4 query heads of 8 rows, then K and V
    "qkv_kv1": (Segment(4, 8), Segment(1, 8), Segment(1, 8)),  # K, V replicated at TP=2 and 4
    "qkv_kv2": (Segment(4, 8), Segment(2, 8), Segment(2, 8)),  # split at TP=2, replicated at TP=4
}
EMBEDDING_CASES = {"emb": False, "emb_sp": True}
CE_CASES = {  # name: (vocab_size or None for "no padding", label_smoothing, logit scale)
    "ce_padded": (VOCAB, 0.0, 1.0),
    "ce_padded_smooth": (VOCAB, 0.1, 1.0),
    "ce_full": (None, 0.0, 1.0),
    "ce_full_smooth": (None, 0.2, 1.0),
    "ce_padded_large_logits": (VOCAB, 0.0, 20.0),
    "ce_padded_smooth_large_logits": (VOCAB, 0.1, 40.0),  # logit spread > 88: exp underflows in fp32
}
# The same losses through --cross-entropy-loss-fusion's compiled block kernels (the padding-only rank at TP=4)
FUSED_CE_CASES = ("ce_padded_smooth", "ce_full", "ce_padded_smooth_large_logits")
# The fused output layer + loss, chunked over the vocabulary (linear_vocab_parallel_cross_entropy)
CHUNKED_CE_CASES = {  # name: (vocab_size, label_smoothing, logit scale, softcap, bias, sequence_parallel, chunk)
    "cce_padded": (VOCAB, 0.0, None, None, False, False, 3),
    "cce_padded_smooth_bias": (VOCAB, 0.1, None, None, True, False, 2),
    "cce_full_one_chunk": (None, 0.0, None, None, False, False, 64),
    "cce_scaled_capped_sp": (VOCAB, 0.1, 0.5, 3.0, True, True, 3),
    "cce_full_smooth_sp": (None, 0.2, None, None, False, True, 1),
}

# Known core bug: with label smoothing, cross_entropy.py takes log(exp(logit - max) / sum), which is
# log(0) = -inf once a logit lies more than ~88 below the max, so the loss is inf (torch gives a finite loss).

def _gen(*key: object) -> torch.Generator:
    seed = 0
    for part in key:
        for ch in str(part):
            seed = (seed * 131 + ord(ch)) % (2**31 - 1)
        seed = (seed * 131 + 1) % (2**31 - 1)
    return torch.Generator().manual_seed(seed)


def _randn(shape, *key) -> torch.Tensor:
    return torch.randn(shape, generator=_gen(*key))


# --------------------------------------------------------------------------- shared case data


def linear_data(name: str, in_size: int, out_size: int) -> Dict[str, torch.Tensor]:
    """Full weight, bias, input and upstream gradient of one linear case."""
    return {"w": _randn((out_size, in_size), name, "w") / in_size ** 0.5, "b": _randn((out_size,), name, "b"),
            "x": _randn((SEQ, BATCH, in_size), name, "x"), "g": _randn((SEQ, BATCH, out_size), name, "g")}


def embedding_data(name: str) -> Dict[str, torch.Tensor]:
    w = torch.zeros(PADDED_VOCAB, HIDDEN)
    w[:VOCAB] = _randn((VOCAB, HIDDEN), name, "w")  # rows past VOCAB are zero padding
    ids = torch.randint(0, VOCAB, (SEQ, BATCH), generator=_gen(name, "ids"))
    ids[0, 0], ids[-1, -1], ids[1, 0], ids[1, 1] = 0, VOCAB - 1, 3, 3  # both ends, and a repeated id
    return {"w": w, "ids": ids, "g": _randn((SEQ, BATCH, HIDDEN), name, "g")}


def ce_data(name: str) -> Dict[str, torch.Tensor]:
    vocab, _, scale = CE_CASES[name]
    vocab = vocab or PADDED_VOCAB
    logits = _randn((SEQ, BATCH, PADDED_VOCAB), name, "logits") * scale
    target = torch.randint(0, vocab, (SEQ, BATCH), generator=_gen(name, "target"))
    target[0, 0], target[-1, -1] = 0, vocab - 1
    return {"logits": logits, "target": target, "g": _randn((SEQ, BATCH), name, "g")}


def chunked_ce_data(name: str) -> Dict[str, torch.Tensor]:
    """Hidden states, the full output weight and bias, targets and a masked upstream gradient."""
    vocab = CHUNKED_CE_CASES[name][0] or PADDED_VOCAB
    target = torch.randint(0, vocab, (SEQ, BATCH), generator=_gen(name, "target"))
    target[0, 0], target[-1, -1] = 0, vocab - 1
    g = _randn((SEQ, BATCH), name, "g")
    g[1] = 0.0  # a padding mask: these tokens' losses do not count
    return {"x": _randn((SEQ, BATCH, HIDDEN), name, "x"), "w": _randn((PADDED_VOCAB, HIDDEN), name, "w"),
            "b": _randn((PADDED_VOCAB,), name, "b"), "target": target, "g": g}


def fused_upstream(name: str, g: torch.Tensor, shard: TPShard, tp: int) -> List[torch.Tensor]:
    """Each rank's upstream gradient of a fused output; replicas get random partials summing to G."""
    per_rank = [shard.shard(g, r, tp) for r in range(tp)]
    full_offset, local_offset = 0, 0
    for index, seg in enumerate(shard.segments):
        if seg.is_replicated(tp):
            for unit in range(seg.units):
                holders = [r for r in range(tp) if seg.first_unit(r, tp) == unit]
                assert len(holders) > 1
                whole = g.narrow(-1, full_offset + unit * seg.unit_size, seg.unit_size)
                partials = [_randn(whole.shape, name, "partial", tp, index, unit, r) for r in holders[:-1]]
                partials.append(whole - sum(partials))
                for r, part in zip(holders, partials):
                    per_rank[r].narrow(-1, local_offset, seg.unit_size).copy_(part)
        full_offset += seg.size
        local_offset += seg.local_units(tp) * seg.unit_size
    return per_rank


def _seq_chunk(t: torch.Tensor, rank: int, tp: int) -> torch.Tensor:
    return t.chunk(tp, dim=0)[rank].contiguous()


def _last_chunk(t: torch.Tensor, rank: int, tp: int) -> torch.Tensor:
    return t.chunk(tp, dim=-1)[rank].contiguous()


# --------------------------------------------------------------------------- worker


def _grads(layer: nn.Module, x: torch.Tensor) -> Dict[str, torch.Tensor]:
    out = {"dx": x.grad.clone(), "dw": layer.weight.grad.clone()}
    if layer.bias is not None:
        out["db"] = layer.bias.grad.clone()
    return out


def _run_column(name, cfg, group, rank, tp):
    d = linear_data(name, IN, OUT)
    layer = ColumnParallelLinear(IN, OUT, group=group, **cfg)
    with torch.no_grad():
        layer.weight.copy_(layer.shard.shard(d["w"], rank, tp))
        if layer.bias is not None:
            layer.bias.copy_(layer.shard.shard(d["b"], rank, tp))
    x = (_seq_chunk(d["x"], rank, tp) if cfg["sequence_parallel"] else d["x"].clone()).requires_grad_(True)
    y = layer(x)
    y.backward(d["g"] if cfg["gather_output"] else _last_chunk(d["g"], rank, tp))
    return {"y": y.detach().clone(), **_grads(layer, x)}


def _run_row(name, cfg, group, rank, tp):
    d = linear_data(name, OUT, IN)
    layer = RowParallelLinear(OUT, IN, group=group, **cfg)
    with torch.no_grad():
        layer.weight.copy_(layer.shard.shard(d["w"], rank, tp))
        if layer.bias is not None:
            layer.bias.copy_(d["b"])
    x = (_last_chunk(d["x"], rank, tp) if cfg["input_is_parallel"] else d["x"].clone()).requires_grad_(True)
    y = layer(x)
    y.backward(_seq_chunk(d["g"], rank, tp) if cfg["sequence_parallel"] else d["g"])
    return {"y": y.detach().clone(), **_grads(layer, x)}


def _run_fused(name, segments, group, rank, tp):
    out_size = sum(seg.size for seg in segments)
    d = linear_data(name, IN, out_size)
    layer = ColumnParallelLinear(IN, out_size, group=group, segments=segments, bias=True)
    with torch.no_grad():
        layer.weight.copy_(layer.shard.shard(d["w"], rank, tp))
        layer.bias.copy_(layer.shard.shard(d["b"], rank, tp))
    x = d["x"].clone().requires_grad_(True)
    y = layer(x)
    y.backward(fused_upstream(name, d["g"], TPShard(2, tuple(segments)), tp)[rank])
    raw = _grads(layer, x)
    reduce_replicated_grads(layer.weight.grad, layer.shard, group)
    reduce_replicated_grads(layer.bias.grad, layer.shard, group)
    return {"y": y.detach().clone(), "dw_before_reduce": raw["dw"], **_grads(layer, x)}


def _run_embedding(name, sp, group, rank, tp):
    d = embedding_data(name)
    layer = VocabParallelEmbedding(VOCAB, PADDED_VOCAB, HIDDEN, group=group, sequence_parallel=sp)
    with torch.no_grad():
        layer.weight.copy_(layer.shard.shard(d["w"], rank, tp))
    y = layer(d["ids"])
    y.backward(_seq_chunk(d["g"], rank, tp) if sp else d["g"])
    return {"y": y.detach().clone(), "dw": layer.weight.grad.clone()}


def _run_ce(name, group, rank, tp, fused=False):
    vocab, smoothing, _ = CE_CASES[name]
    d = ce_data(name)
    logits = _last_chunk(d["logits"], rank, tp).requires_grad_(True)
    loss = vocab_parallel_cross_entropy(logits, d["target"], group, vocab_size=vocab, label_smoothing=smoothing,
                                        fused=fused)
    loss.backward(d["g"])
    return {"loss": loss.detach().clone(), "dlogits": logits.grad.clone()}


def _run_chunked_ce(name, group, rank, tp):
    vocab, smoothing, scale, cap, bias, sp, chunk = CHUNKED_CE_CASES[name]
    d = chunked_ce_data(name)
    x = (d["x"].chunk(tp, dim=0)[rank] if sp else d["x"]).clone().requires_grad_(True)
    w = d["w"].chunk(tp, dim=0)[rank].clone().requires_grad_(True)
    b = d["b"].chunk(tp, dim=0)[rank].clone().requires_grad_(True) if bias else None
    loss = linear_vocab_parallel_cross_entropy(column_parallel_input(x, group, sp), w, b, d["target"], group,
                                               vocab_size=vocab, label_smoothing=smoothing, chunk=chunk,
                                               logit_scale=scale, softcap=cap)
    loss.backward(d["g"])
    out = {"loss": loss.detach().clone(), "dx": x.grad.clone(), "dw": w.grad.clone()}
    if bias:
        out["db"] = b.grad.clone()
    return out


def worker(rank, world_size):
    state = initialize(tp=world_size)
    group, tp = state.tp_group, world_size
    results = {}
    for name, cfg in COLUMN_CASES.items():
        results[name] = _run_column(name, cfg, group, rank, tp)
    for name, cfg in ROW_CASES.items():
        results[name] = _run_row(name, cfg, group, rank, tp)
    for name, segments in FUSED_CASES.items():
        results[name] = _run_fused(name, segments, group, rank, tp)
    for name, sp in EMBEDDING_CASES.items():
        results[name] = _run_embedding(name, sp, group, rank, tp)
    for name in CE_CASES:
        results[name] = _run_ce(name, group, rank, tp)
    for name in FUSED_CE_CASES:
        results[f"fused_{name}"] = _run_ce(name, group, rank, tp, fused=True)
    for name in CHUNKED_CE_CASES:
        results[name] = _run_chunked_ce(name, group, rank, tp)
    return results  # the harness carries it back with torch.save


@pytest.fixture(scope="module", params=[2, 4], ids=lambda tp: f"tp{tp}")
def launched(request):
    tp = request.param
    return tp, run_distributed(tp, worker)


# --------------------------------------------------------------------------- references


def _close(actual, expected, what):
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, msg=lambda m: f"{what}: {m}")


def _reference_linear(d, bias: bool):
    ref = nn.Linear(d["w"].shape[1], d["w"].shape[0], bias=bias)
    with torch.no_grad():
        ref.weight.copy_(d["w"])
        if bias:
            ref.bias.copy_(d["b"])
    x = d["x"].clone().requires_grad_(True)
    y = ref(x)
    y.backward(d["g"])
    return {"y": y.detach(), "dx": x.grad, "dw": ref.weight.grad, "db": ref.bias.grad if bias else None}


@pytest.mark.parametrize("name", list(COLUMN_CASES))
def test_column_parallel_linear(launched, name):
    tp, results = launched
    cfg = COLUMN_CASES[name]
    ref = _reference_linear(linear_data(name, IN, OUT), cfg["bias"])
    shard = TPShard.even(0, OUT)
    local = [res[name] for res in results]
    for r, res in enumerate(local):
        _close(res["y"], ref["y"] if cfg["gather_output"] else _last_chunk(ref["y"], r, tp), f"output rank {r}")
        if not cfg["sequence_parallel"]:  # replicated input: its gradient is all-reduced onto every rank
            _close(res["dx"], ref["dx"], f"input grad rank {r}")
    if cfg["sequence_parallel"]:
        _close(torch.cat([res["dx"] for res in local], dim=0), ref["dx"], "input grad (sequence shards)")
    _close(shard.unshard([res["dw"] for res in local]), ref["dw"], "weight grad")
    if cfg["bias"]:
        _close(shard.unshard([res["db"] for res in local]), ref["db"], "bias grad")
    else:
        assert all("db" not in res for res in local)


@pytest.mark.parametrize("name", list(ROW_CASES))
def test_row_parallel_linear(launched, name):
    tp, results = launched
    cfg = ROW_CASES[name]
    ref = _reference_linear(linear_data(name, OUT, IN), cfg["bias"])
    shard = TPShard.even(1, OUT)
    local = [res[name] for res in results]
    for r, res in enumerate(local):
        _close(res["y"], _seq_chunk(ref["y"], r, tp) if cfg["sequence_parallel"] else ref["y"], f"output rank {r}")
        if cfg["input_is_parallel"]:
            _close(res["dx"], _last_chunk(ref["dx"], r, tp), f"input grad rank {r}")
        else:
            _close(res["dx"], ref["dx"], f"input grad rank {r}")
    _close(shard.unshard([res["dw"] for res in local]), ref["dw"], "weight grad")
    if not cfg["bias"]:
        return
    if cfg["sequence_parallel"]:  # each rank saw its sequence shard: the grads sum to the full one
        _close(sum(res["db"] for res in local), ref["db"], "bias grad (sum over sequence shards)")
    else:
        for r, res in enumerate(local):
            _close(res["db"], ref["db"], f"bias grad rank {r}")


@pytest.mark.parametrize("name", list(FUSED_CASES))
def test_fused_segmented_column_with_replicated_grads(launched, name):
    tp, results = launched
    segments = FUSED_CASES[name]
    out_size = sum(seg.size for seg in segments)
    ref = _reference_linear(linear_data(name, IN, out_size), bias=True)
    weight_shard, out_shard = TPShard(0, segments), TPShard(2, segments)
    local = [res[name] for res in results]
    for r, res in enumerate(local):
        _close(res["y"], out_shard.shard(ref["y"], r, tp), f"output rank {r}")
        _close(res["dx"], ref["dx"], f"input grad rank {r}")
        # every replica, not only the first holder, ends up with the full-model gradient
        _close(res["dw"], weight_shard.shard(ref["dw"], r, tp), f"weight grad rank {r}")
        _close(res["db"], weight_shard.shard(ref["db"], r, tp), f"bias grad rank {r}")
    _close(weight_shard.unshard([res["dw"] for res in local]), ref["dw"], "unsharded weight grad")
    _close(weight_shard.unshard([res["db"] for res in local]), ref["db"], "unsharded bias grad")
    if weight_shard.has_replicas(tp):  # the reduction was needed: replicas held partial grads before it
        before = weight_shard.unshard([res["dw_before_reduce"] for res in local])
        assert not torch.allclose(before, ref["dw"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", list(EMBEDDING_CASES))
def test_vocab_parallel_embedding(launched, name):
    tp, results = launched
    sp = EMBEDDING_CASES[name]
    d = embedding_data(name)
    ref = nn.Embedding(VOCAB, HIDDEN)
    with torch.no_grad():
        ref.weight.copy_(d["w"][:VOCAB])
    y = ref(d["ids"])
    y.backward(d["g"])
    local = [res[name] for res in results]
    for r, res in enumerate(local):
        _close(res["y"], _seq_chunk(y.detach(), r, tp) if sp else y.detach(), f"output rank {r}")
    dw = TPShard.even(0, PADDED_VOCAB).unshard([res["dw"] for res in local])
    _close(dw[:VOCAB], ref.weight.grad, "weight grad")
    assert torch.equal(dw[VOCAB:], torch.zeros(PADDED_VOCAB - VOCAB, HIDDEN)), "padding rows got a gradient"


@pytest.mark.parametrize("name", list(CE_CASES))
def test_vocab_parallel_cross_entropy(launched, name):
    _check_ce(launched, name, name)


@pytest.mark.parametrize("name", FUSED_CE_CASES)
def test_fused_vocab_parallel_cross_entropy(launched, name):
    """--cross-entropy-loss-fusion's materialised path: its compiled kernels on each rank's logits."""
    _check_ce(launched, name, f"fused_{name}")


def _check_ce(launched, name, key):
    """The TP loss of CE case ``name`` (results under ``key``) equals torch's cross-entropy, loss and gradient."""
    tp, results = launched
    vocab, smoothing, _ = CE_CASES[name]
    vocab = vocab or PADDED_VOCAB
    d = ce_data(name)
    logits = d["logits"].clone().requires_grad_(True)
    # Megatron's smoothing (target 1-ls, the other V-1 share ls) is torch's with ls * V / (V - 1)
    loss = F.cross_entropy(logits[..., :vocab].reshape(-1, vocab), d["target"].reshape(-1), reduction="none",
                           label_smoothing=smoothing * vocab / (vocab - 1)).view(SEQ, BATCH)
    loss.backward(d["g"])
    local = [res[key] for res in results]
    for r, res in enumerate(local):
        _close(res["loss"], loss.detach(), f"loss rank {r}")
        _close(res["dlogits"], _last_chunk(logits.grad, r, tp), f"logits grad rank {r}")
    if vocab < PADDED_VOCAB:
        full = TPShard.even(2, PADDED_VOCAB).unshard([res["dlogits"] for res in local])
        assert torch.equal(full[..., vocab:], torch.zeros(SEQ, BATCH, PADDED_VOCAB - vocab))


@pytest.mark.parametrize("name", list(CHUNKED_CE_CASES))
def test_chunked_linear_cross_entropy(launched, name):
    """The chunked output layer + loss equals torch's linear and cross-entropy: loss, input, weight and bias
    gradients, with padding vocabulary, label smoothing, a logit scale and softcap, a masked gradient and SP."""
    tp, results = launched
    vocab, smoothing, scale, cap, bias, sp, _ = CHUNKED_CE_CASES[name]
    vocab = vocab or PADDED_VOCAB
    d = chunked_ce_data(name)
    x, w = d["x"].clone().requires_grad_(True), d["w"].clone().requires_grad_(True)
    b = d["b"].clone().requires_grad_(True) if bias else None
    logits = F.linear(x, w, b) * (scale or 1.0)  # [s, b, padded vocab]
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    loss = F.cross_entropy(logits[..., :vocab].reshape(-1, vocab), d["target"].reshape(-1), reduction="none",
                           label_smoothing=smoothing * vocab / (vocab - 1)).view(SEQ, BATCH)
    loss.backward(d["g"])
    local = [res[name] for res in results]
    for r, res in enumerate(local):
        _close(res["loss"], loss.detach(), f"loss rank {r}")
        _close(res["dx"], x.grad.chunk(tp, dim=0)[r] if sp else x.grad, f"input grad rank {r}")
        _close(res["dw"], w.grad.chunk(tp, dim=0)[r], f"weight grad rank {r}")
        if bias:
            _close(res["db"], b.grad.chunk(tp, dim=0)[r], f"bias grad rank {r}")
    assert torch.equal(torch.cat([res["dw"] for res in local])[vocab:], torch.zeros(PADDED_VOCAB - vocab, HIDDEN))

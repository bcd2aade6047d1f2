"""Every tensor-parallel mapping, forward and backward, against its mathematical definition.

One gloo launch per world size (2 and 4). At world 4 the checks run twice: over
one TP group of 4 and over two TP groups of 2 ([0,1], [2,3]), which catches a
collective that uses the global rank or the world group instead of the TP group.
Every rank draws its inputs and upstream gradients from a seed that depends on
(TP size, group index, rank in group), so the parent recomputes exactly what
each rank should see.

Definitions (rank k of a group of t; x_k its input, g_k its upstream grad):
    copy_to          y = x_k                    dx = sum_j g_j
    reduce_from      y = sum_j x_j              dx = g_k
    sum_partials     y = sum_j x_j              dx = sum_j g_j
    scatter_to       y = X[..., k-th chunk]     dx = cat_j g_j (last dim)
    gather_from      y = cat_j x_j (last dim)   dx = g_k[..., k-th chunk]
    scatter_to_sp    y = X[k-th chunk]          dx = cat_j g_j (dim 0)
    gather_from_sp   y = cat_j x_j (dim 0)      dx = (sum_j g_j)[k-th chunk]   (partial grads)
                                                dx = g_k[k-th chunk]           (output_grad_is_partial=False)
    reduce_scatter   y = (sum_j x_j)[k-th]      dx = cat_j g_j (dim 0)
"""
from __future__ import annotations


import pytest
import torch
import torch.distributed as dist

from core.parallel_state import Group, initialize, single_process_state
from core.tensor_parallel import mappings as M
from core.launcher import run_distributed


S, B, H = 3, 2, 5  # local sizes: odd and distinct so that a wrong dim shows

_MAPPINGS = {
    "copy": M.copy_to_tensor_model_parallel_region,
    "reduce": M.reduce_from_tensor_model_parallel_region,
    "sum_partials": M.sum_partials_over_tensor_model_parallel_region,
    "scatter": M.scatter_to_tensor_model_parallel_region,
    "gather": M.gather_from_tensor_model_parallel_region,
    "sp_scatter": M.scatter_to_sequence_parallel_region,
    "sp_gather": M.gather_from_sequence_parallel_region,
    "sp_gather_nonpartial": lambda x, g: M.gather_from_sequence_parallel_region(x, g, output_grad_is_partial=False),
    "sp_reduce_scatter": M.reduce_scatter_to_sequence_parallel_region,
}


def _tensor(shape, *key):
    return torch.randn(shape, generator=torch.Generator().manual_seed(_seed(key)))


def _seed(key):
    """A stable seed from a tuple of small ints and strings (python's hash() is salted per process)."""
    value = 17
    for part in key:
        for ch in str(part):
            value = (value * 131 + ord(ch)) % (2**31 - 1)
        value = (value * 131 + 7) % (2**31 - 1)
    return value


def _shapes(t):
    """(input shape, upstream grad shape) of each mapping for a group of t ranks."""
    return {
        "copy": ((S, B, H), (S, B, H)),
        "reduce": ((S, B, H), (S, B, H)),
        "sum_partials": ((S, B, H), (S, B, H)),
        "scatter": ((S, B, H * t), (S, B, H)),
        "gather": ((S, B, H), (S, B, H * t)),
        "sp_scatter": ((S * t, B, H), (S, B, H)),
        "sp_gather": ((S, B, H), (S * t, B, H)),
        "sp_gather_nonpartial": ((S, B, H), (S * t, B, H)),
        "sp_reduce_scatter": ((S * t, B, H), (S, B, H)),
    }


# Inputs of these mappings are replicated over the group (same on every member).
_REPLICATED_INPUT = {"scatter", "sp_scatter"}


def _inputs(name, t, gi, k):
    x_shape, g_shape = _shapes(t)[name]
    x_key = (name, "x", t, gi) if name in _REPLICATED_INPUT else (name, "x", t, gi, k)
    return _tensor(x_shape, *x_key), _tensor(g_shape, name, "g", t, gi, k)


def _check_mappings(group, t, gi):
    k = group.rank
    out = {}
    for name, fn in _MAPPINGS.items():
        x, g = _inputs(name, t, gi, k)
        x_before = x.clone()
        x.requires_grad_(True)
        y = fn(x, group)
        y.backward(g)
        out[name] = {"y": y.detach().clone(), "dx": x.grad.clone(), "x_untouched": torch.equal(x.detach(), x_before)}

    # a non-contiguous input (a transposed view) must gather like its contiguous copy
    base = _tensor((B, S, H), "noncontig", t, gi, k)
    out["gather_noncontig"] = M.gather_from_tensor_model_parallel_region(base.transpose(0, 1), group)

    # the plain helpers, along a middle dimension
    x = _tensor((S, B * t, H), "helper", t, gi, k)
    out["split_dim1"] = M.split_along_dim(x, 1, group)
    out["all_gather_dim1"] = M.all_gather_along_dim(x, 1, group)
    out["reduce_scatter_dim1"] = M.reduce_scatter_along_dim(x, 1, group)
    out["all_reduce_sum"] = M.all_reduce(x.clone(), group)
    out["all_reduce_max"] = M.all_reduce(x.clone(), group, dist.ReduceOp.MAX)
    buf = x.clone()
    out["all_reduce_in_place"] = M.all_reduce(buf, group) is buf
    for what, call in (("split", lambda: M.split_along_dim(torch.zeros(t + 1, 2), 0, group)),
                       ("reduce_scatter", lambda: M.reduce_scatter_along_dim(torch.zeros(2, t + 1), 1, group))):
        try:
            call()
            out[f"{what}_indivisible_raises"] = False
        except ValueError:
            out[f"{what}_indivisible_raises"] = True
    return out


def _check_size_one(group):
    """Every mapping is the identity (the same tensor object, grads untouched) on a group of one."""
    ok = {}
    for name, fn in _MAPPINGS.items():
        x = _tensor((S, B, H), "one", name).requires_grad_(True)
        g = _tensor((S, B, H), "one-g", name)
        y = fn(x, group)
        y.backward(g)
        ok[name] = y is x and torch.equal(x.grad, g)
    x = _tensor((S, B, H), "one-helper")
    ok["helpers"] = (M.split_along_dim(x, 0, group) is x and M.all_gather_along_dim(x, 1, group) is x
                     and M.reduce_scatter_along_dim(x, 2, group) is x and M.all_reduce(x, group) is x)
    return ok


def worker(rank, world_size):
    results = {}
    for t in ([world_size, 2] if world_size > 2 else [world_size]):
        state = initialize(tp=t)
        group = state.tp_group
        results[t] = {"ranks": group.ranks, "rank": group.rank,
                      "checks": _check_mappings(group, t, rank // t)}
    results["size_one"] = _check_size_one(state.groups["cp"])  # cp=1: a group of one inside a live world
    return results  # the harness carries it back with torch.save


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"world{w}")
def launched(request):
    world = request.param
    return world, run_distributed(world, worker)


def _cases(world):
    return [world, 2] if world > 2 else [world]


def _expected(name, t, gi, k):
    """(y, dx) for rank k of group gi, from everybody's inputs."""
    xs, gs = zip(*[_inputs(name, t, gi, j) for j in range(t)])
    chunk = lambda v, dim: v.chunk(t, dim=dim)[k]  # noqa: E731
    if name == "copy":
        return xs[k], sum(gs)
    if name == "reduce":
        return sum(xs), gs[k]
    if name == "sum_partials":
        return sum(xs), sum(gs)
    if name == "scatter":
        return chunk(xs[k], -1), torch.cat(gs, dim=-1)
    if name == "gather":
        return torch.cat(xs, dim=-1), chunk(gs[k], -1)
    if name == "sp_scatter":
        return chunk(xs[k], 0), torch.cat(gs, dim=0)
    if name == "sp_gather":
        return torch.cat(xs, dim=0), chunk(sum(gs), 0)
    if name == "sp_gather_nonpartial":
        return torch.cat(xs, dim=0), chunk(gs[k], 0)
    if name == "sp_reduce_scatter":
        return chunk(sum(xs), 0), torch.cat(gs, dim=0)
    raise KeyError(name)


def _each_rank(launched):
    world, results = launched
    for t in _cases(world):
        for rank, res in enumerate(results):
            yield t, rank // t, rank % t, res[t]


def test_groups_are_contiguous_tp_blocks(launched):
    for t, gi, k, res in _each_rank(launched):
        assert res["ranks"] == list(range(gi * t, gi * t + t)) and res["rank"] == k


@pytest.mark.parametrize("name", list(_MAPPINGS))
def test_mapping_forward(launched, name):
    for t, gi, k, res in _each_rank(launched):
        y_expected, _ = _expected(name, t, gi, k)
        torch.testing.assert_close(res["checks"][name]["y"], y_expected, rtol=1e-6, atol=1e-6,
                                   msg=lambda m: f"tp={t} group={gi} rank={k}: {m}")
        assert res["checks"][name]["x_untouched"], f"{name} modified its input in place"


@pytest.mark.parametrize("name", list(_MAPPINGS))
def test_mapping_backward(launched, name):
    for t, gi, k, res in _each_rank(launched):
        _, dx_expected = _expected(name, t, gi, k)
        torch.testing.assert_close(res["checks"][name]["dx"], dx_expected, rtol=1e-6, atol=1e-6,
                                   msg=lambda m: f"tp={t} group={gi} rank={k}: {m}")


def test_gather_of_non_contiguous_input(launched):
    for t, gi, k, res in _each_rank(launched):
        parts = [_tensor((B, S, H), "noncontig", t, gi, j).transpose(0, 1) for j in range(t)]
        assert torch.equal(res["checks"]["gather_noncontig"], torch.cat(parts, dim=-1))


def test_helpers_along_middle_dim(launched):
    for t, gi, k, res in _each_rank(launched):
        xs = [_tensor((S, B * t, H), "helper", t, gi, j) for j in range(t)]
        c = res["checks"]
        assert torch.equal(c["split_dim1"], xs[k][:, k * B:(k + 1) * B])
        assert torch.equal(c["all_gather_dim1"], torch.cat(xs, dim=1))
        torch.testing.assert_close(c["reduce_scatter_dim1"], sum(xs)[:, k * B:(k + 1) * B], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(c["all_reduce_sum"], sum(xs), rtol=1e-6, atol=1e-6)
        assert torch.equal(c["all_reduce_max"], torch.stack(xs).amax(dim=0))
        assert c["all_reduce_in_place"]


def test_indivisible_sizes_raise(launched):
    for t, gi, k, res in _each_rank(launched):
        assert res["checks"]["split_indivisible_raises"]
        assert res["checks"]["reduce_scatter_indivisible_raises"]


def test_size_one_group_inside_a_live_world_is_identity(launched):
    _, results = launched
    for res in results:
        assert all(res["size_one"].values()), res["size_one"]


def test_size_one_group_without_distributed_is_identity():
    assert not dist.is_initialized()
    ok = _check_size_one(single_process_state().tp_group)
    assert all(ok.values()), ok
    ok = _check_size_one(Group([3], None, 0))
    assert all(ok.values()), ok

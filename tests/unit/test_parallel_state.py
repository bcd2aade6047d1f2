"""Process-group layout (Megatron's tp-cp-ep-dp-pp order), degree validation and TPShard.

Single process: ``initialize`` is also exercised with a simulated world by
replacing the few ``torch.distributed`` calls it makes, so the per-rank group
assignment and the collective order of ``new_group`` calls can be checked
without spawning processes.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import core.parallel_state as ps
from core.parallel_state import GROUP_DIMS, group_ranks, initialize, validate_degrees
from core.tensor_parallel.layers import Segment, TPShard


def sizes(tp=1, cp=1, ep=1, dp=1, pp=1):
    return {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}


# --------------------------------------------------------------------------- group_ranks


def test_megatron_16_ranks_tp2_pp4():
    # The example in Megatron-LM's parallel_state.initialize_model_parallel docstring.
    s = sizes(tp=2, dp=2, pp=4)
    assert group_ranks(s, ("tp",)) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert group_ranks(s, ("pp",)) == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert group_ranks(s, GROUP_DIMS["dp"]) == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11],
                                                  [12, 14], [13, 15]]
    assert group_ranks(s, GROUP_DIMS["mp"]) == [[0, 1, 4, 5, 8, 9, 12, 13], [2, 3, 6, 7, 10, 11, 14, 15]]
    assert ps._embedding_group_ranks(s) == [[0, 12], [1, 13], [2, 14], [3, 15]]


def test_tp2_cp2_dp2():
    s = sizes(tp=2, cp=2, dp=2)
    assert group_ranks(s, ("tp",)) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert group_ranks(s, ("cp",)) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(s, GROUP_DIMS["dp"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert group_ranks(s, GROUP_DIMS["dp_cp"]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert group_ranks(s, GROUP_DIMS["tp_cp"]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert group_ranks(s, ("pp",)) == [[r] for r in range(8)]


def test_tp2_ep2_dp2_expert_groups_carved_from_data_parallel():
    # 8 ranks, tp=2: dense data parallel is 4 wide; ep=2 leaves expert-dp 2 wide.
    s = sizes(tp=2, ep=2, dp=2)
    assert group_ranks(s, ("ep",)) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(s, GROUP_DIMS["expert_dp"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert group_ranks(s, GROUP_DIMS["dp"]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert group_ranks(s, GROUP_DIMS["tp_ep"]) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_cp_varies_faster_than_ep():
    # order tp-cp-ep-dp-pp: with tp=2, cp=2, ep=2 (8 ranks) CP strides by 2 and EP by 4
    s = sizes(tp=2, cp=2, ep=2)
    assert group_ranks(s, ("cp",)) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(s, ("ep",)) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert group_ranks(s, GROUP_DIMS["dp_cp"]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert group_ranks(s, GROUP_DIMS["dp"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_embedding_group_with_one_stage_is_the_rank_alone():
    assert ps._embedding_group_ranks(sizes(tp=2, dp=2)) == [[0], [1], [2], [3]]
    assert ps._embedding_group_ranks(sizes(pp=2)) == [[0, 1]]


def _coords(rank, s):
    """Independent decoding of a global rank into per-dimension coordinates."""
    out = {}
    for dim in ("tp", "cp", "ep", "dp", "pp"):  # Megatron's order, written out independently
        out[dim] = rank % s[dim]
        rank //= s[dim]
    return out


@pytest.mark.parametrize("tp,cp,ep,dp,pp", [(2, 1, 1, 2, 4), (2, 2, 2, 1, 2), (1, 2, 1, 3, 2), (4, 1, 2, 2, 1),
                                            (3, 1, 1, 1, 1)])
def test_every_layout_partitions_the_world_along_its_dimensions(tp, cp, ep, dp, pp):
    s = sizes(tp, cp, ep, dp, pp)
    world = tp * cp * ep * dp * pp
    for name, dims in GROUP_DIMS.items():
        groups = group_ranks(s, dims)
        expected_size = 1
        for d in dims:
            expected_size *= s[d]
        assert all(len(g) == expected_size for g in groups), name
        assert sorted(itertools.chain(*groups)) == list(range(world)), name
        for g in groups:
            assert g == sorted(g)
            fixed = [d for d in s if d not in dims]
            first = _coords(g[0], s)
            for member in g:
                c = _coords(member, s)
                assert all(c[d] == first[d] for d in fixed), (name, g)
            # the members span every combination of the varying coordinates
            assert len({tuple(_coords(m, s)[d] for d in dims) for m in g}) == expected_size


# --------------------------------------------------------------------------- validate_degrees


@pytest.mark.parametrize("world,tp,pp,cp,ep,flag", [
    (8, 3, 1, 1, 1, "--tensor-model-parallel-size"),
    (8, 2, 3, 1, 1, "--pipeline-model-parallel-size"),
    (6, 2, 1, 2, 1, "--context-parallel-size"),
    (8, 2, 2, 1, 3, "--expert-model-parallel-size"),
    (16, 2, 2, 2, 4, "--expert-model-parallel-size"),
])
def test_validate_degrees_rejects_and_names_the_flag(world, tp, pp, cp, ep, flag):
    with pytest.raises(ValueError, match=flag):
        validate_degrees(world, tp, pp, cp, ep)


@pytest.mark.parametrize("world,tp,pp,cp,ep", [(1, 1, 1, 1, 1), (8, 2, 2, 1, 2), (16, 2, 4, 1, 2),
                                               (12, 3, 2, 2, 1), (8, 1, 1, 1, 8)])
def test_validate_degrees_accepts_tiling_layouts(world, tp, pp, cp, ep):
    validate_degrees(world, tp, pp, cp, ep)


# --------------------------------------------------------------------------- initialize


def test_initialize_without_distributed_gives_size_one_groups():
    assert not torch.distributed.is_initialized()
    state = initialize()
    assert (state.world_size, state.rank, state.dp) == (1, 0, 1)
    assert set(state.groups) == set(GROUP_DIMS) | {"embedding", "cp_ring", "cp_ulysses"}
    for name, group in state.groups.items():
        assert (group.ranks, group.rank, group.size, group.handle) == ([0], 0, 1, None), name
    assert state.is_first_stage and state.is_last_stage
    assert (state.tp_rank, state.dp_rank, state.pp_rank, state.cp_rank) == (0, 0, 0, 0)
    assert ps.single_process_state().groups.keys() == state.groups.keys()


def test_initialize_without_distributed_rejects_parallel_degrees():
    with pytest.raises(ValueError, match="--tensor-model-parallel-size"):
        initialize(tp=2)


class _FakeDist:
    """Stands in for the torch.distributed calls initialize() makes; records new_group calls."""

    def __init__(self, world, rank):
        self.world, self.rank, self.calls = world, rank, []

    def install(self, monkeypatch):
        monkeypatch.setattr(ps.dist, "is_available", lambda: True)
        monkeypatch.setattr(ps.dist, "is_initialized", lambda: True)
        monkeypatch.setattr(ps.dist, "get_world_size", lambda group=None: self.world)
        monkeypatch.setattr(ps.dist, "get_rank", lambda group=None: self.rank)
        monkeypatch.setattr(ps.dist, "new_group", self.new_group)

    def new_group(self, ranks, backend=None, **_):
        self.calls.append(tuple(ranks))
        return ("handle", tuple(ranks))


def _fake_initialize(monkeypatch, world, rank, **degrees):
    fake = _FakeDist(world, rank)
    with monkeypatch.context() as m:
        fake.install(m)
        state = initialize(**degrees)
    return state, fake.calls


def test_initialize_assigns_each_rank_its_groups(monkeypatch):
    state, _ = _fake_initialize(monkeypatch, 16, 5, tp=2, pp=4)
    assert (state.world_size, state.rank, state.dp) == (16, 5, 2)
    assert state.tp_group.ranks == [4, 5] and state.tp_rank == 1
    assert state.pp_group.ranks == [1, 5, 9, 13] and state.pp_rank == 1
    assert state.dp_group.ranks == [5, 7] and state.dp_rank == 0
    assert "embedding" not in state.groups  # a middle stage holds no word embeddings
    assert state.groups["mp"].ranks == [0, 1, 4, 5, 8, 9, 12, 13]
    assert not state.is_first_stage and not state.is_last_stage
    assert state.tp_group.handle == ("handle", (4, 5))
    assert state.groups["cp"].handle is None  # singleton groups need no handle

    last, _ = _fake_initialize(monkeypatch, 16, 14, tp=2, pp=4)
    assert last.is_last_stage and last.pp_rank == 3 and last.groups["embedding"].ranks == [2, 14]
    assert last.groups["embedding"].rank == 1
    first, _ = _fake_initialize(monkeypatch, 16, 1, tp=2, pp=4)
    assert first.is_first_stage and first.groups["embedding"].ranks == [1, 13]
    assert first.groups["embedding"].rank == 0


def test_initialize_creates_groups_in_the_same_order_on_every_rank(monkeypatch):
    # new_group is collective: every rank must create every multi-rank group, in the same order, once.
    orders = [_fake_initialize(monkeypatch, 8, r, tp=2, cp=2)[1] for r in range(8)]
    assert all(order == orders[0] for order in orders)
    assert len(orders[0]) == len(set(orders[0]))
    assert all(len(ranks) > 1 for ranks in orders[0])
    assert (0, 1) in orders[0] and (0, 2) in orders[0] and (0, 4) in orders[0]


def test_initialize_with_expert_parallel(monkeypatch):
    state, _ = _fake_initialize(monkeypatch, 8, 6, tp=2, ep=2)
    assert state.dp == 4 and state.ep == 2
    assert state.groups["ep"].ranks == [4, 6]
    assert state.groups["expert_dp"].ranks == [2, 6]
    assert state.dp_group.ranks == [0, 2, 4, 6] and state.dp_rank == 3


# --------------------------------------------------------------------------- TPShard


def _rows(n, cols=3):
    return torch.arange(n * cols, dtype=torch.float32).reshape(n, cols)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_even_shard_round_trip(tp):
    shard = TPShard.even(0, 8)
    full = _rows(8)
    locals_ = [shard.shard(full, r, tp) for r in range(tp)]
    for r, local in enumerate(locals_):
        assert torch.equal(local, full[r * 8 // tp:(r + 1) * 8 // tp])
    assert shard.local_size(tp) == 8 // tp
    assert torch.equal(shard.unshard(locals_), full)


def test_even_shard_along_dim_1():
    shard = TPShard.even(1, 6)
    full = _rows(4, 6)
    locals_ = [shard.shard(full, r, 2) for r in range(2)]
    assert torch.equal(locals_[1], full[:, 3:])
    assert torch.equal(shard.unshard(locals_), full)


def test_shard_is_a_copy_not_a_view():
    shard = TPShard.even(0, 4)
    full = _rows(4)
    local = shard.shard(full, 0, 1)
    local.add_(1)
    assert torch.equal(full, _rows(4))


def test_fused_shard_takes_each_segment_slice():
    # gate/up style: two segments of 4 units of 2 rows, TP=2 -> each rank: 2 units of each.
    shard = TPShard(0, (Segment(4, 2), Segment(4, 2)))
    full = _rows(16)
    locals_ = [shard.shard(full, r, 2) for r in range(2)]
    assert torch.equal(locals_[0], torch.cat([full[0:4], full[8:12]]))
    assert torch.equal(locals_[1], torch.cat([full[4:8], full[12:16]]))
    assert torch.equal(shard.unshard(locals_), full)
    assert not shard.has_replicas(2)


@pytest.mark.parametrize("tp,expected_kv_unit", [(2, [0, 0]), (4, [0, 0, 0, 0])])
def test_replicated_segment_shard_and_unshard(tp, expected_kv_unit):
    # QKV with 4 query heads and 1 KV head of 8 rows: K and V are replicated on every rank.
    q, k, v = Segment(4, 8), Segment(1, 8), Segment(1, 8)
    shard = TPShard(0, (q, k, v))
    full = _rows(48)
    assert shard.local_size(tp) == 32 // tp + 16
    assert shard.has_replicas(tp)
    locals_ = [shard.shard(full, r, tp) for r in range(tp)]
    per_q = 32 // tp
    for r, local in enumerate(locals_):
        assert torch.equal(local[:per_q], full[r * per_q:(r + 1) * per_q])
        assert torch.equal(local[per_q:per_q + 8], full[32:40])
        assert torch.equal(local[per_q + 8:], full[40:48])
    assert torch.equal(shard.unshard(locals_), full)


def test_replicated_segment_with_two_units_over_four_ranks():
    # 2 KV heads over TP=4: ranks 0,1 hold head 0; ranks 2,3 hold head 1.
    shard = TPShard(0, (Segment(4, 2), Segment(2, 2), Segment(2, 2)))
    full = _rows(16)
    locals_ = [shard.shard(full, r, 4) for r in range(4)]
    k_rows = {0: full[8:10], 1: full[8:10], 2: full[10:12], 3: full[10:12]}
    v_rows = {0: full[12:14], 1: full[12:14], 2: full[14:16], 3: full[14:16]}
    for r, local in enumerate(locals_):
        assert torch.equal(local, torch.cat([full[2 * r:2 * r + 2], k_rows[r], v_rows[r]]))
    assert torch.equal(shard.unshard(locals_), full)
    # unshard reads a replicated unit from its first holder
    poisoned = [t.clone() for t in locals_]
    poisoned[1][2:] = -1
    poisoned[3][2:] = -1
    assert torch.equal(shard.unshard(poisoned), full)


def test_replicated_shard_along_dim_1():
    shard = TPShard(1, (Segment(2, 3), Segment(1, 3)))
    full = _rows(2, 9)
    locals_ = [shard.shard(full, r, 2) for r in range(2)]
    assert torch.equal(locals_[1], torch.cat([full[:, 3:6], full[:, 6:9]], dim=1))
    assert torch.equal(shard.unshard(locals_), full)


@pytest.mark.parametrize("segments,tp", [((Segment(3, 2),), 2), ((Segment(4, 1), Segment(3, 1)), 4),
                                         ((Segment(8, 1), Segment(3, 1)), 4)])
def test_validate_rejects_uneven_segments(segments, tp):
    with pytest.raises(ValueError, match="qkv"):
        TPShard(0, segments).validate(tp, "qkv")


def test_validate_accepts_even_and_replicated_segments():
    TPShard(0, (Segment(4, 8), Segment(1, 8), Segment(1, 8))).validate(4, "qkv")
    TPShard(0, (Segment(8, 8), Segment(2, 8), Segment(2, 8))).validate(4, "qkv")

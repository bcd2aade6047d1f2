"""Pipeline schedule tables and layer placement, without processes.

Every table (1F1B, interleaved, zero-bubble, forward-only) for several
(pp, vpp, M) is run through the event simulator, which rejects a forward
without input, a backward before its forward, a W before its B, a send without
its receive or with the ranks disagreeing on message order, and deadlocks.
On top: each micro-batch's F, B (and W) appear exactly once per chunk and in
that order, the in-flight micro-batches stay within each schedule's bound,
and the bubble of 1F1B / interleaved equals the theory.

    python -m pytest tests/unit/test_pipeline_schedules.py -q
"""
from __future__ import annotations

import itertools

import pytest

from core.pipeline_parallel.layout import LayoutError, chunk_specs, stage_layers, virtual_size
from core.pipeline_parallel.schedules import (
    B, F, W, Action, ScheduleError, build_table, forward_only, get_forward_backward_func,
    forward_backward_no_pipelining, interleaved_one_f_one_b, one_f_one_b, zero_bubble,
)
from core.pipeline_parallel.simulate import simulate

SIZES = [(2, 1), (2, 2), (2, 4), (3, 5), (4, 4), (4, 8), (4, 3), (8, 16)]
INTERLEAVED = [(2, 2, 2), (2, 2, 4), (2, 3, 6), (4, 2, 4), (4, 2, 8), (4, 3, 12), (3, 2, 6)]


def _compute_order(actions, kinds=(F, B, W)):
    return [a for a in actions if a.kind in kinds]


def _assert_complete_and_ordered(table, num_microbatches: int, vpp: int, split: bool) -> None:
    for rank, actions in enumerate(table):
        for m, c in itertools.product(range(num_microbatches), range(vpp)):
            positions = {kind: [i for i, a in enumerate(actions) if a == Action(kind, m, c)] for kind in (F, B, W)}
            assert len(positions[F]) == 1 and len(positions[B]) == 1, (rank, m, c)
            assert positions[F][0] < positions[B][0]
            if split:
                assert len(positions[W]) == 1 and positions[B][0] < positions[W][0]
            else:
                assert not positions[W]


@pytest.mark.parametrize("pp,m", SIZES)
def test_one_f_one_b(pp: int, m: int) -> None:
    table = one_f_one_b(pp, m)
    _assert_complete_and_ordered(table, m, 1, split=False)
    for rendezvous in (False, True):  # deadlock-free even when sends wait for their receivers
        timeline = simulate(table, {F: 1, B: 2}, rendezvous=rendezvous)
    for rank, actions in enumerate(table):
        warmup = min(pp - rank - 1, m)
        first = min(warmup + 1, m)
        assert [a.kind for a in _compute_order(actions)][:first] == [F] * first
        assert timeline.peak_in_flight[rank] <= min(pp - rank, m)
    bubble = (pp - 1) / (m + pp - 1)
    assert max(timeline.idle_fraction) == pytest.approx(bubble)


@pytest.mark.parametrize("pp,vpp,m", INTERLEAVED)
def test_interleaved(pp: int, vpp: int, m: int) -> None:
    table = interleaved_one_f_one_b(pp, vpp, m)
    _assert_complete_and_ordered(table, m, vpp, split=False)
    timeline = simulate(table, {F: 1 / vpp, B: 2 / vpp})
    for rank in range(pp):
        bound = m * vpp if m == pp else min((pp - rank - 1) * 2 + (vpp - 1) * pp + 1, m * vpp)
        assert timeline.peak_in_flight[rank] <= bound
    assert max(timeline.idle_fraction) == pytest.approx((pp - 1) / (vpp * m + pp - 1))


@pytest.mark.parametrize("pp,m", SIZES)
def test_zero_bubble(pp: int, m: int) -> None:
    table = zero_bubble(pp, m)
    _assert_complete_and_ordered(table, m, 1, split=True)
    timeline = simulate(table, {F: 1, B: 1, W: 1})
    assert all(peak <= min(pp, m) for peak in timeline.peak_in_flight)
    reference = simulate(one_f_one_b(pp, m), {F: 1, B: 2})
    assert timeline.makespan <= reference.makespan
    if m >= pp:  # ZB-H1: the bubble shrinks from (pp-1)(F+B+W) to (pp-1)(F+B-W)
        assert timeline.makespan == pytest.approx(3 * m + pp - 1)


@pytest.mark.parametrize("pp,vpp,m", [(2, 1, 4), (4, 1, 3), (2, 2, 4), (4, 2, 8)])
def test_forward_only(pp: int, vpp: int, m: int) -> None:
    table = forward_only(pp, m, vpp)
    simulate(table)
    for actions in table:
        assert sorted((a.microbatch, a.chunk) for a in actions if a.kind == F) == \
            sorted(itertools.product(range(m), range(vpp)))
        assert not [a for a in actions if a.kind in (B, W)]


def test_bad_tables_are_rejected() -> None:
    no_input = [[Action(F, 0), Action("SEND_F", 0), Action("RECV_B", 0), Action(B, 0)],
                [Action(F, 0), Action("RECV_F", 0), Action(B, 0), Action("SEND_B", 0)]]
    with pytest.raises(ScheduleError, match="no input"):
        simulate(no_input)
    backward_first = [[Action(B, 0), Action(F, 0)]]
    with pytest.raises(ScheduleError, match="before its forward"):
        simulate(backward_first)
    crossed = [[Action(F, 0), Action("SEND_F", 0), Action(F, 1), Action("SEND_F", 1), Action(B, 0), Action(B, 1)],
               [Action("RECV_F", 1), Action("RECV_F", 0), Action(F, 0), Action(F, 1), Action(B, 0), Action(B, 1)]]
    with pytest.raises(ScheduleError, match="same order"):
        simulate(crossed)
    # both ranks receive before they send: a cycle
    cycle = [[Action("RECV_B", 0), Action(F, 0), Action("SEND_F", 0), Action(B, 0)],
             [Action("RECV_F", 0), Action(F, 0), Action(B, 0), Action("SEND_B", 0)]]
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(cycle)


def test_interleaving_needs_a_multiple_of_pp() -> None:
    with pytest.raises(ScheduleError, match="multiple of --pipeline-model-parallel-size"):
        interleaved_one_f_one_b(4, 2, 6)
    with pytest.raises(ScheduleError, match="zero-bubble"):
        build_table(2, 4, vpp=2, method="zero-bubble")
    assert get_forward_backward_func(1) is forward_backward_no_pipelining
    with pytest.raises(ScheduleError):
        get_forward_backward_func(1, 2)


def test_layer_placement() -> None:
    assert stage_layers(8, 2) == [[[0, 1, 2, 3]], [[4, 5, 6, 7]]]
    assert stage_layers(16, 4, num_layer_list=[3, 5, 5, 3])[1] == [[3, 4, 5, 6, 7]]
    assert stage_layers(8, 2, vpp=2) == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    assert stage_layers(8, 4, vpp=2)[3] == [[3], [7]]
    assert virtual_size(8, 2, 2) == 2 and virtual_size(8, 2, None) is None
    specs = chunk_specs(stage_layers(8, 2, vpp=2), 1)
    assert [(s.pre_process, s.post_process) for s in specs] == [(False, False), (False, True)]
    assert [(s.pre_process, s.post_process) for s in chunk_specs(stage_layers(8, 2, vpp=2), 0)] == \
        [(True, False), (False, False)]
    with pytest.raises(LayoutError, match="not divisible"):
        stage_layers(6, 4)
    with pytest.raises(LayoutError, match="entries"):
        stage_layers(6, 4, num_layer_list=[3, 3])
    with pytest.raises(LayoutError, match="sums to"):
        stage_layers(6, 2, num_layer_list=[3, 4])
    with pytest.raises(LayoutError, match="virtual"):
        stage_layers(8, 2, vpp=2, num_layer_list=[4, 4])
    with pytest.raises(LayoutError, match="must divide"):
        virtual_size(8, 2, 3)


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8)])
def test_split_backward_completes_gradients_at_last_b_and_last_w(pp, m):
    """Outside no_sync run each chunk's last B (the non-deferred gradients) and, when split, its last W."""
    from core.pipeline_parallel.schedules import _last_gradient_steps

    for rank, actions in enumerate(zero_bubble(pp, m)):
        final = sorted(_last_gradient_steps(actions, split=True))
        kinds = [actions[i] for i in final]
        assert kinds == [Action(B, m - 1), Action(W, m - 1)], (rank, kinds)
        assert not any(a.kind == B for a in actions[final[0] + 1:])
    for actions in one_f_one_b(pp, m):
        assert [actions[i] for i in _last_gradient_steps(actions, split=False)] == [Action(B, m - 1)]

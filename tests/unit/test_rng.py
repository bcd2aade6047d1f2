"""RNG tracker isolation and the save/restore of every RNG state (python, numpy, torch, tracker)."""
from __future__ import annotations

import io
import random

import numpy as np
import pytest
import torch

from core.tensor_parallel.random import (
    MODEL_PARALLEL_RNG,
    RNGStatesTracker,
    get_all_rng_states,
    get_rng_tracker,
    model_parallel_seed,
    set_all_rng_states,
)


@pytest.fixture(autouse=True)
def _keep_global_rng():
    """Tests reseed the process-wide generators and tracker; put them back afterwards."""
    py, npy, pt = random.getstate(), np.random.get_state(), torch.get_rng_state()
    tracker = get_rng_tracker().get_states()
    yield
    random.setstate(py)
    np.random.set_state(npy)
    torch.set_rng_state(pt)
    get_rng_tracker().set_states(tracker)


def _draws(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g)


def test_fork_draws_from_the_named_stream_and_restores_the_outer_one():
    tracker = RNGStatesTracker()
    torch.manual_seed(0)
    tracker.add("a", 123)  # adding must not disturb the default generator
    outer_1 = torch.rand(3)
    with tracker.fork("a"):
        inner_1 = torch.rand(4)
    outer_2 = torch.rand(3)
    with tracker.fork("a"):
        inner_2 = torch.rand(4)  # continues the tracked stream, does not restart it
    outer_3 = torch.rand(3)

    assert torch.equal(torch.cat([outer_1, outer_2, outer_3]), _draws(0, 9))
    assert torch.equal(torch.cat([inner_1, inner_2]), _draws(123, 8))


def test_named_states_are_isolated_from_each_other():
    tracker = RNGStatesTracker()
    tracker.add("a", 1)
    tracker.add("b", 2)
    with tracker.fork("a"):
        a1 = torch.rand(2)
    with tracker.fork("b"):
        b1 = torch.rand(2)
        with tracker.fork("a"):
            a2 = torch.rand(2)
        b2 = torch.rand(2)
    assert torch.equal(torch.cat([a1, a2]), _draws(1, 4))
    assert torch.equal(torch.cat([b1, b2]), _draws(2, 4))


def test_fork_restores_outer_state_when_the_body_raises():
    tracker = RNGStatesTracker()
    tracker.add("a", 7)
    torch.manual_seed(5)
    with pytest.raises(RuntimeError, match="boom"):
        with tracker.fork("a"):
            torch.rand(10)
            raise RuntimeError("boom")
    assert torch.equal(torch.rand(3), _draws(5, 3))
    with tracker.fork("a"):  # the state advanced by the failed body is kept
        assert torch.equal(torch.rand(2), _draws(7, 12)[10:])


def test_tracker_errors():
    tracker = RNGStatesTracker()
    tracker.add("a", 1)
    with pytest.raises(ValueError, match="already exists"):
        tracker.add("a", 2)
    with pytest.raises(KeyError):
        with tracker.fork("missing"):
            pass
    tracker.reset()
    with pytest.raises(KeyError):
        with tracker.fork("a"):
            pass


def test_tracker_get_set_states_round_trip_and_copy():
    tracker = RNGStatesTracker()
    tracker.add("a", 11)
    saved = tracker.get_states()
    with tracker.fork("a"):
        first = torch.rand(5)
    tracker.set_states(saved)
    with tracker.fork("a"):
        again = torch.rand(5)
    assert torch.equal(first, again)
    # get_states returns copies: advancing the tracker does not change what was saved
    assert torch.equal(saved["a"], _state_of_seed(11))


def _state_of_seed(seed):
    saved = torch.get_rng_state()
    torch.manual_seed(seed)
    state = torch.get_rng_state()
    torch.set_rng_state(saved)
    return state


def test_model_parallel_seed_tp_and_pp_ranks():
    def draws(tp_rank, pp_rank):
        model_parallel_seed(1234, tp_rank, pp_rank)
        default = torch.rand(4)
        with get_rng_tracker().fork(MODEL_PARALLEL_RNG):
            forked = torch.rand(4)
        return default, forked, random.random(), np.random.rand()

    d00, f00, py00, np00 = draws(0, 0)
    d10, f10, py10, np10 = draws(1, 0)
    d01, f01, py01, np01 = draws(0, 1)
    again = draws(0, 0)
    # same TP group and stage: replicated activations see the same default stream
    assert torch.equal(d00, d10) and py00 == py10 and np00 == np10
    # different TP ranks: tensor-parallel regions draw different numbers
    assert not torch.equal(f00, f10)
    # a different pipeline stage gets different streams everywhere
    assert not torch.equal(d00, d01) and not torch.equal(f00, f01) and py00 != py01
    # deterministic
    assert torch.equal(again[0], d00) and torch.equal(again[1], f00) and again[2] == py00 and again[3] == np00
    # model_parallel_seed resets the tracker (a second call does not raise "already exists")
    assert list(get_rng_tracker().states) == [MODEL_PARALLEL_RNG]


def _draw_everything():
    with get_rng_tracker().fork(MODEL_PARALLEL_RNG):
        forked = torch.randn(5)
    return (random.random(), random.getrandbits(64), np.random.rand(3), np.random.standard_normal(),
            torch.rand(4), torch.randint(0, 1000, (6,)), forked)


def _assert_same_draws(a, b):
    assert a[0] == b[0] and a[1] == b[1]
    np.testing.assert_array_equal(a[2], b[2])
    assert a[3] == b[3]
    for x, y in zip(a[4:], b[4:]):
        assert torch.equal(x, y)


def _advance_everything():
    model_parallel_seed(99, 0, 0)
    random.random()
    np.random.standard_normal()  # odd number of gaussian draws: numpy caches the second one
    torch.rand(7)
    with get_rng_tracker().fork():
        torch.rand(3)


def test_get_set_all_rng_states_round_trip():
    _advance_everything()
    states = get_all_rng_states()
    first = _draw_everything()
    second = _draw_everything()
    set_all_rng_states(states)
    _assert_same_draws(_draw_everything(), first)
    _assert_same_draws(_draw_everything(), second)


def test_rng_states_survive_a_weights_only_checkpoint():
    _advance_everything()
    states = get_all_rng_states()
    buffer = io.BytesIO()
    torch.save(states, buffer)
    expected = _draw_everything()
    _draw_everything()
    buffer.seek(0)
    set_all_rng_states(torch.load(buffer, weights_only=True))
    _assert_same_draws(_draw_everything(), expected)


def test_saved_states_are_not_aliased_by_later_draws():
    _advance_everything()
    states = get_all_rng_states()
    expected = _draw_everything()
    # draw a lot more, including inside the tracker, then restore: the saved dict must be unchanged
    for _ in range(3):
        _draw_everything()
    set_all_rng_states(states)
    _assert_same_draws(_draw_everything(), expected)
    set_all_rng_states(states)  # restoring twice from the same dict gives the same stream again
    _assert_same_draws(_draw_everything(), expected)

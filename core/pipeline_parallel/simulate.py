"""An event simulator for schedule tables: checks them and times them.

``simulate(table, costs)`` runs every rank's actions in order with the given
unit costs (``F``, ``B``, ``W``; communication ``comm_cost``) and the
executor's semantics for communication: a batch of consecutive communication
actions is posted at once; the rank then waits until the matching sends of its
receives have been posted, while its own sends complete in the background
(``rendezvous=True``: until their receives are posted too, the most
pessimistic semantics). It raises :class:`ScheduleError` when a table is
invalid:

* a forward without its input, a backward before its forward or without its
  gradient, a weight-gradient step before its backward;
* a send without its receive, or two ranks that disagree on the order of their
  messages (transfers between two ranks are matched in posting order);
* a deadlock (no rank can make progress), naming the stuck actions.

The result gives per rank the busy time, the idle fraction of the makespan and
the peak number of micro-batches in flight (forward done, backward not yet
finished; with a split backward, until its W).

    timeline = simulate(one_f_one_b(4, 8), {"F": 1, "B": 2})
    timeline.idle_fraction  # [0.27, 0.27, 0.27, 0.27]
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from core.pipeline_parallel.schedules import (
    B, F, RECV_B, RECV_F, SEND_B, SEND_F, W, Action, ScheduleError, Table, is_first_stage, is_last_stage,
    split_into_steps, virtual_stage,
)

Key = Tuple[int, int]  # (microbatch, chunk)


@dataclass
class Timeline:
    makespan: float
    busy: List[float]
    peak_in_flight: List[int]
    intervals: List[List[Tuple[float, float, Action]]] = field(default_factory=list)

    @property
    def idle_fraction(self) -> List[float]:
        return [1.0 - b / self.makespan if self.makespan else 0.0 for b in self.busy]


def _route(action: Action, rank: int, pp: int) -> Tuple[int, int, tuple]:
    """(source rank, destination rank, message identity) of a communication action."""
    m, stage = action.microbatch, virtual_stage(rank, action.chunk, pp)
    if action.kind == SEND_F:
        return rank, (rank + 1) % pp, ("F", m, stage)
    if action.kind == RECV_F:
        return (rank - 1) % pp, rank, ("F", m, stage - 1)
    if action.kind == SEND_B:
        return rank, (rank - 1) % pp, ("B", m, stage)
    return (rank + 1) % pp, rank, ("B", m, stage + 1)


def _number_messages(table: Table) -> Dict[Tuple[int, int], Tuple[tuple, int]]:
    """Each communication action's (pair, side) and its index in that pair's order; checks both orders agree."""
    pp = len(table)
    sends: Dict[Tuple[int, int], List[tuple]] = defaultdict(list)
    recvs: Dict[Tuple[int, int], List[tuple]] = defaultdict(list)
    index: Dict[Tuple[int, int], Tuple[tuple, int]] = {}
    for rank, actions in enumerate(table):
        for position, action in enumerate(actions):
            if action.kind not in (SEND_F, RECV_F, SEND_B, RECV_B):
                continue
            src, dst, ident = _route(action, rank, pp)
            side = sends if action.kind in (SEND_F, SEND_B) else recvs
            index[(rank, position)] = ((src, dst, side is sends), len(side[(src, dst)]))
            side[(src, dst)].append(ident)
    for pair in set(sends) | set(recvs):
        if sends[pair] != recvs[pair]:
            raise ScheduleError(f"rank {pair[0]} sends {sends[pair]} to rank {pair[1]}, which receives "
                                f"{recvs[pair]}: every send needs its receive, in the same order")
    return index


@dataclass
class _RankState:
    received_f: Set[Key] = field(default_factory=set)
    received_b: Set[Key] = field(default_factory=set)
    done: Dict[str, Set[Key]] = field(default_factory=lambda: {F: set(), B: set(), W: set()})
    in_flight: int = 0
    peak: int = 0
    busy: float = 0.0


def _check_compute(action: Action, rank: int, pp: int, vpp: int, state: _RankState) -> None:
    key = (action.microbatch, action.chunk)
    problem = None
    if key in state.done[action.kind]:
        problem = "runs twice"
    elif action.kind == F and not is_first_stage(rank, action.chunk) and key not in state.received_f:
        problem = "has no input (no RECV_F before it)"
    elif action.kind == B and key not in state.done[F]:
        problem = "comes before its forward"
    elif action.kind == B and not is_last_stage(rank, action.chunk, pp, vpp) and key not in state.received_b:
        problem = "has no output gradient (no RECV_B before it)"
    elif action.kind == W and key not in state.done[B]:
        problem = "comes before its B"
    if problem:
        raise ScheduleError(f"rank {rank}: {action!r} {problem}")


def _check_send(action: Action, rank: int, state: _RankState) -> None:
    needed = F if action.kind == SEND_F else B
    if (action.microbatch, action.chunk) not in state.done[needed]:
        raise ScheduleError(f"rank {rank}: {action!r} before its {needed}")


def _step_starts(steps: list) -> List[int]:
    """The table position of each step's first action (a communication step is a list of actions)."""
    position, starts = 0, []
    for step in steps:
        starts.append(position)
        position += len(step) if isinstance(step, list) else 1
    return starts


def _exchange(step: List[Action], ids: list, rank: int, state: "_RankState", posted: Dict[Tuple[tuple, int], float],
              clock: float, comm_cost: float, rendezvous: bool) -> Optional[float]:
    """Post a batch of sends and receives at ``clock``; the rank's clock once the waited ones complete, or None
    while a partner has not posted its side (the rank waits)."""
    for action, ident in zip(step, ids):
        if action.kind in (SEND_F, SEND_B):
            _check_send(action, rank, state)
        posted.setdefault(ident, clock)
    waited = [i for a, i in zip(step, ids) if rendezvous or a.kind in (RECV_F, RECV_B)]
    partners = [((pair[0], pair[1], not pair[2]), n) for pair, n in waited]
    if any(p not in posted for p in partners):
        return None
    finish = max([max(posted[i], posted[p]) + comm_cost for i, p in zip(waited, partners)], default=clock)
    for action in step:
        key = (action.microbatch, action.chunk)
        if action.kind == RECV_F:
            state.received_f.add(key)
        elif action.kind == RECV_B:
            state.received_b.add(key)
    return max(clock, finish)


def simulate(table: Table, costs: Optional[Dict[str, float]] = None, comm_cost: float = 0.0,
             vpp: Optional[int] = None, rendezvous: bool = False) -> Timeline:
    """Run the table; raise ScheduleError when it is invalid or deadlocks.

    ``rendezvous=False`` models the executor: a batch's sends are posted and not
    waited for (their requests complete by the end of the step), its receives
    are waited for. ``rendezvous=True`` also waits for the sends' receivers.
    """
    costs = {F: 1.0, B: 2.0, W: 1.0, **(costs or {})}
    pp = len(table)
    vpp = vpp or 1 + max((a.chunk for actions in table for a in actions), default=0)
    index = _number_messages(table)
    split = any(a.kind == W for actions in table for a in actions)
    steps = [split_into_steps(actions) for actions in table]
    positions = [_step_starts(actions_steps) for actions_steps in steps]
    states = [_RankState() for _ in range(pp)]
    clocks, pointers = [0.0] * pp, [0] * pp
    posted: Dict[Tuple[tuple, int], float] = {}
    intervals: List[List[Tuple[float, float, Action]]] = [[] for _ in range(pp)]
    progress = True
    while progress:
        progress = False
        for rank in range(pp):
            while pointers[rank] < len(steps[rank]):
                step = steps[rank][pointers[rank]]
                state = states[rank]
                if not isinstance(step, list):
                    _check_compute(step, rank, pp, vpp, state)
                    start, clocks[rank] = clocks[rank], clocks[rank] + costs[step.kind]
                    intervals[rank].append((start, clocks[rank], step))
                    state.busy += costs[step.kind]
                    _account(step, state, split)
                else:
                    first = positions[rank][pointers[rank]]
                    ids = [index[(rank, first + i)] for i in range(len(step))]
                    finish = _exchange(step, ids, rank, state, posted, clocks[rank], comm_cost, rendezvous)
                    if finish is None:  # a partner has not posted its side yet
                        break
                    clocks[rank] = finish
                pointers[rank] += 1
                progress = True
    stuck = {r: steps[r][pointers[r]] for r in range(pp) if pointers[r] < len(steps[r])}
    if stuck:
        raise ScheduleError(f"deadlock: ranks wait at {stuck}")
    _check_complete(table, states, split)
    return Timeline(max(clocks), [s.busy for s in states], [s.peak for s in states], intervals)


def _account(action: Action, state: _RankState, split: bool) -> None:
    state.done[action.kind].add((action.microbatch, action.chunk))
    if action.kind == F:
        state.in_flight += 1
    elif action.kind == (W if split else B):
        state.in_flight -= 1
    state.peak = max(state.peak, state.in_flight)


def _check_complete(table: Table, states: Sequence[_RankState], split: bool) -> None:
    """Every forward is matched by its backward (and W) on every rank, unless the table is forward-only."""
    for rank, state in enumerate(states):
        forwards = state.done[F]
        if not state.done[B] and not state.done[W]:
            continue  # forward-only
        missing = forwards - state.done[B] or (forwards - state.done[W] if split else set())
        if missing:
            raise ScheduleError(f"rank {rank}: micro-batches {sorted(missing)} have no complete backward")

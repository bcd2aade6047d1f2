"""Process groups of every parallel dimension, built once and held in one object.

Ranks are laid out as Megatron-LM lays them, in the order ``tp-cp-ep-dp-pp``:
tensor parallel varies fastest, pipeline slowest. With 16 ranks, tp=2, pp=4:
TP groups [0,1], [2,3], ...; DP groups [0,2], [1,3], [4,6], ...; PP groups
[0,4,8,12], [1,5,9,13], ... The expert dimension (EP) is carved out of the data
parallel ranks, as in Megatron: dense parameters are replicated over the whole
of ``ep x dp`` while expert parameters are replicated over ``dp`` only.

``initialize(...)`` builds a :class:`ParallelState`; layers receive the
:class:`Group` objects they need from it. Without ``torch.distributed`` (one
process) every group has size 1 and collectives are skipped.
"""
from __future__ import annotations

import itertools
from datetime import timedelta
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch.distributed as dist

ORDER = ("tp", "cp", "ep", "dp", "pp")


@dataclass
class Group:
    """One process group as seen from this rank: its member ranks and handle."""

    ranks: List[int]
    handle: Optional[dist.ProcessGroup] = None
    rank: int = 0  # this process's index within the group

    @property
    def size(self) -> int:
        return len(self.ranks)

    def rank_of(self, global_rank: int) -> int:
        return self.ranks.index(global_rank)


def group_ranks(sizes: Dict[str, int], varying: Sequence[str]) -> List[List[int]]:
    """All groups whose members differ only along the ``varying`` dimensions.

    ``sizes`` maps each dimension of ``ORDER`` to its degree. The first dimension
    in ``ORDER`` has stride 1. Groups come out ordered by the fixed coordinates.
    """
    strides, stride = {}, 1
    for dim in ORDER:
        strides[dim] = stride
        stride *= sizes[dim]
    fixed = [d for d in ORDER if d not in varying]
    moving = [d for d in ORDER if d in varying]
    groups = []
    for fixed_idx in itertools.product(*[range(sizes[d]) for d in reversed(fixed)]):
        base = sum(i * strides[d] for i, d in zip(fixed_idx, reversed(fixed)))
        members = []
        for moving_idx in itertools.product(*[range(sizes[d]) for d in reversed(moving)]):
            members.append(base + sum(i * strides[d] for i, d in zip(moving_idx, reversed(moving))))
        groups.append(sorted(members))
    return sorted(groups)


@dataclass
class ParallelState:
    """The degrees of every dimension and this rank's groups."""

    world_size: int
    rank: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: Optional[int] = None
    groups: Dict[str, Group] = field(default_factory=dict)
    expert_tp: Optional[int] = None  # --expert-tensor-parallel-size (None: tp)

    @property
    def dp(self) -> int:
        """Data-parallel degree of dense parameters (expert ranks included)."""
        return self.world_size // (self.tp * self.pp * self.cp)

    def group(self, name: str) -> Group:
        return self.groups[name]

    @property
    def tp_group(self) -> Group:
        return self.groups["tp"]

    @property
    def dp_group(self) -> Group:
        return self.groups["dp"]

    @property
    def pp_group(self) -> Group:
        return self.groups["pp"]

    @property
    def ep_group(self) -> Group:
        return self.groups["ep"]

    @property
    def experts_split_over_tp(self) -> bool:
        """Whether each expert is split over TP (--expert-tensor-parallel-size = TP, the default), rather than
        whole experts spread over the TP ranks too (--expert-tensor-parallel-size 1)."""
        return self.expert_tp is None or self.expert_tp == self.tp or self.tp == 1

    @property
    def expert_group(self) -> Group:
        """The ranks that split one MoE layer's experts between them (Megatron's expert-parallel group): the EP
        group, or with --expert-tensor-parallel-size 1 the TP x EP ranks (EP = --expert-model-parallel-size)."""
        return self.groups["ep"] if self.experts_split_over_tp else self.groups["tp_ep"]

    @property
    def tp_rank(self) -> int:
        return self.tp_group.rank

    @property
    def dp_rank(self) -> int:
        return self.dp_group.rank

    @property
    def pp_rank(self) -> int:
        return self.pp_group.rank

    @property
    def cp_rank(self) -> int:
        return self.groups["cp"].rank

    @property
    def is_first_stage(self) -> bool:
        return self.pp_rank == 0

    @property
    def is_last_stage(self) -> bool:
        return self.pp_rank == self.pp - 1


# Groups built for every layout: name -> the dimensions its members vary over.
GROUP_DIMS: Dict[str, tuple] = {
    "tp": ("tp",),
    "cp": ("cp",),
    "ep": ("ep",),
    "pp": ("pp",),
    "dp": ("ep", "dp"),             # dense-parameter data parallel
    "dp_cp": ("cp", "ep", "dp"),    # gradient reduction with context parallel
    "expert_dp": ("dp",),           # expert-parameter data parallel
    "mp": ("tp", "pp"),             # model parallel: grad norm, inf checks
    "tp_cp": ("tp", "cp"),
    "tp_ep": ("tp", "ep"),
    "expert_dp_cp": ("cp", "dp"),   # expert-gradient reduction with context parallel
}


def validate_degrees(world_size: int, tp: int, pp: int, cp: int = 1, ep: int = 1) -> None:
    """Reject degrees that do not tile the world; messages name the flags."""
    if world_size % (tp * pp * cp) != 0:
        raise ValueError(
            f"world size {world_size} is not divisible by --tensor-model-parallel-size ({tp}) x "
            f"--pipeline-model-parallel-size ({pp}) x --context-parallel-size ({cp}); "
            "change the parallel sizes or the number of processes (torchrun --nproc-per-node)")
    dp = world_size // (tp * pp * cp)
    if dp % ep != 0:
        raise ValueError(
            f"data-parallel size {dp} is not divisible by --expert-model-parallel-size ({ep})")


class _GroupFactory:
    """Creates each distinct rank set once; singleton sets need no handle."""

    def __init__(self, backend: Optional[str], enabled: bool, timeout: Optional[timedelta] = None) -> None:
        self.backend, self.enabled, self.timeout = backend, enabled, timeout
        self.cache: Dict[tuple, Optional[dist.ProcessGroup]] = {}

    def __call__(self, ranks: List[int]) -> Optional[dist.ProcessGroup]:
        key = tuple(ranks)
        if key not in self.cache:
            wanted = self.enabled and len(ranks) > 1
            self.cache[key] = (dist.new_group(list(ranks), backend=self.backend, timeout=self.timeout)
                               if wanted else None)
        return self.cache[key]


def initialize(tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1, vpp: Optional[int] = None,
               backend: Optional[str] = None, expert_tp: Optional[int] = None, ulysses: int = 1,
               timeout: Optional[timedelta] = None) -> ParallelState:
    """Build every group of the layout. Collective: all ranks call it with the same degrees.

    ``ep`` is the expert dimension carved out of data parallelism; with ``expert_tp`` 1 (and TP > 1) the
    experts spread over TP x ``ep`` ranks (``--expert-model-parallel-size`` = TP x ``ep``). ``ulysses``
    splits each CP group into Ulysses groups of that many neighbouring CP ranks (``cp_ulysses``) and ring
    groups across them (``cp_ring``): ``--ulysses-degree-in-cp``. ``timeout`` bounds every collective of
    the groups (``--distributed-timeout-minutes``; None: PyTorch's default)."""
    distributed = dist.is_available() and dist.is_initialized()
    world_size = dist.get_world_size() if distributed else 1
    rank = dist.get_rank() if distributed else 0
    validate_degrees(world_size, tp, pp, cp, ep)
    dp_rest = world_size // (tp * pp * cp * ep)
    sizes = {"tp": tp, "cp": cp, "ep": ep, "dp": dp_rest, "pp": pp}
    state = ParallelState(world_size=world_size, rank=rank, tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp, expert_tp=expert_tp)
    new_group = _GroupFactory(backend, distributed and world_size > 1, timeout)
    layouts = {name: group_ranks(sizes, dims) for name, dims in GROUP_DIMS.items()}
    layouts["embedding"] = _embedding_group_ranks(sizes)
    layouts["cp_ulysses"], layouts["cp_ring"] = _context_parallel_subgroup_ranks(layouts["cp"], ulysses)
    for name, all_ranks in layouts.items():
        for ranks in all_ranks:
            # Every rank creates every group, in the same order (new_group is collective).
            handle = new_group(ranks)
            if rank in ranks:
                state.groups[name] = Group(ranks, handle, ranks.index(rank))
    return state


def _embedding_group_ranks(sizes: Dict[str, int]) -> List[List[int]]:
    """First and last stage of each pipeline: they hold the (tied) word embeddings."""
    result = []
    for pp_ranks in group_ranks(sizes, ("pp",)):
        result.append(sorted({pp_ranks[0], pp_ranks[-1]}))
    return result


def _context_parallel_subgroup_ranks(cp_groups: List[List[int]], ulysses: int) -> Tuple[List[List[int]], ...]:
    """Each CP group cut into Ulysses groups (``ulysses`` neighbouring CP ranks) and ring groups (the
    ranks at the same place of every Ulysses group): CP rank ``c`` is ring rank ``c // ulysses`` and
    Ulysses rank ``c % ulysses``."""
    if not cp_groups or len(cp_groups[0]) % ulysses != 0:
        raise ValueError(f"--ulysses-degree-in-cp ({ulysses}) must divide --context-parallel-size "
                         f"({len(cp_groups[0]) if cp_groups else 1})")
    ulysses_groups = [ranks[i:i + ulysses] for ranks in cp_groups for i in range(0, len(ranks), ulysses)]
    ring_groups = [ranks[i::ulysses] for ranks in cp_groups for i in range(ulysses)]
    return ulysses_groups, ring_groups


def single_process_state() -> ParallelState:
    """A layout of one process: every group is this rank alone."""
    return initialize()


def expert_dimension(tp: int, ep: int, expert_tp: Optional[int]) -> int:
    """The ``ep`` degree of :func:`initialize` for --expert-model-parallel-size ``ep``: ``ep`` itself, or
    ``ep / tp`` when whole experts spread over the TP ranks (--expert-tensor-parallel-size 1)."""
    if expert_tp == 1 and tp > 1:
        if ep % tp != 0:
            raise ValueError(f"--expert-tensor-parallel-size 1 needs --expert-model-parallel-size ({ep}) to be a "
                             f"multiple of --tensor-model-parallel-size ({tp}); each expert-parallel group spans "
                             "whole TP groups")
        return ep // tp
    return ep

"""Context-parallel communication, as small named functions (the sibling of ``mappings.py``).

Context parallelism (``core/transformer/context_parallel.py``) moves tokens between the CP ranks with these
and nothing else. Each takes the :class:`Group` it communicates over.

- :class:`RingExchange`: send tensors to the next rank of the ring and receive the previous rank's
  (batched isend/irecv), started and waited for separately so that an exchange can overlap compute. Ring
  attention's autograd function calls it in its forward (K/V blocks) and its backward (the blocks again,
  and their gradients travelling with them back to their owners).
- ``sequence_to_heads``: the Ulysses all-to-all, sequence-sharded ``[s, b, n, d]`` -> head-sharded
  ``[U s, b, n / U, d]`` / ``heads_to_sequence`` of the gradient.
- ``heads_to_sequence``: its inverse / ``sequence_to_heads`` of the gradient.

The K/V all-gather of ``kvallgather_cp_algo`` is sequence parallelism's all-gather
(``mappings.gather_from_sequence_parallel_region``), whose backward reduce-scatters.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.distributed as dist

from core.parallel_state import Group


class RingExchange:
    """Send tensors to the next ring rank and receive the previous rank's (batched isend/irecv)."""

    def __init__(self, ring: Group) -> None:
        self.ring = ring
        self.next = ring.ranks[(ring.rank + 1) % ring.size]
        self.previous = ring.ranks[(ring.rank - 1) % ring.size]

    def start(self, tensors: Sequence[torch.Tensor], tag: int) -> Tuple[List[torch.Tensor], list]:
        """Post the exchange of ``tensors`` (message tags ``tag``, ``tag + 1``, ...): the buffers that will hold the
        previous rank's tensors (same shapes and dtypes) and the requests to :meth:`wait` for."""
        tensors = [t.contiguous() for t in tensors]
        received = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]
        ops = [dist.P2POp(dist.isend, t, self.next, self.ring.handle, tag + i) for i, t in enumerate(tensors)]
        ops += [dist.P2POp(dist.irecv, r, self.previous, self.ring.handle, tag + i) for i, r in enumerate(received)]
        return received, dist.batch_isend_irecv(ops)

    @staticmethod
    def wait(requests: list) -> None:
        """Block until the exchange's sends and receives completed."""
        for request in requests:
            request.wait()


def _sequence_to_heads(x: torch.Tensor, group: Group) -> torch.Tensor:
    """[s, b, n, d] (this rank's tokens, all local heads) -> [U s, b, n / U, d] (the group's tokens, one
    U-th of the heads)."""
    s, b, n, d = x.shape
    u = group.size
    send = x.reshape(s, b, u, n // u, d).permute(2, 0, 1, 3, 4).contiguous()  # [U, s, b, n/U, d]
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group.handle)  # [U (source rank), s, b, n/U, d]
    return received.reshape(u * s, b, n // u, d)


def _heads_to_sequence(x: torch.Tensor, group: Group) -> torch.Tensor:
    """The inverse of :func:`_sequence_to_heads`: [U s, b, n / U, d] -> [s, b, n, d]."""
    total, b, m, d = x.shape
    u = group.size
    send = x.reshape(u, total // u, b, m, d).contiguous()  # [U (destination rank), s, b, n/U, d]
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group.handle)  # [U (head part), s, b, n/U, d]
    return received.permute(1, 2, 0, 3, 4).reshape(total // u, b, u * m, d)


class _SequenceToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _sequence_to_heads(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _heads_to_sequence(grad.contiguous(), ctx.group), None


class _HeadsToSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _heads_to_sequence(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _sequence_to_heads(grad.contiguous(), ctx.group), None


def sequence_to_heads(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Ulysses' all-to-all: [s, b, n, d] (this rank's tokens) -> [U s, b, n / U, d] (the group's tokens in rank
    order, this rank's U-th of the heads); the backward is :func:`heads_to_sequence` of the gradient."""
    return _SequenceToHeads.apply(x, group) if group.size > 1 else x


def heads_to_sequence(x: torch.Tensor, group: Group) -> torch.Tensor:
    """The inverse all-to-all: [U s, b, n / U, d] -> [s, b, n, d]; the backward is :func:`sequence_to_heads`."""
    return _HeadsToSequence.apply(x, group) if group.size > 1 else x

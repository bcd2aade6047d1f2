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
- ``send_carry`` / ``recv_carry``: a recurrent mixer's state (its carry, a tuple of tensors whose shapes travel
  in a small header first) sent to the rank holding the next tokens / received from the one holding the tokens
  before; the backward sends the gradient the other way. A 0-dim token threads a rank's exchanges in order
  (``relay_token`` from the mixer's input, ``end_relay`` onto its output), so that autograd runs their backward
  in reverse order (``core/transformer/sequence_state.py``).

- ``fetch_rows``: the rows of other ranks that this rank asks for by index (DeepSeek Sparse Attention's selected
  keys): a variable all-to-all of the requests, then of the rows; the backward returns their gradients to the
  owners (the reverse all-to-all, summed where two requesters asked for one row).

The K/V all-gather of ``kvallgather_cp_algo`` is sequence parallelism's all-gather
(``mappings.gather_from_sequence_parallel_region``), whose backward reduce-scatters.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.distributed as dist

from core.parallel_state import Group
from core.tensor_parallel.expert_mappings import all_to_all_tokens, exchange_token_counts


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


# ------------------------------------------------------------------------------ the recurrent state's relay
RELAY_TAG = 96  # the message tag of carried states (ring attention's exchanges use small tags)
_CARRY_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_MAX_CARRY_TENSORS, _MAX_CARRY_DIMS = 8, 8
_HEADER_SIZE = 1 + _MAX_CARRY_TENSORS * (2 + _MAX_CARRY_DIMS)  # count, then (dtype, ndim, dims...) per tensor


def _carry_header(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """The int64 ``[_HEADER_SIZE]`` description (count, dtypes, shapes) a receiver allocates buffers from."""
    if len(tensors) > _MAX_CARRY_TENSORS or any(t.dim() > _MAX_CARRY_DIMS for t in tensors):
        raise ValueError(f"a carried state is at most {_MAX_CARRY_TENSORS} tensors of {_MAX_CARRY_DIMS} dims")
    values = [len(tensors)]
    for tensor in tensors:
        values += [_CARRY_DTYPES.index(tensor.dtype), tensor.dim(), *tensor.shape]
        values += [0] * (_MAX_CARRY_DIMS - tensor.dim())
    values += [0] * (_HEADER_SIZE - len(values))
    return torch.tensor(values, dtype=torch.int64, device=device)


def _carry_specs(header: torch.Tensor) -> List[Tuple[Tuple[int, ...], torch.dtype]]:
    """(shape, dtype) of each tensor a :func:`_carry_header` describes."""
    values = header.tolist()
    specs, at = [], 1
    for _ in range(values[0]):
        dtype, ndim = _CARRY_DTYPES[values[at]], values[at + 1]
        specs.append((tuple(values[at + 2:at + 2 + ndim]), dtype))
        at += 2 + _MAX_CARRY_DIMS
    return specs


def _send_tensors(tensors: Sequence[torch.Tensor], peer: int, group: Group) -> None:
    for tensor in tensors:
        if tensor.numel():  # empty tensors (a conv of kernel 1 carries no inputs) are not sent
            dist.send(tensor.detach().contiguous(), peer, group=group.handle, tag=RELAY_TAG)


def _recv_tensors(specs: Sequence[Tuple[Tuple[int, ...], torch.dtype]], peer: int, group: Group,
                  device: torch.device) -> List[torch.Tensor]:
    received = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in specs]
    for tensor in received:
        if tensor.numel():
            dist.recv(tensor, peer, group=group.handle, tag=RELAY_TAG)
    return received


class _ChainStart(torch.autograd.Function):
    """A 0-dim token that the relay's first exchange consumes: the anchor's gradient (none) waits for the
    backward of every exchange of the chain, so the layers before cannot start theirs earlier."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor) -> torch.Tensor:
        return anchor.new_zeros(())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None


class _SendCarry(torch.autograd.Function):
    """Sends ``carry`` to ``peer`` and passes ``output`` through; the backward receives the carry's gradient."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, token: torch.Tensor, peer: int, group: Group, *carry: torch.Tensor):
        _send_tensors([_carry_header(carry, output.device), *carry], peer, group)
        ctx.peer, ctx.group, ctx.specs = peer, group, [(tuple(t.shape), t.dtype) for t in carry]
        return output.view_as(output), token.new_zeros(())

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor, grad_token: torch.Tensor):
        grads = _recv_tensors(ctx.specs, ctx.peer, ctx.group, grad_output.device)
        return (grad_output, torch.zeros_like(grad_token), None, None, *grads)


class _RecvCarry(torch.autograd.Function):
    """Receives a carry from ``peer``; the backward sends its gradient back."""

    @staticmethod
    def forward(ctx, token: torch.Tensor, peer: int, group: Group):
        header = _recv_tensors([((_HEADER_SIZE,), torch.int64)], peer, group, token.device)[0]
        carry = _recv_tensors(_carry_specs(header), peer, group, token.device)
        ctx.peer, ctx.group = peer, group
        return (*carry, token.new_zeros(()))

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        _send_tensors(grads[:-1], ctx.peer, ctx.group)  # unused outputs' gradients come as zeros
        return torch.zeros_like(grads[-1]), None, None


class _ChainEnd(torch.autograd.Function):
    """``output`` passed through with the chain's last token tied to it, so that the backward reaches every
    exchange of the chain (also one whose received carry the core left unused: its sender still gets zeros)."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, grad.new_zeros(())


def relay_token(anchor: torch.Tensor) -> torch.Tensor:
    """The token a relay chain starts from (see :func:`send_carry`): 0-dim, tied to ``anchor`` (the layer's input)
    so that ``anchor``'s gradient is complete only after every exchange of the chain ran its backward."""
    if not torch.is_grad_enabled():
        return anchor.new_zeros(())
    return _ChainStart.apply(anchor if anchor.requires_grad else anchor.new_zeros((), requires_grad=True))


def send_carry(output: torch.Tensor, carry: Sequence[torch.Tensor], token: torch.Tensor, peer: int,
               group: Group) -> Tuple[torch.Tensor, torch.Tensor]:
    """Send a recurrent mixer's ``carry`` (``[b, ...]`` tensors) to global rank ``peer`` of ``group``, which
    :func:`recv_carry` s it: ``(output, token)``, ``output`` passed through so that its backward, which receives
    the carry's gradient from ``peer``, runs; the new ``token`` orders this exchange's backward after that of
    the exchanges that consume it (each rank threads one token through its exchanges in sequence order)."""
    return _SendCarry.apply(output, token, peer, group, *carry)


def recv_carry(token: torch.Tensor, peer: int, group: Group) -> Tuple[Tuple[torch.Tensor, ...], torch.Tensor]:
    """Receive the carry :func:`send_carry` sends from global rank ``peer``: ``(carry, token)``; the backward sends
    the carry's gradient back to ``peer``."""
    *carry, token = _RecvCarry.apply(token, peer, group)
    return tuple(carry), token


def end_relay(output: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """``output`` with the last token of a rank's relay chain tied to it (see :class:`_ChainEnd`)."""
    return _ChainEnd.apply(output, token)


def fetch_rows(rows: torch.Tensor, wanted: torch.Tensor, group: Group) -> torch.Tensor:
    """Rows of the concatenation of every rank's ``rows`` ``[n, ...]`` (rank-major: rank r's row i is ``r n + i``)
    at the sorted indices ``wanted`` ``[m]`` (each rank its own) -> ``[m, ...]``. Only the asked rows travel: the
    requests go to their owners, the rows come back, a gradient returns the same way (summed at its owner)."""
    n = rows.size(0)
    owners = torch.div(wanted, n, rounding_mode="floor")
    asked = torch.bincount(owners, minlength=group.size)  # [ranks] rows this rank asks from each
    asked_of_me = exchange_token_counts(asked, group)  # [ranks] rows each rank asks from this one
    requests = all_to_all_tokens(wanted - owners * n, asked_of_me.tolist(), asked.tolist(), group)  # my row numbers
    return all_to_all_tokens(rows.index_select(0, requests), asked.tolist(), asked_of_me.tolist(), group)

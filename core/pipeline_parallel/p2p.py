"""Point-to-point transfers between adjacent pipeline stages.

The executor (``schedules.run_schedule``) hands :func:`communicate` one batch
of messages at a time: activations going forward, gradients going backward,
each to the next or previous rank of the pipeline group (with a virtual
pipeline the last stage also sends to the first and back). All messages of a
batch are posted together with ``torch.distributed.batch_isend_irecv`` and
waited for; the same code runs on gloo, nccl and hccl. Messages between two
ranks are matched in posting order, which the schedule tables guarantee to
agree on both sides (checked by ``simulate.simulate``).

Variable sequence lengths: a receive without a known shape first receives the
``[s, b, h]`` shape as three int64 values from the sender (a first, smaller
batch), then the tensor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from core.parallel_state import Group

SHAPE_DIMS = 3  # activations are [s, b, h]
_batching_works: Optional[bool] = None  # learnt on the first batch: False -> individual isend/irecv
_pending_sends: List[Tuple[object, torch.Tensor]] = []


@dataclass
class Message:
    """One send (``tensor`` set) or receive (``shape`` set, or None to receive the shape first)."""

    send: bool
    peer: int  # global rank
    tensor: Optional[torch.Tensor] = None
    shape: Optional[Sequence[int]] = None
    exchange_shape: bool = False  # the shape travels first (variable sequence lengths)


def send(tensor: torch.Tensor, peer: int, exchange_shape: bool = False) -> Message:
    return Message(True, peer, tensor=tensor.detach().contiguous(), exchange_shape=exchange_shape)


def recv(peer: int, shape: Optional[Sequence[int]]) -> Message:
    return Message(False, peer, shape=shape, exchange_shape=shape is None)


def _post(ops: List[dist.P2POp]) -> None:
    """Post the ops together (or one by one where batching is unsupported); wait for the receives.

    Sends complete in the background; :func:`wait_sends` waits for them (the
    executor calls it at the end of the schedule). Where the backend returns one
    request for the whole batch (coalesced NCCL/HCCL), that request is waited for.
    """
    global _batching_works
    if not ops:
        return
    if _batching_works is not False:
        try:
            requests = dist.batch_isend_irecv(ops)
            _batching_works = True
        except (RuntimeError, NotImplementedError):
            if _batching_works:
                raise
            _batching_works = False
    if _batching_works is False:
        requests = [op.op(op.tensor, op.peer, op.group) for op in ops]
    if len(requests) != len(ops):
        for request in requests:
            request.wait()
        return
    for op, request in zip(ops, requests):
        if op.op is dist.isend:
            _pending_sends.append((request, op.tensor))  # keep the tensor alive until sent
        else:
            request.wait()


def wait_sends() -> None:
    """Wait for every send posted so far."""
    while _pending_sends:
        request, _ = _pending_sends.pop(0)
        request.wait()


def _exchange_shapes(messages: Sequence[Message], group: Group, device: torch.device) -> List[Optional[List[int]]]:
    """Shapes of the receives that need one, in message order (None elsewhere)."""
    ops, buffers = [], {}
    for index, message in enumerate(messages):
        if not message.exchange_shape:
            continue
        if message.send:
            shape = torch.tensor(list(message.tensor.shape), dtype=torch.int64, device=device)  # [3]
            ops.append(dist.P2POp(dist.isend, shape, message.peer, group.handle))
        else:
            buffers[index] = torch.empty(SHAPE_DIMS, dtype=torch.int64, device=device)
            ops.append(dist.P2POp(dist.irecv, buffers[index], message.peer, group.handle))
    _post(ops)
    return [buffers[i].tolist() if i in buffers else None for i in range(len(messages))]


def communicate(messages: Sequence[Message], group: Group, dtype: torch.dtype,
                device: torch.device) -> List[torch.Tensor]:
    """Run one batch; return the received tensors in the order of the receive messages."""
    shapes = _exchange_shapes(messages, group, device) if any(m.exchange_shape for m in messages) else None
    ops, received = [], []
    for index, message in enumerate(messages):
        if message.send:
            ops.append(dist.P2POp(dist.isend, message.tensor, message.peer, group.handle))
            continue
        shape = message.shape if message.shape is not None else shapes[index]
        buffer = torch.empty(tuple(shape), dtype=dtype, device=device)
        ops.append(dist.P2POp(dist.irecv, buffer, message.peer, group.handle))
        received.append(buffer)
    _post(ops)
    return received

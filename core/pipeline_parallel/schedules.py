"""Forward/backward schedules over the micro-batches of one global batch.

``forward_backward_no_pipelining`` runs every micro-batch through the whole
model and accumulates gradients (PP = 1).

Pipeline schedules are pure functions (DESIGN.md, principle 6): given the
pipeline size ``pp``, the virtual size ``vpp`` and the micro-batch count
``M`` they return, per rank, the ordered list of :class:`Action`\\ s:

* ``F``/``B``/``W``: forward, backward (input gradient; the whole backward
  unless the schedule splits it) and weight gradient of micro-batch ``m`` on
  the rank's model chunk ``c``;
* ``SEND_F``/``RECV_F``/``SEND_B``/``RECV_B``: activations to the next virtual
  stage, gradients to the previous one. Consecutive communication actions form
  one batch posted together (``p2p.communicate``).

Tables: :func:`one_f_one_b` (warm-up ``min(pp - rank - 1, M)``),
:func:`interleaved_one_f_one_b` (Megatron's grouping of micro-batches in
groups of ``pp``; ``M`` must be a multiple of ``pp``) and :func:`zero_bubble`
(ZB-H1: backward split into B and W, W placed in the bubbles, at most
``pp`` micro-batches in flight on any rank, 1F1B's peak). ``core/pipeline_parallel/simulate.py``
checks and times them; ``tests/unit/test_pipeline_schedules.py`` tests them.

One executor, :func:`run_schedule`, runs any table on the model chunks.
Gradients accumulate into ``main_grad`` through the grad-buffer hooks;
the losses come back on the last stage. For a split backward (a table with W
actions) the whole table runs inside ``defer_weight_grads``
(core/tensor_parallel/layers.py): B is an ordinary backward in which every
column/row-parallel linear computes its input gradient only and queues its
weight-gradient GEMM (and bias sum) in a :class:`WeightGradStore`; the
stage input's gradient is sent on at once, and the queued entries of that
micro-batch are kept until its W, which computes them and accumulates them
through autograd, so the grad-buffer hooks (and overlapped reductions) run as
usual. Other parameters (embeddings, norms) get their gradients in B. The
store holds each pending micro-batch's linear inputs and output gradients
until its W (ZB-H1's inherent memory: at most ``rank`` pending Ws) and frees
them there. With ``no_sync`` each chunk's last B and last W run outside it, so
a bucket starts its reduction once the last B has delivered its other
parameters' gradients and the last W its linear ones.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from core.parallel_state import Group
from core.pipeline_parallel import p2p
from core.pipeline_parallel.loss_scale import set_microbatch_loss_scale
from core.tensor_parallel.layers import DeferredGrad, WeightGradStore, defer_weight_grads
from core.timers import timed

# forward_step(batch, model) -> (output, logging stats): on the model's last stage the scalar loss averaged
# over the micro-batch's tokens; on other stages the stage's output activations [s, b, h].
ForwardStep = Callable[[Dict[str, torch.Tensor], nn.Module], Tuple[torch.Tensor, Dict[str, torch.Tensor]]]

F, B, W = "F", "B", "W"
SEND_F, RECV_F, SEND_B, RECV_B = "SEND_F", "RECV_F", "SEND_B", "RECV_B"
COMPUTE = (F, B, W)
COMMUNICATION = (SEND_F, RECV_F, SEND_B, RECV_B)
ZERO_BUBBLE = "zero-bubble"


@dataclass(frozen=True)
class Action:
    kind: str
    microbatch: int
    chunk: int = 0

    def __repr__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f".{self.chunk}" if self.chunk else "")


Table = List[List[Action]]  # per pipeline rank, in execution order


class ScheduleError(ValueError):
    """A schedule that cannot be built for these sizes; the message names the flags."""


# --------------------------------------------------------------------------- geometry

def virtual_stage(rank: int, chunk: int, pp: int) -> int:
    """Megatron's numbering: chunk ``c`` of rank ``r`` is virtual stage ``c pp + r``."""
    return chunk * pp + rank


def is_first_stage(rank: int, chunk: int) -> bool:
    return rank == 0 and chunk == 0


def is_last_stage(rank: int, chunk: int, pp: int, vpp: int) -> bool:
    return rank == pp - 1 and chunk == vpp - 1


def with_communication(compute: Sequence[Action], rank: int, pp: int, vpp: int) -> List[Action]:
    """Receive right before each F/B that needs input, send right after each F/B whose result moves on."""
    actions: List[Action] = []
    for action in compute:
        first, last = is_first_stage(rank, action.chunk), is_last_stage(rank, action.chunk, pp, vpp)
        m, c = action.microbatch, action.chunk
        if action.kind == F and not first:
            actions.append(Action(RECV_F, m, c))
        if action.kind == B and not last:
            actions.append(Action(RECV_B, m, c))
        actions.append(action)
        if action.kind == F and not last:
            actions.append(Action(SEND_F, m, c))
        if action.kind == B and not first:
            actions.append(Action(SEND_B, m, c))
    return actions


# --------------------------------------------------------------------------- tables

def _one_f_one_b_order(rank: int, pp: int, num_microbatches: int) -> List[Action]:
    """F and B of one rank: warm-up forwards, then alternate, then the remaining backwards."""
    warmup = min(pp - rank - 1, num_microbatches)
    order = [Action(F, m) for m in range(warmup)]
    for i in range(num_microbatches - warmup):
        order += [Action(F, warmup + i), Action(B, i)]
    order += [Action(B, m) for m in range(num_microbatches - warmup, num_microbatches)]
    return order


def one_f_one_b(pp: int, num_microbatches: int) -> Table:
    """Non-interleaved 1F1B (PipeDream-flush): at most ``pp - rank`` micro-batches in flight."""
    return [with_communication(_one_f_one_b_order(r, pp, num_microbatches), r, pp, 1) for r in range(pp)]


def _interleaved_chunk(k: int, pp: int, vpp: int, forward: bool) -> int:
    chunk = (k % (pp * vpp)) // pp
    return chunk if forward else vpp - 1 - chunk


def _interleaved_microbatch(k: int, pp: int, vpp: int) -> int:
    return (k // (pp * vpp)) * pp + k % pp


def check_interleaving(pp: int, vpp: int, num_microbatches: int) -> None:
    if num_microbatches % pp != 0:
        raise ScheduleError(
            f"the interleaved schedule (--num-layers-per-virtual-pipeline-stage) needs the number of micro-batches "
            f"({num_microbatches} = --global-batch-size / (--micro-batch-size x data-parallel size)) to be a "
            f"multiple of --pipeline-model-parallel-size ({pp}); change the batch sizes")


def _interleaved_order(rank: int, pp: int, vpp: int, num_microbatches: int) -> List[Action]:
    total = num_microbatches * vpp
    if num_microbatches == pp:
        warmup = total
    else:
        warmup = min((pp - rank - 1) * 2 + (vpp - 1) * pp, total)

    def fwd(k: int) -> Action:
        return Action(F, _interleaved_microbatch(k, pp, vpp), _interleaved_chunk(k, pp, vpp, True))

    def bwd(k: int) -> Action:
        return Action(B, _interleaved_microbatch(k, pp, vpp), _interleaved_chunk(k, pp, vpp, False))

    order = [fwd(k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [fwd(warmup + k), bwd(k)]
    order += [bwd(k) for k in range(total - warmup, total)]
    return order


def interleaved_one_f_one_b(pp: int, vpp: int, num_microbatches: int) -> Table:
    """Megatron's interleaved 1F1B over ``vpp`` model chunks per rank."""
    check_interleaving(pp, vpp, num_microbatches)
    return [with_communication(_interleaved_order(r, pp, vpp, num_microbatches), r, pp, vpp) for r in range(pp)]


def _zero_bubble_orders(pp: int, num_microbatches: int) -> List[List[Action]]:
    """ZB-H1 compute orders by list scheduling with unit F, B, W costs.

    Each rank keeps 1F1B's order of F and B (B = input gradient only). A rank
    runs the next F/B as soon as its input is there, except that an F waits while
    ``pp - rank`` micro-batches hold activations (F done, B not: 1F1B's bound) or
    ``rank`` weight-gradient steps are pending; otherwise it runs its oldest
    pending W. So at most ``pp`` micro-batches are in flight on any rank (1F1B's
    peak, on the first stage), and the Ws fill the bubbles of the cool-down. With
    unit costs this reaches ZB-H1's makespan ``3 M + pp - 1``. The table, not the
    timing, is the result: the executor runs it in this order whatever the costs.
    """
    queues = [_one_f_one_b_order(r, pp, num_microbatches) for r in range(pp)]
    done: Dict[Tuple[str, int, int], int] = {}  # (kind, microbatch, rank) -> finish time
    busy_until = [0] * pp
    pending_w: List[List[int]] = [[] for _ in range(pp)]
    holding = [0] * pp  # micro-batches with F done and B not done
    orders: List[List[Action]] = [[] for _ in range(pp)]
    time, limit = 0, 10 * pp * num_microbatches + 10
    while any(queues) or any(pending_w):
        if time > limit:
            raise ScheduleError(f"zero-bubble list scheduling did not finish for pp={pp}, M={num_microbatches}")
        for r in range(pp):
            if busy_until[r] > time:
                continue
            may_forward = holding[r] < min(pp - r, num_microbatches) and len(pending_w[r]) <= r
            action = _next_ready(queues[r], r, pp, done, may_forward, time)
            if action is not None:
                queues[r].pop(0)
            elif pending_w[r]:
                action = Action(W, pending_w[r].pop(0))
            else:
                continue
            orders[r].append(action)
            done[(action.kind, action.microbatch, r)] = busy_until[r] = time + 1
            holding[r] += {F: 1, B: -1, W: 0}[action.kind]
            if action.kind == B:
                pending_w[r].append(action.microbatch)
        time += 1
    return orders


def _next_ready(queue: List[Action], rank: int, pp: int, done: Dict[Tuple[str, int, int], int],
                may_forward: bool, time: int) -> Optional[Action]:
    """The rank's next F/B when it can start at ``time`` (its input has arrived), else None."""
    if not queue:
        return None
    action, m = queue[0], queue[0].microbatch

    def finished(kind: str, at_rank: int) -> bool:
        return done.get((kind, m, at_rank), time + 1) <= time

    if action.kind == F:
        return action if may_forward and (rank == 0 or finished(F, rank - 1)) else None
    ready = finished(F, rank) if rank == pp - 1 else finished(B, rank + 1)
    return action if ready else None


def zero_bubble(pp: int, num_microbatches: int) -> Table:
    """ZB-H1: 1F1B with the weight-gradient half of each backward moved into the bubbles."""
    return [with_communication(order, r, pp, 1) for r, order in enumerate(_zero_bubble_orders(pp, num_microbatches))]


def forward_only(pp: int, num_microbatches: int, vpp: int = 1) -> Table:
    """Forwards only (evaluation), in the virtual order of the interleaved schedule."""
    if vpp > 1:
        check_interleaving(pp, vpp, num_microbatches)
        total = num_microbatches * vpp
        orders = [[Action(F, _interleaved_microbatch(k, pp, vpp), _interleaved_chunk(k, pp, vpp, True))
                   for k in range(total)] for _ in range(pp)]
    else:
        orders = [[Action(F, m) for m in range(num_microbatches)] for _ in range(pp)]
    return [with_communication(order, r, pp, vpp) for r, order in enumerate(orders)]


def build_table(pp: int, num_microbatches: int, vpp: Optional[int] = None, method: Optional[str] = None,
                forward_only_: bool = False) -> Table:
    """The table of the schedule the flags select."""
    vpp = vpp or 1
    if forward_only_:
        return forward_only(pp, num_microbatches, vpp)
    if method == ZERO_BUBBLE:
        if vpp > 1:
            raise ScheduleError("--schedules-method zero-bubble is not implemented with a virtual pipeline; "
                                "drop --num-layers-per-virtual-pipeline-stage or the zero-bubble schedule")
        return zero_bubble(pp, num_microbatches)
    if vpp > 1:
        return interleaved_one_f_one_b(pp, vpp, num_microbatches)
    return one_f_one_b(pp, num_microbatches)


def split_into_steps(actions: Sequence[Action]) -> List[Union[Action, List[Action]]]:
    """Compute actions one by one; each run of consecutive communication actions as one batch."""
    steps: List[Union[Action, List[Action]]] = []
    for action in actions:
        if action.kind in COMMUNICATION:
            if steps and isinstance(steps[-1], list):
                steps[-1].append(action)
            else:
                steps.append([action])
        else:
            steps.append(action)
    return steps


# --------------------------------------------------------------------------- no pipelining

def forward_backward_no_pipelining(forward_step: ForwardStep, data_iterator: Iterator[Dict[str, torch.Tensor]],
                                   model: Union[nn.Module, List[nn.Module]], num_microbatches: int,
                                   forward_only: bool = False,
                                   scale_loss: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                                   no_sync: Callable[[], ContextManager] = contextlib.nullcontext,
                                   pipeline: Optional["PipelineOptions"] = None) -> List[Dict[str, Any]]:
    """Run ``num_microbatches`` forward (and backward) passes; return each micro-batch's stats.

    The loss of each micro-batch is divided by ``num_microbatches`` so the
    accumulated gradient is that of the mean over the global batch. All but the
    last backward run inside ``no_sync()``, so overlapped gradient reductions
    start only during the last one. ``model`` may be a one-element list of chunks.
    """
    if isinstance(model, list):
        (model,) = model
    stats = []
    grad_context = torch.no_grad() if forward_only else contextlib.nullcontext()
    set_microbatch_loss_scale(scale_loss(torch.ones(())) / num_microbatches)  # MoE losses: the main loss's factor
    for index in range(num_microbatches):
        with timed("batch-generator"):
            batch = next(data_iterator)
        sync_context = no_sync() if index < num_microbatches - 1 else contextlib.nullcontext()
        with sync_context:
            with grad_context, timed("forward-compute"):
                loss, micro_stats = forward_step(batch, model)
            if not forward_only:
                with timed("backward-compute"):
                    scale_loss(loss / num_microbatches).backward()
        stats.append(micro_stats)
    return stats


# --------------------------------------------------------------------------- executor

@dataclass
class PipelineOptions:
    """What the executor needs beyond the table: the pipeline group and the activations' form."""

    group: Group
    tensor_shape: Tuple[int, int, int]  # [s, b, h] sent between stages ([s/tp, b, h] under SP)
    dtype: torch.dtype
    device: torch.device
    variable_seq_lengths: bool = False
    vpp: int = 1
    method: Optional[str] = None


@dataclass
class _Run:
    """The executor's working state for one table."""

    chunks: List[nn.Module]
    forward_step: ForwardStep
    batches: List[Dict[str, torch.Tensor]]
    options: PipelineOptions
    forward_only: bool
    scale_loss: Callable[[torch.Tensor], torch.Tensor]
    rank: int
    pp: int
    inputs: Dict[Tuple[int, int], torch.Tensor] = field(default_factory=dict)
    outputs: Dict[Tuple[int, int], torch.Tensor] = field(default_factory=dict)
    grad_outputs: Dict[Tuple[int, int], torch.Tensor] = field(default_factory=dict)
    input_grads: Dict[Tuple[int, int], torch.Tensor] = field(default_factory=dict)
    store: Optional[WeightGradStore] = None  # the split backward's deferred weight gradients
    deferred: Dict[Tuple[int, int], List[DeferredGrad]] = field(default_factory=dict)
    stats: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def vpp(self) -> int:
        return len(self.chunks)

    def first(self, chunk: int) -> bool:
        return is_first_stage(self.rank, chunk)

    def last(self, chunk: int) -> bool:
        return is_last_stage(self.rank, chunk, self.pp, self.vpp)


def _forward(run: _Run, m: int, c: int) -> None:
    key, model = (m, c), run.chunks[c]
    model.set_input_tensor(None if run.first(c) else run.inputs[key])
    context = torch.no_grad() if run.forward_only else contextlib.nullcontext()
    with context:
        output, stats = run.forward_step(run.batches[m], model)
    if run.first(c) or run.forward_only:
        run.inputs.pop(key, None)
    if run.last(c):
        run.stats.append(stats)
        if not run.forward_only:
            run.outputs[key] = run.scale_loss(output / len(run.batches))
    else:
        run.outputs[key] = output  # [s, b, h]


def _backward(run: _Run, m: int, c: int, split: bool) -> None:
    """The backward of micro-batch ``m`` on chunk ``c``; with ``split`` the linear weight gradients wait for W."""
    key = (m, c)
    output, grad = run.outputs.pop(key), run.grad_outputs.pop(key, None)
    stage_input = run.inputs.pop(key, None)
    torch.autograd.backward(output, grad_tensors=grad)
    if stage_input is not None:
        run.input_grads[key] = stage_input.grad
    if split:
        run.deferred[key] = run.store.take()


def _weight_backward(run: _Run, m: int, c: int) -> None:
    """Compute micro-batch ``m``'s deferred weight gradients on chunk ``c`` and accumulate them
    through autograd, so the grad-buffer hooks run as usual; the held activations are freed."""
    pairs = WeightGradStore.weight_grads(run.deferred.pop((m, c)))
    if pairs:
        params, grads = zip(*pairs)
        del pairs
        torch.autograd.backward(list(params), grad_tensors=list(grads))


def _peer(run: _Run, kind: str) -> int:
    ranks = run.options.group.ranks
    step = 1 if kind in (SEND_F, RECV_B) else -1
    return ranks[(run.rank + step) % run.pp]


def _message(run: _Run, action: Action) -> p2p.Message:
    key, kind, options = (action.microbatch, action.chunk), action.kind, run.options
    peer = _peer(run, kind)
    if kind == SEND_F:
        return p2p.send(run.outputs[key] if not run.forward_only else run.outputs.pop(key), peer,
                        exchange_shape=options.variable_seq_lengths)
    if kind == SEND_B:
        return p2p.send(run.input_grads.pop(key), peer)
    if kind == RECV_F:
        return p2p.recv(peer, None if options.variable_seq_lengths else options.tensor_shape)
    return p2p.recv(peer, tuple(run.outputs[key].shape))  # RECV_B: the shape of what this stage sent


def _communicate(run: _Run, batch: List[Action]) -> None:
    options = run.options
    received = p2p.communicate([_message(run, a) for a in batch], options.group, options.dtype, options.device)
    receives = [a for a in batch if a.kind in (RECV_F, RECV_B)]
    for action, tensor in zip(receives, received):
        key = (action.microbatch, action.chunk)
        if action.kind == RECV_F:
            run.inputs[key] = tensor.requires_grad_(not run.forward_only)
        else:
            run.grad_outputs[key] = tensor


def _last_gradient_steps(actions: Sequence[Action], split: bool) -> set:
    """Per chunk, the table indices of the steps that complete its gradients: the last B and,
    when split, the last W (the last B completes the parameters whose gradients are not deferred)."""
    last = {}
    for index, action in enumerate(actions):
        if action.kind == B or (split and action.kind == W):
            last[(action.kind, action.chunk)] = index
    return set(last.values())


def run_schedule(actions: Sequence[Action], chunks: List[nn.Module], forward_step: ForwardStep,
                 batches: List[Dict[str, torch.Tensor]], options: PipelineOptions, forward_only: bool = False,
                 scale_loss: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                 no_sync: Callable[[], ContextManager] = contextlib.nullcontext) -> List[Dict[str, Any]]:
    """Execute one rank's table; return the micro-batches' stats (on the last stage; else empty).

    Every backward step but each chunk's last (its last B and, for a split backward, its
    last W) runs inside ``no_sync()``, so overlapped gradient reductions start only while a
    chunk's final gradients are produced. A table with W actions defers the linear layers'
    weight gradients from B to W (see the module docstring).
    """
    run = _Run(chunks, forward_step, batches, options, forward_only, scale_loss, options.group.rank,
               options.group.size)
    set_microbatch_loss_scale(scale_loss(torch.ones(())) / len(batches))  # MoE losses: the main loss's factor
    split = any(a.kind == W for a in actions) and not forward_only
    run.store = WeightGradStore() if split else None
    final = _last_gradient_steps(actions, split)
    index = 0
    with defer_weight_grads(run.store):
        for step in split_into_steps(actions):
            if isinstance(step, list):
                with timed("pipeline-p2p"):
                    _communicate(run, step)
                index += len(step)
                continue
            with contextlib.nullcontext() if index in final or step.kind == F else no_sync():
                if step.kind == F:
                    with timed("forward-compute"):
                        _forward(run, step.microbatch, step.chunk)
                elif step.kind == B:
                    with timed("backward-compute"):
                        _backward(run, step.microbatch, step.chunk, split)
                else:
                    with timed("backward-compute"):
                        _weight_backward(run, step.microbatch, step.chunk)
            index += 1
    p2p.wait_sends()
    for chunk in chunks:
        chunk.set_input_tensor(None)
    return run.stats


def forward_backward_pipelining(forward_step: ForwardStep, data_iterator: Iterator[Dict[str, torch.Tensor]],
                                model: List[nn.Module], num_microbatches: int, forward_only: bool = False,
                                scale_loss: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                                no_sync: Callable[[], ContextManager] = contextlib.nullcontext,
                                pipeline: Optional[PipelineOptions] = None) -> List[Dict[str, Any]]:
    """Every pipeline schedule: build this rank's table, fetch the micro-batches, run it.

    Every stage reads all ``num_microbatches`` batches (the first stage needs the
    tokens, the last the labels; the data is the same on all stages).
    """
    if pipeline is None:
        raise ValueError("pipeline schedules need PipelineOptions (the pipeline group and activation shape)")
    chunks = model if isinstance(model, list) else [model]
    table = build_table(pipeline.group.size, num_microbatches, len(chunks), pipeline.method, forward_only)
    with timed("batch-generator"):
        batches = [next(data_iterator) for _ in range(num_microbatches)]
    return run_schedule(table[pipeline.group.rank], chunks, forward_step, batches, pipeline, forward_only,
                        scale_loss, no_sync)


def get_forward_backward_func(pp: int, vpp: Optional[int] = None, schedules_method: Optional[str] = None) -> Callable:
    """``forward_backward_no_pipelining`` for PP = 1, else the table-driven executor.

    The schedule itself (1F1B, interleaved, zero-bubble) follows from the chunk
    count and ``PipelineOptions.method``; this returns the matching entry point.
    """
    if pp == 1:
        if (vpp or 1) > 1:
            raise ScheduleError("a virtual pipeline needs --pipeline-model-parallel-size of 2 or more")
        return forward_backward_no_pipelining
    return forward_backward_pipelining

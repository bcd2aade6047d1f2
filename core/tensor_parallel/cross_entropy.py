"""Cross-entropy over logits whose vocabulary is split across TP ranks.

Computed in fp32 without gathering the logits: the max, the partition sum and
the target logit are each reduced over the TP group. Vocabulary entries past
``vocab_size`` (padding added for divisibility) are excluded, so the loss does
not depend on the padded size and hence on the TP degree.

The elementwise work on a block of logits (raise to fp32, scale, cap, fold into
the running max and sums; in the backward the softmax minus the target, scaled
and cast) is two functions, :func:`block_partials` and :func:`block_logit_grads`.
With ``--cross-entropy-loss-fusion`` (Megatron's flag) they run through their
``FusedOp`` (core/fused.py): a ``torch.compile``d region, one or two
passes over the block instead of one per operation. The materialised path then
runs on two more (:class:`_FusedVocabParallelCrossEntropy`): :func:`logit_exps`
keeps the softmax numerators in the logits' dtype instead of an fp32 softmax, and
:func:`exp_logit_grads` scales them in the backward, with no second exp.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F

from core.device import gemm_dtype
from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce
from core.fused import Chooser, FusedOp, Kernel, decide_kernel, kernel_choice, register_fused_op

# Vocabulary entries per chunk of the fused output layer + loss: the fastest of 1024-8192 in bf16 on the bench
# shape (2048 tokens, hidden 512, vocab 32000), and [tokens, 2048] fp32 blocks stay small at any sequence length.
CROSS_ENTROPY_CHUNK = 2048


def _local_vocab_range(local_vocab: int, group: Group, vocab_size: int) -> Tuple[int, int]:
    """(the first global id this TP rank holds, how many of its ``local_vocab`` entries are real, not padding)."""
    start = group.rank * local_vocab
    return start, max(0, min(local_vocab, vocab_size - start))


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, group: Group, vocab_size: int,
                label_smoothing: float) -> torch.Tensor:
        # logits [s, b, v/tp] (any float dtype), target [s, b] global ids
        local_vocab = logits.size(-1)
        start, valid = _local_vocab_range(local_vocab, group, vocab_size)
        logits = logits.float().clone()  # [s, b, v/tp] fp32 working copy
        if valid < local_vocab:
            logits[..., valid:] = float("-inf")
        logits_max = logits.max(dim=-1)[0]  # [s, b]
        all_reduce(logits_max, group, dist.ReduceOp.MAX)
        logits.sub_(logits_max.unsqueeze(-1))

        outside = (target < start) | (target >= start + local_vocab)
        local_target = (target - start).masked_fill(outside, 0)
        target_logit = logits.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        all_reduce(target_logit, group)  # [s, b]

        sum_shifted = None
        if label_smoothing > 0:  # sum of (logit - max) over real entries, taken before exp overwrites it
            sum_shifted = all_reduce(logits[..., :valid].sum(dim=-1), group)  # [s, b]
        exp_logits = logits.exp_()  # in place: logits now hold exp(logit - max)
        sum_exp = exp_logits.sum(dim=-1)
        all_reduce(sum_exp, group)  # [s, b]
        log_sum_exp = sum_exp.log()
        loss = log_sum_exp - target_logit  # [s, b]

        smoothing = 0.0
        if label_smoothing > 0:
            # Spread label_smoothing of the mass uniformly over the other vocab_size - 1 entries.
            smoothing = label_smoothing * vocab_size / (vocab_size - 1)
            sum_log_probs = sum_shifted - vocab_size * log_sum_exp  # sum over v of log p_v, [s, b]
            loss = (1.0 - smoothing) * loss - smoothing * sum_log_probs / vocab_size

        exp_logits.div_(sum_exp.unsqueeze(-1))  # softmax [s, b, v/tp]
        ctx.save_for_backward(exp_logits, local_target, outside)
        ctx.smoothing, ctx.vocab_size, ctx.valid = smoothing, vocab_size, valid
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        softmax, local_target, outside = ctx.saved_tensors
        grad = softmax  # reused in place: d loss / d logits = softmax - target distribution
        hit = (~outside).to(grad.dtype)
        target_weight = 1.0 - ctx.smoothing
        grad.scatter_add_(-1, local_target.unsqueeze(-1), (-target_weight * hit).unsqueeze(-1))
        if ctx.smoothing > 0:
            grad[..., :ctx.valid] -= ctx.smoothing / ctx.vocab_size
        grad.mul_(grad_loss.unsqueeze(-1))
        return grad, None, None, None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, target: torch.Tensor, group: Group,
                                 vocab_size: Optional[int] = None, label_smoothing: float = 0.0,
                                 fused: bool = False) -> torch.Tensor:
    """Per-token loss ``[s, b]`` (fp32) for logits ``[s, b, v/tp]`` and targets ``[s, b]``.

    ``vocab_size``: the real vocabulary; entries past it are padding (default: none).
    The gradient has the dtype of the fp32 working copy and is cast back by autograd.
    ``fused`` (``--cross-entropy-loss-fusion``): through the block functions' fused kernels.
    """
    full_vocab = logits.size(-1) * group.size
    vocab_size = full_vocab if vocab_size is None else vocab_size
    if not 0 < vocab_size <= full_vocab:
        raise ValueError(f"vocab_size {vocab_size} must be in (0, {full_vocab}]")
    if fused:
        return _FusedVocabParallelCrossEntropy.apply(logits, target, group, vocab_size, label_smoothing)
    return _VocabParallelCrossEntropy.apply(logits, target, group, vocab_size, label_smoothing)



def _chunk_product(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """Raw logits ``[n, c]`` of all tokens ``[n, h]`` over a chunk of the vocabulary ``[c, h]``, in ``hidden``'s
    dtype (the caller passes the operands in ``gemm_dtype``: bf16 GEMMs accumulate in fp32 inside the kernel)."""
    return F.linear(hidden, weight.to(hidden.dtype), None if bias is None else bias.to(hidden.dtype))


def _scaled_logits(raw: torch.Tensor, logit_scale: Optional[float],
                   softcap: Optional[float]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """fp32 logits ``[n, c]`` of a raw block, scaled and capped as the model's; with ``softcap`` also ``tanh``'s
    output (its derivative reads it). Raised to fp32 as the materialised path's ``linear`` then ``.float()``."""
    logits = raw.float()  # [n, c]; raw itself when fp32, so nothing below writes in place
    if logit_scale is not None:
        logits = logits * logit_scale
    if softcap is None:
        return logits, None
    capped = torch.tanh(logits / softcap)  # [n, c]
    return capped * softcap, capped


def _target_hits(target_col: torch.Tensor, width: int) -> torch.Tensor:
    """``[n, c]`` True where column ``j`` of the block is row ``i``'s target (``target_col[i] == j``)."""
    return torch.arange(width, device=target_col.device).unsqueeze(0) == target_col.unsqueeze(-1)


def block_partials(raw: torch.Tensor, target_col: torch.Tensor, running_max: torch.Tensor, sums: torch.Tensor,
                   logit_scale: Optional[float], softcap: Optional[float],
                   with_sum: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """A block of raw logits ``[n, c]`` folded into the running max ``[n]`` and ``sums`` ``[3, n]`` (partition
    sum relative to that max, target logit, logit sum when ``with_sum``: label smoothing); ``target_col`` ``[n]``
    is each row's target column in this block, or -1. Returns the new (max, sums); an online log-sum-exp."""
    logits, _ = _scaled_logits(raw, logit_scale, softcap)  # [n, c] fp32
    new_max = torch.maximum(running_max, logits.max(dim=-1)[0])  # [n]
    partition = sums[0] * torch.exp(running_max - new_max) + torch.exp(logits - new_max.unsqueeze(-1)).sum(-1)
    target = sums[1] + torch.where(_target_hits(target_col, logits.size(-1)), logits, 0.0).sum(-1)
    total = sums[2] + logits.sum(dim=-1) if with_sum else sums[2]
    return new_max, torch.stack((partition, target, total))  # [n], [3, n]


def block_logit_grads(raw: torch.Tensor, log_sum_exp: torch.Tensor, target_col: torch.Tensor,
                      grad_loss: torch.Tensor, target_weight: float, uniform: float, logit_scale: Optional[float],
                      softcap: Optional[float]) -> torch.Tensor:
    """The loss's gradient with respect to a block of raw logits ``[n, c]``, in the block's dtype: the softmax
    minus the (smoothed) target distribution (``target_weight`` at the target, ``uniform`` everywhere),
    times each row's incoming gradient ``[n]``, through the cap and the scale."""
    logits, capped = _scaled_logits(raw, logit_scale, softcap)  # [n, c] fp32
    softmax = torch.exp(logits - log_sum_exp.unsqueeze(-1))  # [n, c]
    grad = _softmax_minus_target(softmax, target_col, grad_loss, target_weight, uniform)
    if softcap is not None:  # d(cap * tanh(z / cap)) / dz = 1 - tanh^2
        grad = grad * (1.0 - capped.square())
    if logit_scale is not None:
        grad = grad * logit_scale
    return grad.to(raw.dtype)  # [n, c]


def _softmax_minus_target(softmax: torch.Tensor, target_col: torch.Tensor, grad_loss: torch.Tensor,
                          target_weight: float, uniform: float) -> torch.Tensor:
    """``(softmax - smoothed one-hot) * grad_loss`` per row, ``[n, c]`` fp32."""
    grad = softmax - torch.where(_target_hits(target_col, softmax.size(-1)), target_weight, 0.0)
    if uniform:
        grad = grad - uniform
    return grad * grad_loss.unsqueeze(-1)


def logit_exps(logits: torch.Tensor, target_col: torch.Tensor,
               with_sum: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused materialised loss's forward over this rank's logits ``[n, c]``: the row max ``[n]``, the
    sums ``[3, n]`` of :func:`block_partials` (relative to that max) and the softmax numerators
    ``exp(z - max)`` ``[n, c]`` in the logits' dtype, kept for the backward so that it needs no exp of its own."""
    logits32 = logits.float()  # [n, c]
    row_max = logits32.max(dim=-1)[0]  # [n]
    exps = torch.exp(logits32 - row_max.unsqueeze(-1))  # [n, c]
    target = torch.where(_target_hits(target_col, logits.size(-1)), logits32, 0.0).sum(-1)
    total = logits32.sum(dim=-1) if with_sum else torch.zeros_like(row_max)
    return row_max, torch.stack((exps.sum(-1), target, total)), exps.to(logits.dtype)


def exp_logit_grads(exps: torch.Tensor, inverse_partition: torch.Tensor, target_col: torch.Tensor,
                    grad_loss: torch.Tensor, target_weight: float, uniform: float) -> torch.Tensor:
    """:func:`block_logit_grads` from :func:`logit_exps`' numerators ``[n, c]``: the softmax is
    ``exps * inverse_partition`` (``[n]``, ``exp(max - log_sum_exp)``), one pass and no exp."""
    softmax = exps.float() * inverse_partition.unsqueeze(-1)  # [n, c]
    return _softmax_minus_target(softmax, target_col, grad_loss, target_weight, uniform).to(exps.dtype)


def _loss_kernel(name: str, reference: Kernel) -> Chooser:
    """The chooser of one of the loss's fused block functions (``reference``): ``(device_type, fused) ->
    ("compiled" | "reference", function)``, ``fused`` being --cross-entropy-loss-fusion; registered as ``name``
    for the log line. Every one compiles with dynamic shapes: the blocks change width."""
    op = FusedOp(name, "--cross-entropy-loss-fusion", reference, {}, dynamic_shapes=True)

    @kernel_choice
    def chooser(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
        return decide_kernel(op, device_type, fused)

    register_fused_op(name, "cross_entropy_loss_fusion", chooser)
    return chooser


cross_entropy_partials_kernel = _loss_kernel("cross_entropy", block_partials)
cross_entropy_grads_kernel = _loss_kernel("cross_entropy_grad", block_logit_grads)
logit_exps_kernel = _loss_kernel("cross_entropy_exps", logit_exps)
exp_logit_grads_kernel = _loss_kernel("cross_entropy_exps_grad", exp_logit_grads)


def _target_columns(local_target: torch.Tensor, columns: slice) -> torch.Tensor:
    """``[n]`` each row's target column within ``columns``, or -1 when its target lies elsewhere."""
    inside = (local_target >= columns.start) & (local_target < columns.stop)
    return torch.where(inside, local_target - columns.start, -1)


def _reduced_loss(running_max: torch.Tensor, sums: torch.Tensor, group: Group, vocab_size: int,
                  label_smoothing: float) -> Tuple[torch.Tensor, torch.Tensor, float]:
    """(loss ``[n]``, log-sum-exp ``[n]``, smoothing) from this rank's running max and sums, reduced over TP."""
    global_max = all_reduce(running_max.clone(), group, dist.ReduceOp.MAX)  # [n]
    sums[0].mul_(torch.exp(running_max - global_max).nan_to_num_(0.0))  # a rank of padding only: 0
    all_reduce(sums, group)
    log_sum_exp = global_max + sums[0].log()  # [n]
    loss = log_sum_exp - sums[1]
    smoothing = label_smoothing * vocab_size / (vocab_size - 1) if label_smoothing > 0 else 0.0
    if smoothing > 0:  # the other vocab_size - 1 entries share label_smoothing of the mass
        sum_log_probs = sums[2] - vocab_size * log_sum_exp  # sum over v of log p_v, [n]
        loss = (1.0 - smoothing) * loss - smoothing * sum_log_probs / vocab_size
    return loss, log_sum_exp, smoothing


class _FusedVocabParallelCrossEntropy(torch.autograd.Function):
    """The materialised logits' loss through :func:`logit_exps` and :func:`exp_logit_grads`' fused kernels.

    The forward reads the logits and keeps, instead of them, the softmax numerators ``exp(z - max)`` in
    the logits' dtype (no fp32 softmax copy in bf16); the backward scales those, so the vocabulary's
    exponentials are computed once per step, not twice (the fp32 bench step: the loss's backward 93 -> ~25 ms).
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, group: Group, vocab_size: int,
                label_smoothing: float) -> torch.Tensor:
        # logits [s, b, v/tp] (any float dtype), target [s, b] global ids
        local_vocab = logits.size(-1)
        start, valid = _local_vocab_range(local_vocab, group, vocab_size)
        flat = logits.reshape(-1, local_vocab)[:, :valid]  # [n, valid]
        local_target = target.reshape(-1) - start  # [n]
        n = flat.size(0)
        row_max = torch.full((n,), float("-inf"), dtype=torch.float32, device=logits.device)  # [n]
        sums = torch.zeros(3, n, dtype=torch.float32, device=logits.device)
        exps = flat[:, :0]  # [n, 0]: a rank of padding only folds nothing
        if valid:
            exps_of = logit_exps_kernel(logits.device.type, True)[1]
            row_max, sums, exps = exps_of(flat, _target_columns(local_target, slice(0, valid)), label_smoothing > 0)
        loss, log_sum_exp, smoothing = _reduced_loss(row_max, sums, group, vocab_size, label_smoothing)
        inverse_partition = torch.exp(row_max - log_sum_exp)  # [n]; 0 on a rank of padding only
        ctx.save_for_backward(exps, local_target, inverse_partition)
        ctx.settings = (vocab_size, smoothing, valid, logits.shape)
        return loss.view(target.shape)  # [s, b]

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        exps, local_target, inverse_partition = ctx.saved_tensors
        vocab_size, smoothing, valid, shape = ctx.settings
        if not valid:
            return exps.new_zeros(shape), None, None, None, None
        uniform = smoothing / vocab_size if smoothing > 0 else 0.0
        logit_grads = exp_logit_grads_kernel(exps.device.type, True)[1]
        grad = logit_grads(exps, inverse_partition, _target_columns(local_target, slice(0, valid)),
                           grad_loss.reshape(-1).float(), 1.0 - smoothing, uniform)  # [n, valid]
        if valid < shape[-1]:  # padding entries: 0
            grad = F.pad(grad, (0, shape[-1] - valid))
        return grad.view(shape), None, None, None, None


def _vocab_chunks(valid: int, chunk: int) -> List[slice]:
    """Slices covering this rank's real (non-padding) vocabulary entries ``[0, valid)``."""
    return [slice(first, min(first + chunk, valid)) for first in range(0, valid, chunk)]


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Output layer and vocab-parallel cross-entropy in one, a chunk of the vocabulary at a time.

    Forward keeps a running max and partition sum per token (an online log-sum-exp) and keeps only the
    log-sum-exp; backward recomputes each chunk's logits, turns them into the softmax minus the (smoothed)
    target, scales each row by its incoming gradient and multiplies back. The ``[tokens, v/tp]`` logits exist
    one ``[tokens, chunk]`` block at a time, in both passes; the TP collectives run once per pass, not per chunk.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], target: torch.Tensor,
                group: Group, vocab_size: int, label_smoothing: float, logit_scale: Optional[float],
                softcap: Optional[float], chunk: int, fused: bool) -> torch.Tensor:
        # hidden [n, h] (every TP rank's full token set), weight [v/tp, h], target [n] global ids
        start, valid = _local_vocab_range(weight.size(0), group, vocab_size)
        local_target = target - start  # [n]; outside [0, valid): another rank's entry
        n = hidden.size(0)
        operand = hidden.to(gemm_dtype(hidden))  # [n, h]; fp32 where half-precision GEMMs are slow
        partials = cross_entropy_partials_kernel(hidden.device.type, fused)[1]
        running_max = torch.full((n,), float("-inf"), dtype=torch.float32, device=hidden.device)  # [n]
        sums = torch.zeros(3, n, dtype=torch.float32, device=hidden.device)  # partition sum, target logit, sum
        for columns in _vocab_chunks(valid, chunk):
            raw = _chunk_product(operand, weight[columns], _slice(bias, columns))  # [n, c]
            running_max, sums = partials(raw, _target_columns(local_target, columns), running_max, sums,
                                         logit_scale, softcap, label_smoothing > 0)
        loss, log_sum_exp, smoothing = _reduced_loss(running_max, sums, group, vocab_size, label_smoothing)
        ctx.save_for_backward(hidden, weight, bias, local_target, log_sum_exp)
        ctx.settings = (vocab_size, smoothing, logit_scale, softcap, chunk, valid, fused)
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        hidden, weight, bias, local_target, log_sum_exp = ctx.saved_tensors
        vocab_size, smoothing, logit_scale, softcap, chunk, valid, fused = ctx.settings
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if need_hidden else None
        grad_weight = torch.zeros_like(weight) if need_weight else None  # [v/tp, h]; padding rows stay 0
        grad_bias = torch.zeros_like(bias) if need_bias else None
        operand = hidden.to(gemm_dtype(hidden))  # [n, h]
        logit_grads = cross_entropy_grads_kernel(hidden.device.type, fused)[1]
        uniform = smoothing / vocab_size if smoothing > 0 else 0.0
        grad_loss = grad_loss.float()  # [n]
        for columns in _vocab_chunks(valid, chunk):
            raw = _chunk_product(operand, weight[columns], _slice(bias, columns))  # [n, c]
            grad = logit_grads(raw, log_sum_exp, _target_columns(local_target, columns), grad_loss,
                               1.0 - smoothing, uniform, logit_scale, softcap)  # [n, c] in the operand dtype
            if need_hidden:  # a partial sum over the vocabulary shards, reduced by the caller's mapping
                grad_hidden.add_(grad.mm(weight[columns].to(operand.dtype)))
            if need_weight:
                grad_weight[columns] = grad.t().mm(operand)  # [c, h]
            if need_bias:
                grad_bias[columns] = grad.sum(0)
        grad_hidden = None if grad_hidden is None else grad_hidden.to(hidden.dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None, None, None, None, None


def _slice(bias: Optional[torch.Tensor], columns: slice) -> Optional[torch.Tensor]:
    return None if bias is None else bias[columns]


def linear_vocab_parallel_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                                        target: torch.Tensor, group: Group, vocab_size: Optional[int] = None,
                                        label_smoothing: float = 0.0, chunk: int = CROSS_ENTROPY_CHUNK,
                                        logit_scale: Optional[float] = None,
                                        softcap: Optional[float] = None, fused: bool = False) -> torch.Tensor:
    """Per-token loss ``[s, b]`` (fp32) of ``vocab_parallel_cross_entropy(linear(hidden, weight, bias), ...)``
    without the ``[s, b, v/tp]`` logits: ``chunk`` vocabulary entries at a time (``fused``:
    ``--cross-entropy-loss-fusion``).

    ``hidden`` ``[s, b, h]`` is the full sequence on every TP rank (``column_parallel_input`` gathers a
    sequence-parallel input and sums the gradient over the ranks); ``weight`` ``[v/tp, h]``;
    ``logit_scale`` multiplies and ``softcap`` caps the logits (``tanh(z / cap) * cap``), in that order.
    """
    full_vocab = weight.size(0) * group.size
    vocab_size = full_vocab if vocab_size is None else vocab_size
    if not 0 < vocab_size <= full_vocab:
        raise ValueError(f"vocab_size {vocab_size} must be in (0, {full_vocab}]")
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")
    seq, batch = target.shape
    loss = _ChunkedLinearCrossEntropy.apply(hidden.reshape(seq * batch, -1), weight, bias, target.reshape(-1),
                                            group, vocab_size, label_smoothing, logit_scale, softcap, chunk, fused)
    return loss.view(seq, batch)  # [s, b]

"""Cross-entropy over logits whose vocabulary is split across TP ranks.

Computed in fp32 without gathering the logits: the max, the partition sum and
the target logit are each reduced over the TP group. Vocabulary entries past
``vocab_size`` (padding added for divisibility) are excluded, so the loss does
not depend on the padded size and hence on the TP degree.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, group: Group, vocab_size: int,
                label_smoothing: float) -> torch.Tensor:
        # logits [s, b, v/tp] (any float dtype), target [s, b] global ids
        local_vocab = logits.size(-1)
        start = group.rank * local_vocab
        valid = max(0, min(local_vocab, vocab_size - start))  # non-padding entries held here
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
                                 vocab_size: Optional[int] = None, label_smoothing: float = 0.0) -> torch.Tensor:
    """Per-token loss ``[s, b]`` (fp32) for logits ``[s, b, v/tp]`` and targets ``[s, b]``.

    ``vocab_size``: the real vocabulary; entries past it are padding (default: none).
    The gradient has the dtype of the fp32 working copy and is cast back by autograd.
    """
    full_vocab = logits.size(-1) * group.size
    vocab_size = full_vocab if vocab_size is None else vocab_size
    if not 0 < vocab_size <= full_vocab:
        raise ValueError(f"vocab_size {vocab_size} must be in (0, {full_vocab}]")
    return _VocabParallelCrossEntropy.apply(logits, target, group, vocab_size, label_smoothing)

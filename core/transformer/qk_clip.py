"""QK-clip (MuonClip, as Kimi K2 trains; Megatron-core's ``--qk-clip``): keep attention logits bounded by rescaling
the query and key projections after each optimizer step.

Each training forward records, per attention head, the largest logit ``S = max q . k * scale`` over the keys the
head may attend (the mask of the step: causal, windows, documents; before any soft-cap or ALiBi bias)
(:func:`record_max_logits`). After the optimizer step the records are reduced over the ranks that saw other tokens
(DP x CP) and gathered over TP, and each head with ``S`` above ``--qk-clip-threshold`` (tau) gets
``eta = tau / S``:

* plain attention, per KV group (its heads share the key rows): ``eta`` of the group's largest ``S``; the query rows
  of the group's heads times ``eta ** alpha``, the key rows times ``eta ** (1 - alpha)``, values untouched, so the
  group's largest logit becomes tau (``--qk-clip-alpha``, 0.5 by default);
* MLA, per head: the no-rope query rows times ``eta ** alpha`` and the head's no-rope key rows (in the KV up
  projection) times ``eta ** (1 - alpha)``; the rope query rows times ``eta``, since the rope key is shared by
  every head and stays.

A projection bias scales with its rows. Each attention module gives its factors (``qk_clip_rows(eta per head,
alpha)``) as vectors over the projection's full rows (:func:`unit_factors`) cut to its TP rank's rows by the
weight's own ``TPShard`` (:func:`local_rows`); the optimizer applies them to its master weights
(core/optimizer/optimizer.py), so the result does not depend on the layout.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn

from core.parallel_state import Group
from core.tensor_parallel.mappings import all_gather_along_dim
from core.tensor_parallel.param_meta import param_meta

QUERY_BLOCK = 1024  # query rows per block of the recorded logits: memory b x block x keys per head


@torch.no_grad()
def max_logits(q: torch.Tensor, k: torch.Tensor, allowed: Optional[torch.Tensor], scale: float) -> torch.Tensor:
    """Each head's largest ``q . k * scale`` over the allowed pairs: q [b, n, sq, d], k [b, n, sk, d] -> [n]
    (``-inf`` for a head with none). ``allowed``: boolean [sq, sk] | [b, 1, sq, sk] | [n | b, n, sq, sk] (True
    = attend); None: causal over one sequence."""
    b, n, sq, _ = q.shape
    sk = k.size(2)
    if allowed is None:
        allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
    best = torch.full((n,), float("-inf"), device=q.device)
    for start in range(0, sq, QUERY_BLOCK):
        rows = slice(start, min(start + QUERY_BLOCK, sq))
        scores = torch.matmul(q[:, :, rows].float(), k.float().transpose(-1, -2)) * scale  # [b, n, rows, sk]
        mask = allowed[..., rows, :]
        scores = scores.masked_fill(~mask, float("-inf"))
        best = torch.maximum(best, scores.amax(dim=(0, 2, 3)))
    return best


def record_max_logits(owner: nn.Module, q: torch.Tensor, k: torch.Tensor, allowed: Optional[torch.Tensor],
                      scale: float, first_head: int = 0) -> None:
    """Fold this call's largest logits into ``owner.max_logits`` [local heads] (heads ``first_head``...: a
    Ulysses rank's share); the owner's heads' record of the step so far. Training forwards only."""
    found = max_logits(q, k, allowed, scale)
    record = getattr(owner, "max_logits", None)
    if record is None:
        record = _no_record(owner, q.device)
    part = record[first_head:first_head + found.numel()]
    part.copy_(torch.maximum(part, found))
    owner.max_logits = record


def unit_factors(eta: torch.Tensor, runs: Sequence[Tuple[int, float]]) -> torch.Tensor:
    """Row factors over a projection's full rows of one segment: per unit (a head or a KV group) with ``eta``
    [units], the unit's rows as ``(rows, exponent)`` runs, each row times ``eta ** exponent`` ->
    [units * sum(rows)]."""
    return torch.cat([torch.cat([value.pow(exponent).expand(rows) for rows, exponent in runs]) for value in eta])


def group_eta(eta_heads: torch.Tensor, groups: int) -> torch.Tensor:
    """A KV group's eta: its heads' smallest (their largest logit's), [heads] -> [groups]."""
    return eta_heads.view(groups, -1).amin(dim=1)


class QkClip:
    """The clipping of a run: finds the attention modules, reduces their records, and gives the optimizer the
    row factors to apply (:meth:`factors`)."""

    def __init__(self, models: Sequence[nn.Module], threshold: float, alpha: float, dp_cp: Group,
                 tp: Group) -> None:
        self.threshold, self.alpha, self.dp_cp, self.tp = threshold, alpha, dp_cp, tp
        self.modules = [m for model in models for m in model.modules() if hasattr(m, "qk_clip_rows")]
        self.last_max_logits: Optional[torch.Tensor] = None  # every module's heads, whole: for logs and tests

    @torch.no_grad()
    def factors(self) -> List[Tuple[nn.Parameter, torch.Tensor]]:
        """The (parameter, TP-local row factors) of every projection a clipped head changes; resets the records.
        Collective over DP x CP and TP (every rank calls it each step)."""
        if not self.modules:
            return []
        records = [self._record(m) for m in self.modules]  # [local heads] each
        local = torch.cat(records)
        if self.dp_cp.size > 1:
            dist.all_reduce(local, op=dist.ReduceOp.MAX, group=self.dp_cp.handle)
        whole = all_gather_along_dim(local.unsqueeze(0), 0, self.tp) if self.tp.size > 1 else local.unsqueeze(0)
        result, offset = [], 0
        maxima = []
        for module, record in zip(self.modules, records):
            heads = whole[:, offset:offset + record.numel()].reshape(-1)  # [heads]: TP ranks in order
            offset += record.numel()
            maxima.append(heads)
            eta = torch.where(heads > self.threshold, self.threshold / heads, torch.ones_like(heads))  # else 1
            if bool((eta < 1.0).any()):
                result += module.qk_clip_rows(eta, self.alpha)
            module.max_logits = None
        self.last_max_logits = torch.cat(maxima)
        return result

    def reset(self) -> None:
        """Forget the step's records (a skipped step)."""
        for module in self.modules:
            module.max_logits = None

    @staticmethod
    def _record(module: nn.Module) -> torch.Tensor:
        record = getattr(module, "max_logits", None)
        return (record if record is not None else _no_record(module, next(module.parameters()).device)).float()


def _no_record(owner: nn.Module, device: torch.device) -> torch.Tensor:
    """A record of no logits yet: ``-inf`` per local head of ``owner``."""
    return torch.full((owner.local_heads,), float("-inf"), device=device)


def local_rows(full: torch.Tensor, param: nn.Parameter, tp_rank: int, tp: int) -> torch.Tensor:
    """This TP rank's rows of a factor vector over ``param``'s full rows."""
    shard = param_meta(param).tp_shard
    if shard is None or tp == 1:
        return full
    return shard.shard(full, tp_rank, tp)

"""The top-k router of a mixture-of-experts layer (Megatron's TopKRouter, with MindSpeed's flags).

For every token the router scores the experts with a replicated ``[experts, hidden]``
linear (with a replicated ``[experts]`` bias when ``config.router_bias``: GPT-OSS) and picks
``moe_router_topk`` of them:

- softmax, default: top-k of the logits, then a softmax over those k (weights sum to one);
- softmax with ``--moe-router-pre-softmax``: softmax over all experts, then top-k
  (``--norm-topk-prob`` divides the k weights by their sum);
- sigmoid: sigmoid scores, top-k (``--norm-topk-prob`` as above);
- sparsemixer (Phi-3.5-MoE, eval mode): k rounds, each picking the best remaining logit and weighting it
  by its softmax over the experts within ``--moe-router-sparsemixer-eps`` of it (:func:`sparsemixer_route`).

Group-limited routing (``--moe-router-num-groups`` / ``--moe-router-group-topk``)
scores each group by the sum of its best ``topk / group_topk`` experts (or of its best
``--moe-router-group-score-topk``: 1 is the group's max), keeps the
best ``group_topk`` groups and takes the top-k within them. With
``--moe-router-enable-expert-bias`` a per-expert bias is added to the scores for
the selection only (the weights come from the unbiased scores); the bias moves by
``+-rate`` towards the mean token count after every optimizer step
(:func:`update_expert_biases`, called by the trainer with the counts of the step).

Losses (returned already times their coefficients, for the MoE layer to collect):
``load_balancing_loss`` (Switch's aux loss over the micro-batch, or per sequence with
``seq_aux_loss``) and ``z_loss`` (mean squared logsumexp of the logits).

The router reads the whole sequence ``[s, b, h]`` (under sequence parallelism the MoE
layer gathers the tokens first), so every TP rank routes the same tokens and the
router weight's gradient is complete on each rank. Under context parallelism it reads this CP rank's part
of the sequences: the losses take their token counts over every CP rank and return this rank's share.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import Group
from core.tensor_parallel.checkpoint import is_recomputing
from core.tensor_parallel.layers import linear, mark_param
from core.tensor_parallel.mappings import all_reduce
from core.transformer.config import TransformerConfig

ROUTER_DTYPES = {None: None, "fp32": torch.float32, "fp64": torch.float64}  # --moe-router-dtype
NORM_EPSILON = 1e-20  # added to the sum of the top-k weights before dividing (DeepSeek-V3, Megatron)


class RouterOutput(NamedTuple):
    """What the dispatcher and the MoE layer need from the router."""

    weights: torch.Tensor  # [tokens, topk] the chosen experts' weights, the input's dtype or --moe-router-dtype
    indices: torch.Tensor  # [tokens, topk] the chosen experts (int64)
    losses: Dict[str, torch.Tensor]  # name -> scalar loss, already times its coefficient


def group_limited_topk(scores: torch.Tensor, topk: int, num_groups: int, group_topk: int,
                       group_score_topk: Optional[int] = None) -> torch.Tensor:
    """Indices [tokens, topk] of the top-k scores within each token's best ``group_topk`` groups; a group's
    score is the sum of its best ``group_score_topk`` scores (None: ``topk // group_topk``)."""
    tokens, experts = scores.shape
    summed = group_score_topk if group_score_topk is not None else topk // group_topk
    grouped = scores.view(tokens, num_groups, experts // num_groups)  # [t, groups, experts per group]
    group_scores = grouped.topk(summed, dim=-1).values.sum(dim=-1)  # [t, groups]
    best_groups = group_scores.topk(group_topk, dim=-1).indices  # [t, group_topk]
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best_groups, True)
    expert_mask = group_mask.unsqueeze(-1).expand_as(grouped).reshape(tokens, experts)  # [t, experts]
    return scores.masked_fill(~expert_mask, float("-inf")).topk(topk, dim=-1).indices


def sparsemixer_route(logits: torch.Tensor, topk: int, eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """SparseMixer's deterministic routing: (weights [t, k], indices [t, k]) from ``logits`` [t, e].

    Round r picks the best logit m among the experts not picked yet; the experts s with
    (m - s) / max(|s|, m) > 2 eps are masked and the pick's weight is its softmax over the rest.
    """
    remaining = logits
    weights, indices = [], []
    for _ in range(topk):
        best, pick = remaining.max(dim=-1, keepdim=True)  # [t, 1]
        with torch.no_grad():
            far = (best - logits) / logits.abs().clamp(min=best) > 2 * eps  # [t, e]
        gates = torch.softmax(remaining.masked_fill(far, float("-inf")), dim=-1)  # [t, e]
        weights.append(gates.gather(1, pick))
        indices.append(pick)
        remaining = remaining.scatter(1, pick, float("-inf"))  # the pick leaves the next rounds
    return torch.cat(weights, dim=-1), torch.cat(indices, dim=-1)


def sequence_counts(routing_map: torch.Tensor, dim: int, cp: Optional[Group], dtype: torch.dtype) -> torch.Tensor:
    """Tokens routed to each expert, summed over ``dim`` of ``routing_map`` and over the CP ranks (``cp``: every
    rank holds a part of the same sequences): the counts one process would see. A statistic: no gradient."""
    counts = routing_map.sum(dim=dim).to(dtype)
    return all_reduce(counts, cp) if cp is not None else counts


def switch_load_balancing_loss(scores: torch.Tensor, routing_map: torch.Tensor, topk: int,
                               cp: Optional[Group] = None) -> torch.Tensor:
    """Switch/GShard aux loss: experts x sum_e f_e P_e, f_e = count_e / (tokens x topk) the share of the
    routed copies expert e got, P_e = mean_t p_te its mean score (Megatron's switch_load_balancing_loss_func).

    ``scores`` [tokens, experts]: each token's normalised scores over all experts;
    ``routing_map`` [tokens, experts]: the chosen experts. Equals 1 when routing is uniform.
    Under context parallelism (``cp``) the tokens are this rank's part of the sequences: the counts are the
    whole sequences', and the loss is this rank's share (linear in its scores), the CP ranks' shares summing
    to the loss of one process.
    """
    tokens, experts = scores.shape
    total = tokens * (cp.size if cp is not None else 1)
    counts = sequence_counts(routing_map, 0, cp, scores.dtype)  # [experts]
    return (scores.sum(dim=0) * counts).sum() * experts / (total * total * topk)


def sequence_load_balancing_loss(scores: torch.Tensor, routing_map: torch.Tensor, topk: int,
                                 local_length: int, cp: Optional[Group] = None) -> torch.Tensor:
    """The Switch loss per sequence, averaged over the batch (DeepSeek-V3's sequence-wise loss).

    ``scores``/``routing_map`` [s * b, experts] in the decoder's [s, b] token order, ``local_length`` = s; under
    context parallelism (``cp``) s is this rank's part of each sequence and the loss this rank's share, as in
    :func:`switch_load_balancing_loss`.
    """
    experts = scores.shape[-1]
    seq_length = local_length * (cp.size if cp is not None else 1)
    scores = scores.view(local_length, -1, experts)  # [s, b, e]
    counts = sequence_counts(routing_map.view(local_length, -1, experts), 0, cp, scores.dtype)  # [b, e]
    mean_scores = scores.sum(dim=0) / seq_length  # [b, e]
    per_sequence = (counts * experts / (seq_length * topk) * mean_scores).sum(dim=-1)  # [b]
    return per_sequence.mean()


def z_loss(logits: torch.Tensor, cp: Optional[Group] = None) -> torch.Tensor:
    """ST-MoE's router z-loss: mean over tokens of logsumexp(logits)^2 (under context parallelism, ``cp``, this
    rank's share of the mean over the whole sequences)."""
    total = logits.shape[0] * (cp.size if cp is not None else 1)
    return torch.logsumexp(logits, dim=-1).square().sum() / total


class TopKRouter(nn.Module):
    """Scores, top-k selection, weights and balancing losses of one MoE layer."""

    def __init__(self, config: TransformerConfig, hashed: bool = False) -> None:
        super().__init__()
        self.config = config
        self.dtype = ROUTER_DTYPES[config.moe_router_dtype]
        self.hashed = hashed  # --moe-hash-layers: the experts come from the token-id table ``tid2eid``
        experts = config.num_experts
        self.weight = mark_param(nn.Parameter(torch.empty(experts, config.hidden_size, dtype=config.params_dtype)),
                                 init="normal")
        nn.init.normal_(self.weight, std=config.init_method_std)
        self.bias = None
        if config.router_bias:  # replicated; it sees every token on every TP rank, so its gradient is complete
            self.bias = mark_param(nn.Parameter(torch.zeros(experts, dtype=config.params_dtype)), init="zeros")
        if hashed:  # [vocab, topk] expert ids per token id (a checkpoint's, or hash_table() when built)
            self.register_buffer("tid2eid", torch.zeros(config.vocab_size, config.moe_router_topk, dtype=torch.long))
        if config.moe_router_enable_expert_bias and not hashed:
            # fp32 buffers: the selection bias, and the tokens each expert got since the last update
            self.register_buffer("expert_bias", torch.zeros(experts, dtype=torch.float32))
            self.register_buffer("local_tokens_per_expert", torch.zeros(experts, dtype=torch.float32),
                                 persistent=False)
        else:
            self.expert_bias = None

    def forward(self, hidden: torch.Tensor, token_ids: Optional[torch.Tensor] = None,
                cp: Optional[Group] = None) -> RouterOutput:
        """``hidden`` [s, b, h] -> weights and indices [s * b, topk] in [s, b] token order (``token_ids`` [b, s]:
        a hash-routed layer's tokens; ``cp``: the context-parallel group when ``s`` is this rank's part of the
        sequences, for the losses' statistics)."""
        seq_length = hidden.shape[0]
        logits = self._logits(hidden.reshape(-1, hidden.shape[-1]))  # [t, e]
        picked = None
        if self.hashed:
            if token_ids is None:
                raise RuntimeError("a hash-routed MoE layer (--moe-hash-layers) needs the micro-batch's token ids")
            picked = self.tid2eid[token_ids.t().reshape(-1)]  # [t, k] in [s, b] order
        scores, weights, indices = self._route(logits, picked)
        routing_map = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, indices, True)  # [t, e]
        if self.expert_bias is not None and self.training and not is_recomputing():  # counted once per forward
            with torch.no_grad():
                self.local_tokens_per_expert += routing_map.sum(dim=0)
        losses = self._losses(logits, scores, routing_map, seq_length, cp)
        return RouterOutput(weights.to(self.dtype or hidden.dtype), indices, losses)

    def _logits(self, flat: torch.Tensor) -> torch.Tensor:
        """[t, e] in fp32 (the linear in the model dtype), or all in --moe-router-dtype."""
        if self.dtype is None:
            return linear(flat, self.weight, self.bias, defer_weight_grad=False).float()  # fp32 without bf16 units
        bias = self.bias.to(self.dtype) if self.bias is not None else None
        return linear(flat.to(self.dtype), self.weight.to(self.dtype), bias, defer_weight_grad=False)

    def _route(self, logits: torch.Tensor, picked: Optional[torch.Tensor] = None):
        """(normalised scores over all experts [t, e] for the aux loss, weights [t, k], indices [t, k]);
        ``picked`` [t, k]: the experts a hash-routed layer's table chose."""
        config = self.config
        if config.moe_router_score_function == "sparsemixer":
            weights, indices = sparsemixer_route(logits, config.moe_router_topk, config.moe_router_sparsemixer_eps)
            if config.moe_router_topk_scaling_factor is not None:
                weights = weights * config.moe_router_topk_scaling_factor
            return torch.softmax(logits, dim=-1), weights, indices
        if config.moe_router_score_function == "sigmoid":
            scores = torch.sigmoid(logits)
        elif config.moe_router_score_function == "sqrtsoftplus":  # DeepSeek-V4
            scores = torch.sqrt(F.softplus(logits))
        elif config.moe_router_pre_softmax:
            scores = torch.softmax(logits, dim=-1)
        else:
            scores = logits  # the top-k of the logits, softmaxed below
        if picked is not None:
            indices = picked
        else:  # Kolibri-1 ranks logits + expert bias; DeepSeek-V3 scores + expert bias
            indices = self._select(logits if config.moe_router_expert_bias_on_logits else scores)
        weights = scores.gather(1, indices)  # [t, k]
        if config.moe_router_score_function == "softmax" and not config.moe_router_pre_softmax:
            weights = torch.softmax(weights, dim=-1)
        elif config.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + NORM_EPSILON)
        if config.moe_router_topk_scaling_factor is not None:
            weights = weights * config.moe_router_topk_scaling_factor
        if config.moe_router_score_function in ("sigmoid", "sqrtsoftplus"):
            balance_scores = scores / (scores.sum(dim=-1, keepdim=True) + NORM_EPSILON)
        else:
            balance_scores = torch.softmax(logits, dim=-1)
        return balance_scores, weights, indices

    def _select(self, scores: torch.Tensor) -> torch.Tensor:
        """The chosen experts [t, k]: top-k of the scores (plus the expert bias), within the best groups; under
        --moe-router-expert-bias-on-logits ``scores`` are the logits."""
        config = self.config
        biased = scores.detach()
        if self.expert_bias is not None:
            biased = biased + self.expert_bias
        if config.moe_router_num_groups is not None:
            return group_limited_topk(biased, config.moe_router_topk, config.moe_router_num_groups,
                                      config.moe_router_group_topk, config.moe_router_group_score_topk)
        return biased.topk(config.moe_router_topk, dim=-1).indices

    def _losses(self, logits: torch.Tensor, scores: torch.Tensor, routing_map: torch.Tensor,
                seq_length: int, cp: Optional[Group]) -> Dict[str, torch.Tensor]:
        """Each loss times its coefficient; under context parallelism (``cp``) this rank's share."""
        config = self.config
        losses: Dict[str, torch.Tensor] = {}
        if config.moe_router_load_balancing_type != "none" and config.moe_aux_loss_coeff > 0:
            if config.moe_router_load_balancing_type == "seq_aux_loss":
                loss = sequence_load_balancing_loss(scores, routing_map, config.moe_router_topk, seq_length, cp)
            else:
                loss = switch_load_balancing_loss(scores, routing_map, config.moe_router_topk, cp)
            losses["load_balancing_loss"] = loss * config.moe_aux_loss_coeff
        if config.moe_z_loss_coeff is not None:
            losses["z_loss"] = z_loss(logits, cp) * config.moe_z_loss_coeff
        return losses

    @torch.no_grad()
    def update_expert_bias(self, group: Optional[Group] = None) -> None:
        """Move the bias by +-rate towards the mean count (counts summed over ``group``), then reset the counts."""
        counts = self.local_tokens_per_expert
        if group is not None:
            all_reduce(counts, group)
        offset = counts.mean() - counts  # under-used experts (positive offset) get a higher bias
        self.expert_bias += torch.sign(offset) * self.config.moe_router_bias_update_rate
        counts.zero_()


HASH_TABLE_MULTIPLIER = 7919  # spreads consecutive token ids over the experts


def hash_table(vocab_size: int, topk: int, experts: int) -> torch.Tensor:
    """A hash-routed layer's table for a model built from scratch: ``[vocab, topk]`` distinct experts per token
    id, ``(id * 7919 + j * (experts // topk)) mod experts`` (a checkpoint brings its own)."""
    start = torch.arange(vocab_size)[:, None] * HASH_TABLE_MULTIPLIER  # [v, 1]
    return (start + torch.arange(topk)[None, :] * (experts // topk)) % experts  # [v, k]


def fill_hash_tables(model: nn.Module) -> None:
    """Give every hash-routed router of ``model`` its from-scratch table (after materialisation zeroed it)."""
    for module in model.modules():
        if isinstance(module, TopKRouter) and module.hashed:
            cfg = module.config
            module.tid2eid.copy_(hash_table(cfg.vocab_size, cfg.moe_router_topk, cfg.num_experts))


def update_expert_biases(model: nn.Module, group: Optional[Group] = None) -> None:
    """The trainer's hook after each optimizer step: update every router's expert bias from the step's counts.

    ``group``: the ranks whose tokens count together (DP x CP: every TP rank routes the same tokens); None for one
    process.
    """
    for module in model.modules():
        if isinstance(module, TopKRouter) and module.expert_bias is not None:
            module.update_expert_bias(group)

"""The MoE layer that replaces a decoder layer's MLP: router, permutation, experts and shared experts.

At expert-parallel size 1 every rank holds every expert, each expert split over TP like the dense MLP.
Under sequence parallelism the layer input is ``[s/tp, b, h]``: the tokens are all-gathered once, the
router routes the whole sequence (the same on every TP rank) and the experts' partial outputs are
reduce-scattered back to ``[s/tp, b, h]`` (all-reduced without SP), one collective for all experts.

The shared expert (``--moe-shared-expert-intermediate-size`` / ``--n-shared-experts``) is a dense MLP
every token goes through, optionally times ``sigmoid(x . w)`` per token (``--shared-expert-gate``,
Qwen2-MoE). The router's losses reach the backward through :func:`aux_losses.attach_aux_loss` on the
layer's output, and the log through ``tracked_aux_losses``.

Under expert parallelism (``--expert-model-parallel-size``) the layer holds its EP rank's experts and
the dispatcher (``--moe-token-dispatcher-type``, token_dispatcher.py) moves the routed rows of the
TP-replicated tokens between the ranks of the EP group (the ranks of one TP rank). With
``--expert-tensor-parallel-size 1`` (and SP) whole experts spread over the TP x EP ranks instead: each TP
rank sends only the tokens of its own sequence shard, and their combined rows are its output.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import torch
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import linear, mark_param
from core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region, gather_from_sequence_parallel_region,
                                           reduce_from_tensor_model_parallel_region,
                                           reduce_scatter_to_sequence_parallel_region)
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout, in_sequence_order
from core.transformer.mlp import MLP
from core.transformer.moe.aux_losses import attach_aux_loss, track_aux_losses
from core.transformer.moe.experts import ExpertMLPs
from core.transformer.moe.router import TopKRouter
from core.transformer.moe.token_dispatcher import DISPATCHERS, capacity_keep_mask, expert_capacity


class MoELayer(nn.Module):
    """``[s(/tp), b, h] -> [s(/tp), b, h]``: the weighted sum of each token's top-k experts (+ shared expert)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config = config
        self.tp_group = state.tp_group
        self.router = TopKRouter(config, hashed=config.is_hash_routed(layer_number))
        self.experts = ExpertMLPs(config, state)
        self.shared_experts = None
        self.shared_expert_gate = None
        if config.moe_shared_expert_intermediate_size is not None:
            shared = dataclasses.replace(config, ffn_hidden_size=config.moe_shared_expert_intermediate_size)
            self.shared_experts = MLP(shared, state)
            if config.shared_expert_gate:  # replicated; fed a sequence shard under SP, hence a partial gradient
                self.shared_expert_gate = mark_param(
                    nn.Parameter(torch.empty(1, config.hidden_size, dtype=config.params_dtype)), init="normal",
                    grad_partial_over_tp=config.sequence_parallel)
                nn.init.normal_(self.shared_expert_gate, std=config.init_method_std)
        self.experts_split_over_tp = state.experts_split_over_tp
        self.dispatcher = DISPATCHERS[config.moe_token_dispatcher_type](config.num_experts, state.expert_group)
        self.tracked_aux_losses: Dict[str, torch.Tensor] = {}

    def forward(self, hidden: torch.Tensor, layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # layout: the micro-batch's token ids [b, s] (read by a hash-routed layer, --moe-hash-layers) and, under
        # context parallelism, where this rank's tokens sit in the sequences
        sequence_parallel = self.config.sequence_parallel
        # [s, b, h] on every TP rank; its gradient (router's, complete) is split back under SP
        tokens = (gather_from_sequence_parallel_region(hidden, self.tp_group, output_grad_is_partial=False)
                  if sequence_parallel else hidden)
        cp = layout.cp if layout is not None else None
        routed = self.router(tokens, layout.token_ids if layout is not None else None,
                             cp.group if cp is not None else None)
        keep = None
        if self.config.moe_expert_capacity_factor is not None:
            keep = self._capacity_keep_mask(routed.weights, routed.indices, layout)
        # the weights scale TP-partial expert outputs (or a TP rank's share of the tokens): their gradient is
        # all-reduced over TP
        weights = copy_to_tensor_model_parallel_region(routed.weights, self.tp_group)  # [t, k]
        if self.experts_split_over_tp:
            output = self._experts_split_over_tp(tokens, weights, routed.indices, keep)
        else:
            output = self._whole_experts(hidden, weights, routed.indices, keep)
        if self.shared_experts is not None:
            shared = self.shared_experts(hidden)  # [s(/tp), b, h]
            if self.shared_expert_gate is not None:
                shared = shared * torch.sigmoid(linear(hidden, self.shared_expert_gate, defer_weight_grad=False))
            if self.config.moe_shared_expert_scale is not None:  # Cohere2-MoE's average of routed and shared
                shared = shared * self.config.moe_shared_expert_scale
            output = output + shared
        self._track(routed.losses)
        return attach_aux_loss(output, sum(routed.losses.values())) if routed.losses else output

    def _capacity_keep_mask(self, weights: torch.Tensor, indices: torch.Tensor,
                            layout: Optional[SequenceLayout]) -> torch.Tensor:
        """[t, k] the (token, expert) pairs within --moe-expert-capacity-factor, for ``weights``/``indices`` [t, k]
        in [s, b] order. The capacity counts the whole sequences: under context parallelism every CP rank's
        choices are gathered in sequence order, the mask computed as one process would, and this rank's rows kept."""
        cfg = self.config
        cp = layout.cp if layout is not None else None
        if cp is not None:
            local_length, topk = layout.positions.numel(), indices.shape[1]
            weights, indices = (in_sequence_order(x.detach().view(local_length, -1, topk), 0, cp, layout.seq_len)
                                .flatten(0, 1) for x in (weights, indices))  # [S * b, k]
        capacity = expert_capacity(indices.shape[0], cfg.moe_router_topk, cfg.num_experts,
                                   cfg.moe_expert_capacity_factor)
        keep = capacity_keep_mask(weights, indices, cfg.num_experts, capacity)  # [t, k]
        if cp is not None:  # this rank's tokens, in its [s/cp, b] order
            keep = keep.view(layout.seq_len, -1, keep.shape[1]).index_select(0, layout.positions).flatten(0, 1)
        return keep

    def _experts_split_over_tp(self, tokens: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor,
                               keep: Optional[torch.Tensor]) -> torch.Tensor:
        """Every TP rank runs its FFN shard of the experts for all tokens ``[s, b, h]``; one reduction over TP."""
        flat = copy_to_tensor_model_parallel_region(tokens.reshape(-1, tokens.shape[-1]), self.tp_group)  # [t, h]
        combined = self._dispatch_and_combine(flat, weights, indices, keep).view_as(tokens)  # [s, b, h] partial
        if self.config.sequence_parallel:
            return reduce_scatter_to_sequence_parallel_region(combined, self.tp_group)  # [s/tp, b, h]
        return reduce_from_tensor_model_parallel_region(combined, self.tp_group)  # [s, b, h]

    def _whole_experts(self, hidden: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor,
                       keep: Optional[torch.Tensor]) -> torch.Tensor:
        """--expert-tensor-parallel-size 1 (with SP): each TP rank dispatches the tokens of its sequence shard
        ``hidden`` [s/tp, b, h] (rows ``[rank * n, (rank + 1) * n)`` of the routed tokens) to whole experts spread
        over TP x EP; the combined rows are its output, complete."""
        flat = hidden.reshape(-1, hidden.shape[-1])  # [n, h], n = t / tp
        mine = slice(self.tp_group.rank * flat.shape[0], (self.tp_group.rank + 1) * flat.shape[0])
        keep = keep[mine] if keep is not None else None
        return self._dispatch_and_combine(flat, weights[mine], indices[mine], keep).view_as(hidden)

    def _dispatch_and_combine(self, flat: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor,
                              keep: Optional[torch.Tensor]) -> torch.Tensor:
        """The routed experts' weighted sum for the tokens ``flat`` [t, h] (``weights``/``indices`` [t, k])."""
        if self.config.moe_apply_probs_on_input:  # top-1 (Llama 4): the expert reads its token times the weight
            flat, weights = (flat * weights).to(flat.dtype), torch.ones_like(weights)  # [t, h], [t, 1]
        rows, tokens_per_expert = self.dispatcher.dispatch(flat, weights, indices, keep)  # [n, h]
        return self.dispatcher.combine(self.experts(rows, tokens_per_expert))  # [t, h]

    def _track(self, losses: Dict[str, torch.Tensor]) -> None:
        """Add this training forward's loss values to ``tracked_aux_losses`` (for the log)."""
        if self.training:
            track_aux_losses(self.tracked_aux_losses, losses)

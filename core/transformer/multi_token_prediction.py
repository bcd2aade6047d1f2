"""Multi-token prediction (DeepSeek-V3's MTP; Megatron's ``--mtp-num-layers``, ``--mtp-loss-scaling-factor``).

D modules sit on the last pipeline stage, after the decoder. Module k (1..D) reads the hidden
states ``h^{k-1}`` (k = 1: the decoder's output after its final norm, as Megatron feeds it; then
module k-1's output) and the embeddings of the input tokens shifted left by k, and computes::

    x   = eh_proj(cat[enorm(embedding(tokens << k)), hnorm(h^{k-1})])   # [s, b, 2h] -> [s, b, h]
    h^k = final_layernorm(transformer_layer(x))                          # its own final norm

The shared output layer turns ``h^k`` into logits that predict the tokens shifted by k + 1, i.e.
the labels shifted left by k. Shifting fills the tail with token 0; the loss mask, shifted the
same way, is 0 there (Megatron's ``roll_tensor``). Under context parallelism the shift is along the whole
sequence: each CP rank gathers the token ids, labels and mask (data, no activations), shifts them in sequence
order and keeps its positions; the module means run over every CP rank's tokens (the task's ``mean``).
The transformer layer is built as the last decoder layer is (Megatron builds it from the decoder's last
layer spec): an MoE layer when that one is, with the same attention variant. The rotary embedding is the
decoder's (positions are not shifted). The MTP loss added to the LM loss is ``scaling / D * sum_k mean_k``
where ``mean_k`` is module k's cross-entropy averaged over its shifted mask; each ``mean_k`` is logged apart as
``mtp_k loss`` (Megatron's names).

Under hyper-connections (DeepSeek-V4) module k reads the streams ``H^{k-1}`` ``[s, b, n h]`` (k = 1: the decoder's,
before its head), each stream normed by ``hnorm`` and projected with the embeddings (eh_proj's columns are V4's
``e_proj`` and ``h_proj``), runs its layer over the streams, and its own :class:`HyperHead` then
``final_layernorm`` give the hidden state its loss reads; module k + 1 reads its streams. Its layer's attention is
a sliding-window layer (``TransformerConfig.mtp_attention_kind``), as V4's.

Tensor parallelism: eh_proj is a column-parallel linear whose output is gathered over TP (and
scattered back over the sequence under sequence parallelism), as Megatron's; the norms are
replicated (partial gradients under SP). With ``--recompute-granularity full`` the transformer layer
of each module is recomputed in the backward, as the decoder's layers are.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import checkpoint
from core.tensor_parallel.layers import ColumnParallelLinear
from core.tensor_parallel.mappings import scatter_to_sequence_parallel_region
from core.transformer.block import TransformerLayer, hidden_norm
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import ContextParallel, SequenceLayout, in_sequence_order
from core.transformer.hyper_connection import HyperHead, split_streams

# hidden [s(/tp), b, h] -> per-token loss [b, s] against labels [b, s]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# token ids [b, s] -> embeddings [s(/tp), b, h]
EmbedFn = Callable[[torch.Tensor], torch.Tensor]
# values [b, s], mask [b, s] -> the masked mean (a scalar)
MeanFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def roll_left(tensor: torch.Tensor, cp: Optional[ContextParallel] = None) -> torch.Tensor:
    """``[b, s]`` shifted left by one position along the sequence, the last position set to 0. Under context
    parallelism (``cp``) ``tensor`` holds this rank's positions of the sequence and so does the result."""
    if cp is None:
        rolled = torch.roll(tensor, shifts=-1, dims=-1)
        rolled[..., -1] = 0
        return rolled
    seq_len = tensor.size(1) * cp.group.size
    whole = roll_left(in_sequence_order(tensor, 1, cp, seq_len))  # [b, S] in sequence order
    return whole.index_select(1, cp.rank_positions(seq_len, cp.group.rank, tensor.device))


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``values`` over ``mask`` (both [b, s]); 0 where the mask is empty."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


class MultiTokenPredictionLayer(nn.Module):
    """One MTP module: ``(h^{k-1}, embeddings of tokens << k) -> h^k``, all ``[s(/tp), b, h]``."""

    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        self.config, self.tp_group = config, state.tp_group
        h = config.hidden_size
        self.enorm = hidden_norm(config)
        self.hnorm = hidden_norm(config)
        # [s(/tp), b, 2h] -> [s, b, h/tp], gathered to [s, b, h]; weight [h, 2h] over [embedding; hidden] inputs
        self.eh_proj = ColumnParallelLinear(2 * h, h, group=state.tp_group, bias=False, gather_output=True,
                                            sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)
        self.transformer_layer = TransformerLayer(config, state, config.num_layers - 1, config.mtp_attention_kind)
        self.hc_head = HyperHead(config) if config.enable_mhc_connections else None
        self.final_layernorm = hidden_norm(config)

    def forward(self, hidden: torch.Tensor, embedded: torch.Tensor, rotary: object,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        """What module k + 1 reads: the normed hidden state [s(/tp), b, h], or under hyper-connections the streams
        [s(/tp), b, n h] before this module's head (:meth:`head` gives the hidden state its loss reads)."""
        # hidden [s, b, h] or the streams [s, b, n h]; embedded [s, b, h] ([s/tp, ...] under sequence parallelism)
        projected = self._project(hidden, self.enorm(embedded))  # [s, b, h | n h] on every TP rank
        if self.config.sequence_parallel:
            projected = scatter_to_sequence_parallel_region(projected, self.tp_group)  # [s/tp, b, ...]
        if self.config.recompute_granularity == "full" and self.training and torch.is_grad_enabled():
            output = checkpoint(self.transformer_layer, projected, rotary, layout)  # as Megatron's
        else:
            output = self.transformer_layer(projected, rotary, layout)
        return output if self.hc_head is not None else self.final_layernorm(output)

    def head(self, output: torch.Tensor) -> torch.Tensor:
        """The hidden state [s(/tp), b, h] the module's loss reads from its :meth:`forward` output."""
        return self.final_layernorm(self.hc_head(output)) if self.hc_head is not None else output

    def _project(self, hidden: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """eh_proj of [normed embeddings; hnorm(hidden)]: [s, b, h], or per hyper-connection stream [s, b, n h]."""
        if self.hc_head is None:
            return self.eh_proj(torch.cat([embeds, self.hnorm(hidden)], dim=-1))  # [s(/tp), b, 2h] -> [s, b, h]
        streams = split_streams(hidden, self.hc_head.streams)  # [s(/tp), b, n, h]
        s, b, n, h = streams.shape
        combined = torch.cat([embeds.unsqueeze(2).expand(s, b, n, h), self.hnorm(streams)], dim=-1)  # [.., n, 2h]
        projected = self.eh_proj(combined.flatten(1, 2))  # [s, b n, h]
        return projected.reshape(projected.size(0), b, n * h)


class MultiTokenPredictionBlock(nn.Module):
    """The D MTP modules (``mtp.layers.{k}``, k from 0) of the last pipeline stage."""

    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MultiTokenPredictionLayer(config, state) for _ in range(config.mtp_num_layers))
        self.last_losses: List[torch.Tensor] = []  # the last forward's per-token losses (collect_mtp_losses)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, hidden: torch.Tensor, rotary: object,
                embed: EmbedFn, per_token_loss: LossFn, layout: Optional[SequenceLayout] = None) -> List[torch.Tensor]:
        """Per-token losses ``[b, s]`` of modules 1..D against ``labels`` shifted left by 1..D.

        ``input_ids``, ``labels`` ``[b, s]``; ``hidden`` ``[s(/tp), b, h]`` is the decoder's normed output (under
        hyper-connections its streams ``[s(/tp), b, n h]`` before the head).
        """
        losses = []
        cp = layout.cp if layout is not None else None
        for layer in self.layers:
            input_ids, labels = roll_left(input_ids, cp), roll_left(labels, cp)
            hidden = layer(hidden, embed(input_ids), rotary, layout)
            losses.append(per_token_loss(layer.head(hidden), labels))
        return losses


def collect_mtp_losses(model: nn.Module) -> List[torch.Tensor]:
    """The per-token losses ``[b, s]`` of the MTP modules in ``model``'s last forward (empty without MTP)."""
    for module in model.modules():
        if isinstance(module, MultiTokenPredictionBlock):
            return module.last_losses
    return []


def mtp_loss(per_token_losses: Sequence[torch.Tensor], loss_mask: torch.Tensor, scaling_factor: float,
             cp: Optional[ContextParallel] = None,
             mean: MeanFn = masked_mean) -> Tuple[torch.Tensor, List[torch.Tensor]]:
    """``(scaling / D * sum_k mean_k, [mean_1 .. mean_D])``; ``mean_k`` over ``loss_mask`` ``[b, s]`` shifted by k
    (along the whole sequence under context parallelism, ``cp``; ``mean`` then sums over every CP rank)."""
    means = []
    for per_token in per_token_losses:  # [b, s] each
        loss_mask = roll_left(loss_mask, cp)
        means.append(mean(per_token, loss_mask))
    return scaling_factor / len(means) * torch.stack(means).sum(), means


def mtp_loss_names(mtp_num_layers: int) -> Tuple[str, ...]:
    """The logged names of the modules' losses (Megatron's ``mtp_1 loss``, ...)."""
    return tuple(f"mtp_{k} loss" for k in range(1, mtp_num_layers + 1))

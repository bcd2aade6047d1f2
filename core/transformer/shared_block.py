"""Zamba's shared blocks and the 'Z' layers that run them (``--hybrid-override-pattern`` 'Z').

A shared block is one attention and one gated MLP whose weights serve several depths: 'Z' layer number
``d`` among the 'Z' layers runs block ``d mod --num-shared-blocks`` (Zamba2's ``num_mem_blocks``). The
block reads the hidden state concatenated with the word embeddings (``2h`` wide, hence attention heads of
``2h / heads`` channels) and its output, through a ``h x h`` projection of the layer's own, is added to the
input of the layer's Mamba mixer::

    shared = mlp(norm2(attn(norm1([x; e]))))             no residual inside the block
    out    = x + mamba(norm(x + proj(shared)))

With ``--shared-block-adapter-rank r`` every 'Z' layer adds its own low-rank adapter (``up(down(.))``,
Zamba2's per-depth LoRA-like adapters, trained with the model) to the block's MLP input projection, and with
``--shared-block-attention-adapters`` to its q, k and v projections. Each stage's ``TransformerBlock`` holds
the blocks its 'Z' layers run, every copy under the same name (``decoder.shared_blocks.{k}``); pipeline
stages and virtual chunks holding the same block sum its gradients (``sum_shared_block_grads``), the
copies stay equal, and only the copy on the chunk of the block's first 'Z' layer counts in the grad norm.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from core.parallel_state import Group, ParallelState
from core.tensor_parallel.mappings import all_reduce, gather_objects
from core.tensor_parallel.layers import ColumnParallelLinear, ReplicatedLinear
from core.tensor_parallel.param_meta import Segment, update_meta
from core.transformer.attention import SelfAttention
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mlp import MLP

SHARED_BLOCKS_PREFIX = "decoder.shared_blocks."


def is_shared_block_param(name: str) -> bool:
    """A parameter of a shared block (held by every chunk whose 'Z' layers run that block)."""
    return name.startswith(SHARED_BLOCKS_PREFIX)


def replicated(linear: ReplicatedLinear, config: TransformerConfig) -> ReplicatedLinear:
    """A linear whole on every TP rank; fed a sequence shard under SP, hence a partial gradient there."""
    update_meta(linear.weight, grad_partial_over_tp=config.sequence_parallel)
    return linear


class LowRankAdapter(nn.Module):
    """``up(down(x))``: ``down`` ``[r, in]`` whole on every TP rank, ``up`` ``[out, r]`` split over TP in
    ``segments`` like the projection it adds to (so its local output lines up with that projection's)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, input_size: int, rank: int,
                 segments: Sequence[Segment]) -> None:
        super().__init__()
        self.down = replicated(ReplicatedLinear(input_size, rank, False, config.params_dtype), config)
        self.up = ColumnParallelLinear(rank, sum(segment.size for segment in segments), group=state.tp_group,
                                       bias=False, sequence_parallel=config.sequence_parallel,
                                       segments=segments, dtype=config.params_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x [s(/tp), b, in] -> [s, b, out/tp] (the rank-r activations are what SP all-gathers)
        return self.up(self.down(x))


class SharedBlock(nn.Module):
    """One shared block: attention over ``[hidden; embeddings]`` (``2h`` in, ``h`` out) and a gated MLP.

    ``norm(width)``: the model's norm over ``width`` channels (``block.hidden_norm``); ``layer_number``: the first
    'Z' layer that runs the block (the attention's per-layer settings are that layer's)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int,
                 norm: Callable[[int], nn.Module]) -> None:
        super().__init__()
        width = 2 * config.hidden_size
        self.input_layernorm = norm(width)
        self.self_attention = SelfAttention(config, state, layer_number, input_size=width)
        self.pre_mlp_layernorm = norm(config.hidden_size)
        self.mlp = MLP(config, state)

    def forward(self, hidden: torch.Tensor, embeds: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout], adapters: "SharedBlockMambaAdapters") -> torch.Tensor:
        # hidden, embeds [s(/tp), b, h] -> [s(/tp), b, h]
        normed = self.input_layernorm(torch.cat([hidden, embeds.to(hidden.dtype)], dim=-1))  # [s(/tp), b, 2h]
        attended = self.self_attention(normed, rotary, layout, qkv_delta=adapters.qkv_delta(normed))
        normed = self.pre_mlp_layernorm(attended)
        return self.mlp(normed, fc1_delta=adapters.fc1_delta(normed))


class SharedBlockMambaAdapters(nn.Module):
    """A 'Z' layer's own parts around its shared block: the output projection and the adapters."""

    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        h, rank = config.hidden_size, config.shared_block_adapter_rank
        self.proj = replicated(ReplicatedLinear(h, h, False, config.params_dtype), config)  # Zamba2's ``linear``
        self.mlp_adapter = self.q_adapter = self.k_adapter = self.v_adapter = None
        if rank is not None:
            ffn = config.ffn_hidden_size
            fc1 = (Segment(ffn), Segment(ffn)) if config.gated_linear_unit else (Segment(ffn),)  # [gate; up]
            self.mlp_adapter = LowRankAdapter(config, state, h, rank, fc1)
        if config.shared_block_attention_adapters:
            heads, groups, hn = config.num_attention_heads, config.num_query_groups, config.kv_channels
            self.q_adapter, self.k_adapter, self.v_adapter = (
                LowRankAdapter(config, state, 2 * h, rank, (Segment(count, hn),)) for count in (heads, groups, groups))

    def qkv_delta(self, normed: torch.Tensor) -> Optional[torch.Tensor]:
        """What the attention adapters add to the local ``[q; k; v]`` projection ``[s, b, (np + 2 ng) hn]``."""
        if self.q_adapter is None:
            return None
        return torch.cat([adapter(normed) for adapter in (self.q_adapter, self.k_adapter, self.v_adapter)], dim=-1)

    def fc1_delta(self, normed: torch.Tensor) -> Optional[torch.Tensor]:
        """What the MLP adapter adds to the local ``[gate; up]`` projection ``[s, b, 2 ffn/tp]``."""
        return self.mlp_adapter(normed) if self.mlp_adapter is not None else None


def mark_block_copy(block: SharedBlock, counted: bool) -> SharedBlock:
    """Mark a chunk's copy of a shared block: replicated over pipeline chunks, and counted in the gradient norm
    only on the chunk of the block's first 'Z' layer (``counted``)."""
    for param in block.parameters():
        update_meta(param, replicated_over_pipeline=True, excluded_from_grad_norm=not counted)
    return block


def sum_shared_block_grads(models: Sequence[nn.Module], state: ParallelState) -> None:
    """Every copy of a shared block gets the sum of all copies' gradients (``main_grad``): over this rank's
    virtual chunks, then over the pipeline group.

    Every pipeline rank takes part, holding the block or not: the trained parameters of every block travel as
    one flat tensor, zero where a rank holds nothing, laid out by a catalog of (block, name, size) that the
    pipeline ranks agree on once (a model transform such as LoRA may have changed what a block holds)."""
    config = getattr(models[0], "config", None) if models else None
    if config is None or not config.has_shared_blocks:
        return
    copies = [(key, block) for model in models if model.decoder.shared_blocks is not None
              for key, block in model.decoder.shared_blocks.items()]
    pp = state.pp_group
    if pp.size == 1 and len({key for key, _ in copies}) == len(copies):  # one copy of each block
        return
    offsets, total, dtype = _catalog(models[0], copies, pp)
    device = next(p.device for model in models for p in model.parameters())
    flat = torch.zeros(total, dtype=dtype, device=device)
    for key, block in copies:
        for name, param in _trained(block):
            start, size = offsets[(key, name)]
            flat[start:start + size] += param.main_grad.reshape(-1).to(dtype)
    if pp.size > 1:
        all_reduce(flat, pp)
    for key, block in copies:
        for name, param in _trained(block):
            start, size = offsets[(key, name)]
            param.main_grad.copy_(flat[start:start + size].view_as(param.main_grad))


def _trained(block: nn.Module) -> List[Tuple[str, nn.Parameter]]:
    return [(name, param) for name, param in block.named_parameters() if param.requires_grad]


def _catalog(model: nn.Module, copies: Sequence[Tuple[str, nn.Module]],
             pp: Group) -> Tuple[Dict[Tuple[str, str], Tuple[int, int]], int, torch.dtype]:
    """Where each (block, parameter) lies in the flat gradient tensor, its total size and dtype; gathered over
    the pipeline group on the first call and kept on ``model``."""
    cached = getattr(model, "_shared_block_catalog", None)
    if cached is not None:
        return cached
    mine = {key: [(name, param.numel(), str(param.main_grad.dtype)) for name, param in _trained(block)]
            for key, block in copies}
    blocks: Dict[str, list] = {}
    for held in gather_objects(mine, pp):
        for key, entries in held.items():
            blocks.setdefault(key, entries)
    offsets, total, dtypes = {}, 0, set()
    for key in sorted(blocks, key=int):
        for name, size, dtype in blocks[key]:
            offsets[(key, name)] = (total, size)
            total += size
            dtypes.add(dtype)
    dtype = getattr(torch, dtypes.pop().replace("torch.", "")) if len(dtypes) == 1 else torch.float32
    model._shared_block_catalog = (offsets, total, dtype)
    return model._shared_block_catalog

"""Transformer layers and the stack of them a pipeline stage holds.

Layers sit in a ``ModuleDict`` keyed by their global layer number, so a
parameter's name (``decoder.layers.7.mlp.linear_fc1.weight``) is the same
whatever the pipeline layout. Noop layers are parameterless identities.
"""
from __future__ import annotations

import functools
from typing import Iterable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import checkpoint, inside_checkpoint
from core.tensor_parallel.layers import mark_param
from core.tensor_parallel.random import get_rng_tracker
from core.transformer.attention import SelfAttention
from core.transformer.config import (ATTENTION_MIXER, GDN_MIXER, KDA_MIXER, LIGHTNING_MIXER, MLSTM_MIXER, MOE_MLP,
                                     PARALLEL_HYBRID_MIXER, RG_LRU_MIXER, RWKV_CHANNEL_MIX, RWKV_TIME_MIX,
                                     SHARED_BLOCK_MAMBA_MIXER, SHORT_CONV_MIXER, TransformerConfig)
from core.transformer.context_parallel import SequenceLayout
from core.transformer.compressed_attention import CompressedAttention
from core.transformer.gated_delta_net import GatedDeltaNet
from core.transformer.hyper_connection import HyperConnection, HyperHead
from core.transformer.kimi_delta_attention import KimiDeltaAttention
from core.transformer.lightning_attention import LightningAttention
from core.transformer.mamba_mixer import MambaMixer
from core.transformer.mla import MultiLatentAttention
from core.transformer.mlp import MLP
from core.transformer.mlstm import MLstm
from core.transformer.moe.moe_layer import MoELayer
from core.transformer.norms import RMSNorm, build_norm
from core.transformer.parallel_hybrid import MambaAndAttention
from core.transformer.rg_lru import RecurrentBlock
from core.transformer.rwkv import RwkvChannelMix, RwkvTimeMix
from core.transformer.shared_block import SharedBlock, SharedBlockMambaAdapters, mark_block_copy
from core.transformer.short_conv import ShortConv
from core.transformer.swap_attention import (get_activation_swapper, recomputes_mlp, swapped_attributes,
                                          swapping)


def hidden_dropout(x: torch.Tensor, p: float, training: bool, sequence_parallel: bool) -> torch.Tensor:
    """Dropout on the residual stream; per-TP-rank RNG when the stream is sequence-sharded."""
    if not training or p == 0.0:
        return x
    if sequence_parallel:
        with get_rng_tracker().fork():
            return F.dropout(x, p, training=True)
    return F.dropout(x, p, training=True)


def recompute_groups(num_layers: int, granularity: Optional[str], method: Optional[str],
                     recompute_num_layers: Optional[int]) -> List[Tuple[range, bool]]:
    """Consecutive runs of a chunk's layer positions and whether each run is checkpointed as one unit.

    Megatron's full recompute: ``uniform`` checkpoints groups of
    ``recompute_num_layers`` layers (the last group may be shorter); ``block``
    checkpoints the first ``recompute_num_layers`` layers one by one and runs
    the rest plainly. Any other granularity checkpoints no whole layer.
    """
    if granularity != "full":
        return [(range(num_layers), False)]
    if method is None or recompute_num_layers is None:
        raise ValueError("--recompute-granularity full needs --recompute-method uniform|block and "
                         "--recompute-num-layers N (as in Megatron)")
    step = recompute_num_layers
    if method == "uniform":
        return [(range(i, min(i + step, num_layers)), True) for i in range(0, num_layers, step)]
    if method == "block":
        first = min(step, num_layers)
        return [(range(i, i + 1), True) for i in range(first)] + [(range(first, num_layers), False)]
    raise ValueError(f"--recompute-method {method!r} is not one of ('uniform', 'block')")


def _run_layers(layers: List[nn.Module], hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None, embeds: Optional[torch.Tensor] = None,
                shared_blocks: Optional[nn.ModuleDict] = None) -> torch.Tensor:
    """``layers`` in turn; a 'Z' layer also reads the word embeddings ``embeds`` and runs its shared block."""
    for layer in layers:
        if isinstance(layer, SharedBlockMambaLayer):
            hidden = layer(hidden, rotary, layout, embeds, shared_blocks[str(layer.block_index)])
        else:
            hidden = layer(hidden, rotary, layout)
    return hidden


def hidden_norm(config: TransformerConfig, width: Optional[int] = None) -> nn.Module:
    """A norm over the hidden size (``--normalization``), or over ``width`` channels; partial gradients over TP
    under SP."""
    return build_norm(config.normalization, width or config.hidden_size, config.norm_epsilon, config.sequence_parallel,
                      dtype=config.params_dtype, offset=config.apply_layernorm_1p,
                      parametric=not config.non_parametric_norm, bias=config.layernorm_bias,
                      fused=config.use_fused_rmsnorm)


def compute_dtype(module: nn.Module, default: torch.dtype) -> torch.dtype:
    """The dtype of ``module``'s first weight in this forward (under FSDP's mixed precision, its param_dtype).

    Read through the ``weight`` attributes: FSDP1 swaps its unsharded low-precision
    views in as plain tensors during forward, which ``parameters()`` does not list.
    """
    for sub in module.modules():
        weight = getattr(sub, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.is_floating_point():
            return weight.dtype
    return default


def to_compute_dtype(x: torch.Tensor, module: nn.Module, config: TransformerConfig) -> torch.Tensor:
    """With ``--fp32-residual-connection``: a branch input cast from the fp32 stream to ``module``'s dtype."""
    if not config.fp32_residual_connection:
        return x
    return x.to(compute_dtype(module, config.params_dtype))


def residual_skip(config: TransformerConfig, hidden: torch.Tensor, normed: torch.Tensor) -> torch.Tensor:
    """What a residual add keeps of ``hidden``, whose branch reads ``normed``: ``hidden`` itself, or ``normed``
    under --apply-residual-connection-post-layernorm, times --residual-alpha when given (MiniMax)."""
    skip = normed.to(hidden.dtype) if config.apply_residual_connection_post_layernorm else hidden
    return skip * config.residual_alpha if config.residual_alpha is not None else skip


class TransformerLayer(nn.Module):
    """Pre-norm decoder layer: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``.

    With ``--post-norm`` the attention and MLP outputs are normed again before
    the residual add (Gemma2's sandwich): ``x + norm(attn(norm(x)))``.
    With ``--post-norm-only`` only those output norms remain (Olmo2): ``x + norm(attn(x))``.
    ``--residual-multiplier`` scales each branch output before its add (Granite); with
    ``--apply-residual-connection-post-layernorm`` each add keeps the normed input instead of ``x``
    and ``--residual-alpha`` scales what it keeps (MiniMax: ``a n + b attn(n)``, ``n = norm(x)``); ``--layer-scalar``
    multiplies the layer's output, residual included, by a learned scalar (Gemma4). With
    ``--no-first-input-layernorm`` layer 0 has no norm before attention (ModernBERT).
    With ``--parallel-residual`` attention and MLP both read the layer input:
    ``x + attn(norm1(x)) + mlp(norm2(x))`` (GPT-NeoX), or with one norm
    ``x + attn(norm(x)) + mlp(norm(x))`` (``--parallel-residual-shared-norm``: GPT-J, Phi, Cohere).
    """

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0,
                 attention_kind: Optional[str] = None) -> None:
        # attention_kind: DeepSeek-V4's attention letter when not the pattern's (an MTP module's layer)
        super().__init__()
        self.config = config
        mixer, mlp = config.layer_parts(layer_number)
        pre_norm, output_norm = config.layer_norms(layer_number)
        first_without_norm = layer_number == 0 and not config.first_input_layernorm  # ModernBERT
        self.input_layernorm = self.self_attention = self.post_self_attn_layernorm = None
        if mixer is not None:  # the token mixer: attention, a linear mixer ('G', 'K', 'L'), Mamba + attention ('H')
            self.input_layernorm = hidden_norm(config) if pre_norm and not first_without_norm else nn.Identity()
            self.self_attention = build_mixer(mixer, config, state, layer_number, attention_kind)
            self.post_self_attn_layernorm = hidden_norm(config) if output_norm else None
        self.pre_mlp_layernorm = self.mlp = self.post_mlp_layernorm = None
        if mlp is not None:  # absent in a hybrid pattern's mixer-only layers ('*', 'G')
            shared_norm = config.parallel_residual_shared_norm
            self.pre_mlp_layernorm = hidden_norm(config) if pre_norm and not shared_norm else nn.Identity()
            self.mlp = MoELayer(config, state, layer_number) if mlp == MOE_MLP else MLP(config, state)
            moe_norm = config.moe_output_norm and mlp == MOE_MLP  # A.X-K1: on the MoE layers' outputs only
            self.post_mlp_layernorm = hidden_norm(config) if output_norm or moe_norm else None
        # --swap-attention: the sub-modules whose saved activations go to host memory, and the record of
        # this forward's offloads (None when not swapping); recompute_mlp: MindSpeed's MLP recompute
        self._swap_attributes = swapped_attributes(config.swap_modules) if config.swap_attention else ()
        self._swap_record = None
        self.recompute_mlp = False
        # --use-fused-rmsnorm: the residual add before the MLP and its pre-norm run as one kernel
        self.fused_add_norm = (isinstance(self.pre_mlp_layernorm, RMSNorm) and self.pre_mlp_layernorm.fused
                               and "pre_mlp_layernorm" not in self._swap_attributes)
        self.attn_hc = self.mlp_hc = None  # --enable-mhc-connections: the mixing around each branch
        if config.enable_mhc_connections:
            self.attn_hc, self.mlp_hc = HyperConnection(config), HyperConnection(config)
        self.layer_scalar = None  # Gemma4: the layer's output times a scalar of its own
        if config.layer_scalar:  # replicated; fed a sequence shard under SP, hence a partial gradient there
            self.layer_scalar = mark_param(nn.Parameter(torch.empty(1, dtype=config.params_dtype)), init="ones",
                                           grad_partial_over_tp=config.sequence_parallel)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); fp32 with --fp32-residual-connection
        if not swapping(self.config, self.training):
            return self._scaled(self._layer(hidden, rotary, layout))
        self._swap_record = record = get_activation_swapper().new_record()
        try:
            output = self._scaled(self._layer(hidden, rotary, layout))
        finally:
            self._swap_record = None
        record.close(output)
        return output

    def _scaled(self, output: torch.Tensor) -> torch.Tensor:
        return output * self.layer_scalar if self.layer_scalar is not None else output

    def _call(self, module: nn.Module, *args: object) -> torch.Tensor:
        """``module(*args)``, its saved activations offloaded when --swap-modules names it."""
        record = self._swap_record
        if record is None or not any(getattr(self, name) is module for name in self._swap_attributes):
            return module(*args)
        with get_activation_swapper().saving(record):
            return module(*args)

    def _mlp(self, hidden: torch.Tensor, layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        """The MLP (or MoE) branch; recomputed in the backward under MindSpeed's swap + recompute rule. A MoE
        layer also reads ``layout``: the token ids of a hash-routed layer (--moe-hash-layers), the CP layout."""
        args = (hidden,)
        if isinstance(self.mlp, MoELayer) and layout is not None:
            args += (layout,)
        if self.recompute_mlp and self.training and torch.is_grad_enabled() and not inside_checkpoint():
            return checkpoint(self.mlp, *args)
        return self._call(self.mlp, *args)

    def _hyper_layer(self, streams: torch.Tensor, rotary: Optional[tuple],
                     layout: Optional[SequenceLayout]) -> torch.Tensor:
        """A layer under hyper-connections: each branch reads a mix of the streams [s(/tp), b, n h] and is written
        back into all of them (core/transformer/hyper_connection.py)."""
        post, comb, collapsed = self.attn_hc(streams)
        attn = self._branch(self._call(self.self_attention, self._norm(self.input_layernorm, collapsed), rotary,
                                       layout), None)
        streams = self.attn_hc.merge(streams, attn, post, comb)
        post, comb, collapsed = self.mlp_hc(streams)
        mlp = self._branch(self._mlp(self._norm(self.pre_mlp_layernorm, collapsed), layout), None)
        return self.mlp_hc.merge(streams, mlp, post, comb)

    def _layer(self, hidden: torch.Tensor, rotary: Optional[tuple], layout: Optional[SequenceLayout]) -> torch.Tensor:
        cfg = self.config
        if self.attn_hc is not None:
            return self._hyper_layer(hidden, rotary, layout)
        if self.self_attention is None:  # an MLP-only layer of a hybrid pattern ('-', 'E')
            normed = self._norm(self.pre_mlp_layernorm, hidden)
            return residual_skip(cfg, hidden, normed) + self._branch(self._mlp(normed, layout),
                                                                     self.post_mlp_layernorm)
        normed = self._norm(self.input_layernorm, hidden)
        attn = self._branch(self._call(self.self_attention, normed, rotary, layout), self.post_self_attn_layernorm)
        if self.config.parallel_residual:  # both branches read the layer input
            shared = self.config.parallel_residual_shared_norm
            mlp_input = normed if shared else self._norm(self.pre_mlp_layernorm, hidden)
            return hidden + attn + self._branch(self._mlp(mlp_input, layout), self.post_mlp_layernorm)
        if self.mlp is None:  # a mixer-only layer of a hybrid pattern ('*', 'G')
            return residual_skip(cfg, hidden, normed) + attn
        normed, hidden = self._add_and_norm(residual_skip(cfg, hidden, normed), attn)
        return residual_skip(cfg, hidden, normed) + self._branch(self._mlp(normed, layout), self.post_mlp_layernorm)

    def _add_and_norm(self, hidden: torch.Tensor, attn: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(pre-MLP norm of hidden + attn, hidden + attn)``; one fused kernel under --use-fused-rmsnorm."""
        if self.fused_add_norm and hidden.dtype == attn.dtype:
            normed, hidden = self.pre_mlp_layernorm.add_forward(hidden, attn)
            return to_compute_dtype(normed, self, self.config), hidden
        hidden = hidden + attn
        return self._norm(self.pre_mlp_layernorm, hidden), hidden

    def _norm(self, norm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """A pre-branch norm of the residual stream, in the dtype the attention or MLP computes in."""
        return to_compute_dtype(self._call(norm, hidden), self, self.config)

    def _branch(self, output: torch.Tensor, output_norm: Optional[nn.Module]) -> torch.Tensor:
        """An attention or MLP output ``[s, b, h]`` as added to the residual: normed, scaled, dropped out."""
        cfg = self.config
        if output_norm is not None:
            output = self._call(output_norm, output)
        if cfg.residual_multiplier is not None:  # Granite
            output = output * cfg.residual_multiplier
        return hidden_dropout(output, cfg.hidden_dropout, self.training, cfg.sequence_parallel)


class MambaLayer(nn.Module):
    """Megatron's Mamba layer (``--hybrid-override-pattern`` 'M'): ``x + mixer(norm(x))``, no attention or MLP."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config = config
        self.norm = hidden_norm(config)
        self.mixer = MambaMixer(config, state, layer_number)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); no position embedding; layout: this
        # rank's tokens and documents, the mixer's state restarting and travelling with them
        cfg = self.config
        normed = self.norm(to_compute_dtype(hidden, self, cfg))  # cast before the norm, as HF and Megatron
        mixed = self.mixer(normed, layout)
        if cfg.residual_multiplier is not None:  # Granite-4 (granitemoehybrid) scales every branch
            mixed = mixed * cfg.residual_multiplier
        mixed = hidden_dropout(mixed, cfg.hidden_dropout, self.training, cfg.sequence_parallel)
        return residual_skip(cfg, hidden, normed) + mixed


class SharedBlockMambaLayer(MambaLayer):
    """Zamba's 'Z' layer: ``x + mamba(norm(x + proj(block([x; e]))))`` with the shared block it runs
    (:mod:`core.transformer.shared_block`); ``adapters`` hold the layer's own projection and adapters."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__(config, state, layer_number)
        self.block_index = config.shared_block_of(layer_number)
        self.adapters = SharedBlockMambaAdapters(config, state)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple], layout: Optional[SequenceLayout],
                embeds: torch.Tensor, block: SharedBlock) -> torch.Tensor:
        # hidden, embeds [s, b, h] ([s/tp, b, h] under sequence parallelism)
        cfg = self.config
        block_input = to_compute_dtype(hidden, self, cfg)
        shared = self.adapters.proj(block(block_input, embeds, rotary, layout, self.adapters))  # [s(/tp), b, h]
        normed = self.norm(to_compute_dtype(hidden + shared, self, cfg))
        mixed = hidden_dropout(self.mixer(normed, layout), cfg.hidden_dropout, self.training, cfg.sequence_parallel)
        return hidden + mixed


# the token mixers built from (config, state, layer number) alone; attention picks its class from the config
MIXER_CLASSES = {GDN_MIXER: GatedDeltaNet, KDA_MIXER: KimiDeltaAttention, LIGHTNING_MIXER: LightningAttention,
                 SHORT_CONV_MIXER: ShortConv, PARALLEL_HYBRID_MIXER: MambaAndAttention, RG_LRU_MIXER: RecurrentBlock,
                 RWKV_TIME_MIX: RwkvTimeMix, RWKV_CHANNEL_MIX: RwkvChannelMix, MLSTM_MIXER: MLstm}


def build_mixer(kind: str, config: TransformerConfig, state: ParallelState, layer_number: int,
                attention_kind: Optional[str] = None) -> nn.Module:
    """A transformer layer's token mixer of ``kind`` (``TransformerConfig.layer_parts``); ``[s, b, h]`` in and out,
    called with (hidden, rotary, layout). ``attention_kind``: a compressed attention's letter (else the pattern's)."""
    if kind == ATTENTION_MIXER:
        if config.compressed_attention_pattern is not None:
            return CompressedAttention(config, state, layer_number, attention_kind)
        attention = MultiLatentAttention if config.multi_latent_attention else SelfAttention
        return attention(config, state, layer_number)
    if kind in MIXER_CLASSES:
        return MIXER_CLASSES[kind](config, state, layer_number)
    raise ValueError(f"no token mixer {kind!r} in a transformer layer")


def build_layer(config: TransformerConfig, state: ParallelState, layer_number: int) -> nn.Module:
    """The layer of global number ``layer_number``: noop, Mamba ('M' in the hybrid pattern) or transformer."""
    if layer_number in config.noop_layers:
        return NoopTransformerLayer()
    if config.layer_parts(layer_number)[0] == SHARED_BLOCK_MAMBA_MIXER:
        return SharedBlockMambaLayer(config, state, layer_number)
    if config.is_mamba_layer(layer_number):
        return MambaLayer(config, state, layer_number)
    return TransformerLayer(config, state, layer_number)


def check_dsa_sharing(config: TransformerConfig, layer_numbers: List[int]) -> None:
    """A DSA layer that reuses another's top-k (--dsa-indexer-topk-freq) must find it in its own pipeline chunk."""
    if not config.is_dsa:
        return
    for layer in layer_numbers:
        source = config.dsa_topk_source(layer)
        if layer not in config.noop_layers and (source not in layer_numbers or source in config.noop_layers):
            raise ValueError(f"DSA layer {layer} reuses layer {source}'s top-k (--dsa-indexer-topk-freq "
                             f"{config.dsa_indexer_topk_freq}, --dsa-indexer-skip-topk-offset "
                             f"{config.dsa_indexer_skip_topk_offset}), which is not a computing layer of its "
                             "pipeline stage: start every stage (and virtual chunk) on a layer that computes its "
                             "own top-k")


def transformer_layers(model: nn.Module) -> List[nn.Module]:
    """The decoder layers that hold parameters (noop layers are skipped)."""
    layers = model.decoder.layers.values()
    return [layer for layer in layers if any(True for _ in layer.parameters())]


class NoopTransformerLayer(nn.Module):
    """A layer slot with no parameters that returns its input (pads uneven stages)."""

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        return hidden


class TransformerBlock(nn.Module):
    """The layers of one pipeline stage (global numbers ``layer_numbers``) and the final norm."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_numbers: Iterable[int],
                 post_process: bool) -> None:
        super().__init__()
        self.config = config
        layer_numbers = list(layer_numbers)
        check_dsa_sharing(config, layer_numbers)
        self.layers = nn.ModuleDict({str(i): build_layer(config, state, i) for i in layer_numbers})
        for position, layer in enumerate(self.layers.values()):  # MindSpeed's --swap-attention MLP recompute
            if isinstance(layer, TransformerLayer):
                layer.recompute_mlp = recomputes_mlp(config, position)
        self.shared_blocks = self._shared_blocks(config, state)
        self.final_layernorm = self.hc_head = None
        if post_process:
            self.final_layernorm = hidden_norm(config)
            if config.enable_mhc_connections:  # collapses the hyper-connection streams before the final norm
                self.hc_head = HyperHead(config)

    def _shared_blocks(self, config: TransformerConfig, state: ParallelState) -> Optional[nn.ModuleDict]:
        """The shared blocks this chunk's 'Z' layers run (each built by its first 'Z' layer's settings)."""
        used = sorted({layer.block_index for layer in self.layers.values() if isinstance(layer, SharedBlockMambaLayer)})
        if not used:
            return None
        first_layers = [i for i in range(config.num_layers) if config.layer_parts(i)[0] == SHARED_BLOCK_MAMBA_MIXER]
        return nn.ModuleDict({str(k): mark_block_copy(
            SharedBlock(config, state, first_layers[k], functools.partial(hidden_norm, config)),
            counted=str(first_layers[k]) in self.layers) for k in used})

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None, embeds: Optional[torch.Tensor] = None,
                keep_streams: bool = False) -> "torch.Tensor | Tuple[torch.Tensor, torch.Tensor]":
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); layout: see context_parallel.py;
        # embeds: the word embeddings, same shape, read by the 'Z' layers' shared blocks; keep_streams: also return
        # the hyper-connection streams [s, b, n h] before the head (what DeepSeek-V4's MTP module reads)
        layers = list(self.layers.values())
        cfg = self.config
        granularity = cfg.recompute_granularity if self.training and torch.is_grad_enabled() else None
        if cfg.swap_attention:  # this micro-batch's layers link backwards: a backward prefetches the next
            get_activation_swapper().start_chain()
        for positions, recompute in recompute_groups(len(layers), granularity, cfg.recompute_method,
                                                     cfg.recompute_num_layers):
            group = [layers[i] for i in positions]
            if recompute and any(True for layer in group for _ in layer.parameters()):  # not only noop layers
                hidden = checkpoint(_run_layers, group, hidden, rotary, layout, embeds, self.shared_blocks)
            else:
                hidden = _run_layers(group, hidden, rotary, layout, embeds, self.shared_blocks)
        streams = hidden
        if self.hc_head is not None:
            hidden = self.hc_head(hidden)  # [s, b, n h] -> [s, b, h]
        if self.final_layernorm is not None:
            hidden = self.final_layernorm(hidden)
        return (hidden, streams) if keep_streams else hidden

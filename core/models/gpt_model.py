"""The one decoder-only model that covers every family (DESIGN.md, principle 4).

A pipeline stage is a range of global layer numbers plus, on the first stage,
the word embeddings and, on the last, the final norm and the output layer
(the word embeddings themselves when they are tied; on a last stage without
them, a copy named ``output_layer.weight`` kept equal through the embedding
group). Build it on the meta device and call :func:`materialize` to allocate
and initialise it; :func:`build_model_chunks` builds a pipeline rank's chunks.

Activations are ``[s, b, h]`` inside the model, as in Megatron; the inputs and
the per-token loss are ``[b, s]``.
"""
from __future__ import annotations

import functools
import math
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import gemm_dtype
from core.parallel_state import GROUP_DIMS, Group, ParallelState
from core.pipeline_parallel.layout import Placement, chunk_specs
from core.tensor_parallel.cross_entropy import (CROSS_ENTROPY_CHUNK, linear_vocab_parallel_cross_entropy,
                                               vocab_parallel_cross_entropy)
from core.tensor_parallel.lora import LORA_INIT, lora_init_bound
from core.tensor_parallel.layers import (ColumnParallelLinear, VocabParallelEmbedding, column_parallel_input,
                                        column_parallel_linear, mark_param, weight_grads_deferred)
from core.tensor_parallel.mappings import gather_from_sequence_parallel_region, gather_from_tensor_model_parallel_region
from core.tensor_parallel.param_meta import TPShard, copy_meta, full_shape, local_tensor, param_meta, update_meta
from core.transformer.block import TransformerBlock, compute_dtype, hidden_dropout, hidden_norm
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout, context_parallel_for, sequence_layout
from core.transformer.mamba_mixer import MAMBA_INITS
from core.transformer.multi_token_prediction import MultiTokenPredictionBlock
from core.transformer.position_embedding import PositionEmbedding
from core.transformer.hyper_connection import expand_streams
from core.transformer.moe.router import fill_hash_tables
from core.transformer.rope import LocalGlobalRotary, RotaryEmbedding

EMBEDDING_WEIGHT = "embedding.word_embeddings.weight"


class LanguageEmbedding(nn.Module):
    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = VocabParallelEmbedding(
            config.vocab_size, config.padded_vocab_size, config.hidden_size, group=state.tp_group,
            sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)
        self.embedding_layernorm = hidden_norm(config) if config.embed_layernorm else None
        self.position_embeddings = None  # learned (GPT-2, OPT) or sinusoidal (XGLM) absolute positions
        if config.position_embedding_type in ("learned_absolute", "sinusoidal"):
            self.position_embeddings = PositionEmbedding(config, state.tp_group)

    def forward(self, input_ids: torch.Tensor, position_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        hidden = self.word_embeddings(input_ids.t())  # [b, s] -> [s, b, h] ([s/tp, b, h] under SP)
        cfg = self.config
        if cfg.input_embeds_norm:  # Gemma: scale by sqrt(hidden), rounded to the activation dtype
            hidden = hidden * torch.tensor(cfg.hidden_size ** 0.5, dtype=hidden.dtype)
        if cfg.embedding_multiplier is not None:  # Granite
            hidden = hidden * cfg.embedding_multiplier
        if self.position_embeddings is not None:  # added to the scaled word embeddings (BioGpt, XGLM)
            hidden = hidden + self.position_embeddings(input_ids.size(1), position_ids, hidden.device,
                                                       hidden.dtype)  # [s, b|1, h] this rank's positions
        if self.embedding_layernorm is not None:  # Bloom
            hidden = self.embedding_layernorm(hidden)
        if cfg.fp32_residual_connection:  # the residual stream starts in fp32
            hidden = hidden.float()
        return hidden_dropout(hidden, cfg.hidden_dropout, self.training, cfg.sequence_parallel)


PREDICTION_HEAD_ACTIVATIONS = {
    "gelu": F.gelu, "gelu_tanh": functools.partial(F.gelu, approximate="tanh"), "relu": F.relu, "silu": F.silu,
}


class PredictionHead(nn.Module):
    """``norm(act(dense(x)))`` before the output layer (``--prediction-head ACT``; ModernBERT's lm_head).

    The dense ``[h, h]`` is replicated over TP: each rank applies it to the
    hidden states it holds, so its gradient is a partial sum over TP only under
    sequence parallelism (as the norms').
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        h, partial = config.hidden_size, config.sequence_parallel
        self.act = PREDICTION_HEAD_ACTIVATIONS[config.prediction_head]
        self.dense = nn.Linear(h, h, bias=config.prediction_head_bias, dtype=config.params_dtype)
        mark_param(self.dense.weight, init="normal", grad_partial_over_tp=partial)
        if self.dense.bias is not None:
            mark_param(self.dense.bias, init="zeros", grad_partial_over_tp=partial)
        self.norm = hidden_norm(config)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism)
        return self.norm(self.act(self.dense(hidden)))


class ValueHead(nn.Module):
    """A reward model's score head (``value_head``): ``w . x`` per token, ``w`` ``[1, h]`` replicated over TP.

    Each rank scores the hidden states it holds; under sequence parallelism the scores are gathered over
    TP (every rank then holds all of them and computes the same loss), so the weight's gradient is a
    partial sum over TP only then. A checkpoint without the head (a language model being turned into a
    reward model) loads with the head as initialised.
    """

    WEIGHT = "weight"

    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        self.config, self.tp_group = config, state.tp_group
        self.weight = mark_param(nn.Parameter(torch.empty(1, config.hidden_size, dtype=config.params_dtype)),
                                 init="normal", grad_partial_over_tp=config.sequence_parallel)
        self.register_load_state_dict_pre_hook(self._keep_when_missing)

    def _keep_when_missing(self, module: nn.Module, state_dict: Dict[str, torch.Tensor], prefix: str,
                           *unused: object) -> None:
        state_dict.setdefault(prefix + self.WEIGHT, self.weight.detach().clone())

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # hidden [s(/tp), b, h] -> scores [b, s] in fp32
        scores = F.linear(hidden.to(self.weight.dtype), self.weight).squeeze(-1)  # [s(/tp), b]
        if self.config.sequence_parallel:
            scores = gather_from_sequence_parallel_region(scores, self.tp_group, output_grad_is_partial=False)
        return scores.float().t().contiguous()


class GPTModel(nn.Module):
    """The decoder of one pipeline stage (chunk); ``state`` gives the process groups its layers need."""

    def __init__(self, config: TransformerConfig, state: ParallelState, *, pre_process: bool = True,
                 post_process: bool = True, layer_numbers: Optional[Iterable[int]] = None) -> None:
        super().__init__()
        self.config, self.state, self.tp_group = config, state, state.tp_group
        self.pre_process, self.post_process = pre_process, post_process
        layer_numbers = list(range(config.num_layers) if layer_numbers is None else layer_numbers)
        mtp = post_process and config.mtp_num_layers is not None
        # the MTP modules embed shifted tokens: a last stage with them holds the word embeddings too (Megatron)
        self.embedding = LanguageEmbedding(config, state) if pre_process or mtp else None
        self.rotary = RotaryEmbedding(config) if config.position_embedding_type == "rope" else None
        self.local_rotary = RotaryEmbedding(config, local=True) if config.local_rotary_base is not None else None
        self.decoder = TransformerBlock(config, state, layer_numbers, post_process)
        self.mtp = MultiTokenPredictionBlock(config, state) if mtp else None
        self.output_layer = None
        tied = not config.untie_embeddings_and_output_weights
        if post_process and (not tied or self.embedding is None):
            self.output_layer = ColumnParallelLinear(
                config.hidden_size, config.padded_vocab_size, group=state.tp_group,
                bias=config.add_output_layer_bias and not tied,
                sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)
            update_meta(self.output_layer.weight, init_shape=(config.vocab_size, config.hidden_size))
        if (tied or config.mtp_num_layers is not None) and pre_process != post_process:
            self._mark_shared_embedding(tied)
        self.prediction_head = PredictionHead(config) if post_process and config.prediction_head else None
        self.output_layer_bias = None  # tied weight with a bias of its own (ModernBERT decoder)
        if post_process and tied and config.add_output_layer_bias:
            vocab_shard = TPShard.even(0, config.padded_vocab_size)
            self.output_layer_bias = mark_param(
                nn.Parameter(torch.empty(vocab_shard.local_size(state.tp_group.size), dtype=config.params_dtype)),
                init="zeros", tp_shard=vocab_shard)
        self.value_head = ValueHead(config, state) if post_process and config.value_head else None
        self.input_tensor: Optional[torch.Tensor] = None
        self.context_parallel = context_parallel_for(config, state)  # None without CP

    def _mark_shared_embedding(self, tied: bool) -> None:
        """Word embeddings split over pipeline stages: the last stage holds a copy of them.

        With tied embeddings the copy is ``output_layer.weight``, initialised with the draws of
        ``embedding.word_embeddings.weight`` (``init_name``); with MTP (``--mtp-num-layers``) it
        is the last stage's own ``embedding.word_embeddings.weight`` (tied or not). The two are
        kept equal by summing their gradients over the embedding group (``finalize_model_grads``).
        The copy is left out of the gradient norm, as in Megatron.
        """
        if self.embedding is not None:
            update_meta(self.embedding.word_embeddings.weight, shared_across_stages=True,
                        excluded_from_grad_norm=not self.pre_process)
        if self.output_layer is not None and tied:
            update_meta(self.output_layer.weight, shared_across_stages=True, excluded_from_grad_norm=True,
                        init_name=EMBEDDING_WEIGHT)

    def set_input_tensor(self, tensor: Optional[torch.Tensor]) -> None:
        """The previous stage's output ``[s, b, h]``, used by ``forward`` on a stage without embeddings."""
        self.input_tensor = tensor

    def params_read_directly(self) -> List[nn.Parameter]:
        """Parameters the model reads outside their own module's forward: the output layer's weight (the word
        embeddings when tied) and bias. Whatever waits for a parameter before its module runs (the distributed
        optimizer's overlapped weight all-gather) must wait for these before the model runs."""
        if not self.post_process or self.value_head is not None:
            return []
        return [p for p in (self.output_weight(), self._output_bias()) if p is not None]

    def output_weight(self) -> torch.Tensor:
        """The local ``[v/tp, h]`` weight that produces logits (tied: the word embeddings)."""
        if self.output_layer is not None:
            return self.output_layer.weight
        return self.embedding.word_embeddings.weight

    def forward(self, input_ids: Optional[torch.Tensor], labels: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None,
                hidden_states: Optional[torch.Tensor] = None, label_smoothing: float = 0.0,
                document_ids: Optional[torch.Tensor] = None, inference_cache: Optional[Any] = None) -> torch.Tensor:
        """Per-token loss ``[b, s]`` when ``labels`` are given, else local logits ``[b, s, v/tp]``.

        On a stage without embeddings, ``hidden_states`` ``[s, b, h]`` (or the tensor
        given to :meth:`set_input_tensor`) is the previous stage's output; a stage
        without the output layer returns its hidden states. ``label_smoothing``
        (``--label-smoothing-factor``) spreads that mass of the target over the vocabulary.
        ``document_ids`` ``[b, s]`` (any integers, equal = same document) keep attention within documents.
        Under context parallelism the inputs are this CP rank's tokens (``context_parallel.split_batch``);
        without ``position_ids`` their places in the sequence are the positions.
        ``inference_cache`` (generation, ``mindspeed_llm/inference/kv_cache.py``): the attention layers add these
        tokens' keys/values to it and attend over every cached one; ``position_ids`` give each row's positions;
        only the last token's logits ``[b, 1, v/tp]`` come back.
        """
        given = hidden_states if hidden_states is not None else self.input_tensor
        if input_ids is not None:
            local_len, batch, device = input_ids.size(1), input_ids.size(0), input_ids.device
        else:
            local_len, batch, device = self._full_seq_len(given), given.size(1), given.device
        layout = sequence_layout(self.context_parallel, local_len, device, document_ids)
        if inference_cache is not None:
            layout = inference_cache.layout(local_len, device)
        if layout is None and (self.config.is_dsa or self.config.moe_hash_layers):
            # DSA's layers pass their top-k on in the layout; hash-routed MoE layers read the token ids from it
            layout = SequenceLayout(local_len, torch.arange(local_len, device=device))
        if layout is not None:
            layout.token_ids = input_ids  # [b, s(/cp)]
        if self.context_parallel is not None and position_ids is None:
            position_ids = layout.positions.expand(batch, -1)  # [b, s/cp]
        hidden, embeds = self._stage_input(input_ids, position_ids, given)
        rotary = None
        if self.rotary is not None:
            dtype = self._branch_dtype(hidden)  # cos/sin in the dtype of q and k
            rotary = self.rotary(local_len, hidden.device, dtype, position_ids)
            if self.local_rotary is not None:  # sliding-window layers have their own base (Gemma3)
                rotary = LocalGlobalRotary(rotary, self.local_rotary(local_len, hidden.device, dtype, position_ids))
        mtp_streams = self.post_process and self.mtp is not None and self.config.enable_mhc_connections
        hidden = mtp_input = self.decoder(hidden, rotary, layout, embeds, keep_streams=mtp_streams)
        if mtp_streams:  # DeepSeek-V4's MTP reads the hyper-connection streams before the decoder's head
            hidden, mtp_input = hidden
        if not self.post_process:  # to the next stage: [s, b, h], or [s, b, 2h] with the word embeddings
            return hidden if embeds is None else torch.cat([hidden, embeds], dim=-1)
        if self.value_head is not None:  # a reward model: a score per token instead of logits
            return self.value_head(hidden)  # [b, s]
        if self.mtp is not None:  # per-token losses of the MTP modules, kept for the task (collect_mtp_losses)
            self.mtp.last_losses = [] if labels is None else self.mtp(
                input_ids, labels, mtp_input, rotary, embed=lambda ids: self.embedding(ids, position_ids),
                per_token_loss=lambda h, ids: self._loss_of_hidden(h, ids, label_smoothing),
                layout=layout)
        if inference_cache is not None:  # generation reads the last token's logits only
            hidden = hidden[-1:]  # [1, b, h]
        if labels is not None:
            return self._loss_of_hidden(hidden, labels, label_smoothing)
        return self._logits(hidden).transpose(0, 1)  # [b, s, v/tp]

    def _stage_input(self, input_ids: Optional[torch.Tensor], position_ids: Optional[torch.Tensor],
                     given: Optional[torch.Tensor]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """This stage's hidden states ``[s, b, h]`` and, where shared blocks read them, the word embeddings
        (the first stage's embedding output; a later stage's second half of what the previous one sent)."""
        if self.pre_process:
            hidden = self.embedding(input_ids, position_ids)
            if self.config.enable_mhc_connections:  # [s, b, h] -> the hyper-connection streams [s, b, n h]
                return expand_streams(hidden, self.config.mhc_num_residual_streams), None
            return hidden, (hidden if self.config.has_shared_blocks else None)
        if self.config.has_shared_blocks:
            hidden, embeds = given.chunk(2, dim=-1)
            return hidden, embeds
        return given, None

    def _loss_of_hidden(self, hidden: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> torch.Tensor:
        """Cross-entropy ``[b, s]`` of the normed hidden states ``[s(/tp), b, h]`` against ``labels`` ``[b, s]``.

        With ``cross_entropy_chunk_size`` the output layer and the loss run chunk by chunk and the
        ``[s, b, v/tp]`` logits never exist; inside a zero-bubble backward split (deferred weight
        gradients) the logits are materialised, as the deferral queues the output layer's product.
        """
        chunk = self.config.cross_entropy_chunk_size
        if chunk is None:  # by the dtype the output GEMM runs in: see TransformerConfig.cross_entropy_chunk_size
            chunk = CROSS_ENTROPY_CHUNK if gemm_dtype(self.output_weight()) in (torch.bfloat16, torch.float16) else 0
        deferred = weight_grads_deferred()
        if not chunk or deferred:
            return self._per_token_loss(self._logits(hidden, fp32_product=not deferred), labels, label_smoothing)
        hidden = column_parallel_input(self._output_layer_input(hidden), self.tp_group,
                                       self.config.sequence_parallel)  # [s, b, h]
        loss = linear_vocab_parallel_cross_entropy(
            hidden, self.output_weight(), self._output_bias(), labels.t(), self.tp_group, self.config.vocab_size,
            label_smoothing=label_smoothing, chunk=chunk, logit_scale=self.config.output_multiplier_scale,
            softcap=self.config.output_logit_softcapping, fused=self.config.cross_entropy_loss_fusion)  # [s, b]
        return loss.t().contiguous()  # [b, s]; not a view (FSDP2 hooks outputs)

    def _per_token_loss(self, logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> torch.Tensor:
        """Cross-entropy ``[b, s]`` of local logits ``[s, b, v/tp]`` against ``labels`` ``[b, s]``."""
        loss = vocab_parallel_cross_entropy(logits, labels.t(), self.tp_group, self.config.vocab_size,
                                            label_smoothing=label_smoothing,
                                            fused=self.config.cross_entropy_loss_fusion)
        return loss.t().contiguous()  # [b, s]; not a view (FSDP2 hooks outputs)

    def _logits(self, hidden: torch.Tensor, fp32_product: bool = False) -> torch.Tensor:
        """Local logits ``[s, b, v/tp]`` of the normed hidden states ``[s(/tp), b, h]`` (the shared output layer).

        ``fp32_product``: where a half-precision output layer multiplies in fp32 anyway (a CPU without bf16
        units, ``core.device.gemm_dtype``), the logits stay fp32 for the loss instead of a bf16 round trip.
        """
        x, weight = self._output_layer_input(hidden), self.output_weight()
        if fp32_product and weight.dtype != torch.float32 and gemm_dtype(weight) == torch.float32:
            x = x.float()  # [s(/tp), b, h]: the fp32 input gives the fp32 product fp32 logits
        logits = column_parallel_linear(x, weight, self._output_bias(), self.tp_group,
                                        sequence_parallel=self.config.sequence_parallel)  # [s, b, v/tp]
        if self.config.output_multiplier_scale is not None:  # Granite: 1 / logits_scaling
            logits = logits * self.config.output_multiplier_scale
        cap = self.config.output_logit_softcapping
        if cap is not None:  # elementwise, so each rank caps its vocabulary shard
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _output_layer_input(self, hidden: torch.Tensor) -> torch.Tensor:
        """What the output layer multiplies: the normed hidden states in its dtype, through ModernBERT's head."""
        if self.config.fp32_residual_connection:  # the final norm's fp32 output, back to the output layer's dtype
            hidden = hidden.to(self.output_weight().dtype)
        if self.prediction_head is not None:  # ModernBERT
            hidden = self.prediction_head(hidden)
        return hidden

    def _output_bias(self) -> Optional[torch.Tensor]:
        """--add-output-layer-bias: the tied layer's own bias, or the untied layer's."""
        if self.output_layer_bias is None and self.output_layer is not None:
            return self.output_layer.bias
        return self.output_layer_bias

    def _branch_dtype(self, hidden: torch.Tensor) -> torch.dtype:
        """The dtype attention and MLP compute in: the stream's, or the parameters' under an fp32 stream."""
        if not self.config.fp32_residual_connection:
            return hidden.dtype
        return compute_dtype(self, self.config.params_dtype)

    def _full_seq_len(self, hidden: torch.Tensor) -> int:
        return hidden.size(0) * (self.tp_group.size if self.config.sequence_parallel else 1)


def gather_logits(local_logits: torch.Tensor, model: GPTModel) -> torch.Tensor:
    """Full-vocabulary logits ``[b, s, vocab_size]`` from this rank's ``[b, s, v/tp]``."""
    full = gather_from_tensor_model_parallel_region(local_logits, model.tp_group)
    return full[..., :model.config.vocab_size]


def _param_generator(seed: int, name: str) -> torch.Generator:
    """A CPU generator that depends only on the seed and the global parameter name."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63 - 1))


def full_initial_value(name: str, param: torch.Tensor, config: TransformerConfig, seed: int) -> torch.Tensor:
    """The full (unsharded) initial tensor of a parameter, in fp32 on the CPU.

    The draws depend on the seed and the parameter's name, or its ``init_name``
    (the last stage's copy of tied embeddings draws those of the embeddings).
    """
    meta = param_meta(param)
    name = meta.init_name or name
    shape = full_shape(param)
    if meta.init_method == "ones":
        return torch.ones(shape)
    if meta.init_method == "zeros":
        return torch.zeros(shape)
    if meta.init_method == "constant":
        return torch.full(shape, meta.init_value)
    if meta.init_method in MAMBA_INITS:  # the Mamba mixer's A_log and dt bias
        return MAMBA_INITS[meta.init_method](shape, _param_generator(seed, name))
    if meta.init_method == LORA_INIT:  # PEFT's lora_A: kaiming-uniform over the full input width
        bound = lora_init_bound(shape[1])
        return torch.empty(shape).uniform_(-bound, bound, generator=_param_generator(seed, name))
    std = config.init_method_std
    if meta.init_method == "scaled_normal":
        std = std / math.sqrt(2.0 * config.num_layers)
    draw_shape = list(meta.init_shape or shape)
    value = torch.empty(draw_shape).normal_(0.0, std, generator=_param_generator(seed, name))
    if draw_shape != shape:  # zero padding (e.g. vocabulary rows added for divisibility)
        padded = torch.zeros(shape)
        padded[tuple(slice(0, n) for n in draw_shape)] = value
        value = padded
    return value


@torch.no_grad()
def materialize(model: nn.Module, device: torch.device, seed: int, config: TransformerConfig,
                state: ParallelState) -> nn.Module:
    """Allocate a meta-device model on ``device`` and initialise it independently of TP/PP."""
    before = dict(model.named_parameters())  # to_empty() makes new Parameter objects: carry their meta over
    model.to_empty(device=device)
    tp_rank, tp_size = state.tp_group.rank, state.tp_group.size
    ep_rank, ep_size = state.expert_group.rank, state.expert_group.size
    for name, param in model.named_parameters():
        copy_meta(before[name], param)
        full = full_initial_value(name, param, config, seed)
        local = local_tensor(full, param_meta(param), tp_rank, tp_size, ep_rank, ep_size)
        param.copy_(local.to(param.dtype))
    for buffer in model.buffers():  # to_empty() leaves them unset; all start at zero (MoE router's expert bias)
        buffer.zero_()
    fill_hash_tables(model)  # but the hash-routed layers' token-id tables (--moe-hash-layers)
    return model


MetaHook = Callable[[nn.Module], None]  # a change to a model built on the meta device, before initialisation


def build_model(config: TransformerConfig, state: ParallelState, device: torch.device, seed: int,
                meta_hooks: Sequence[MetaHook] = (), **stage: object) -> GPTModel:
    """Build on the meta device, let ``meta_hooks`` change it there (e.g. attach LoRA adapters, freeze the
    base), then allocate and initialise on ``device``."""
    with torch.device("meta"):
        model = GPTModel(config, state, **stage)
        for hook in meta_hooks:
            hook(model)
    return materialize(model, device, seed, config, state)


def build_model_chunks(config: TransformerConfig, state: ParallelState, device: torch.device, seed: int,
                       placement: Placement, meta_hooks: Sequence[MetaHook] = ()) -> List[GPTModel]:
    """This pipeline rank's model chunks (one per virtual stage), initialised independently of TP/PP."""
    return [build_model(config, state, device, seed, meta_hooks, pre_process=spec.pre_process,
                        post_process=spec.post_process, layer_numbers=spec.layer_numbers)
            for spec in chunk_specs(placement, state.pp_rank)]


def layout_state(tp: int = 1, tp_rank: int = 0, pp: int = 1, pp_rank: int = 0, ep: int = 1,
                 ep_rank: int = 0, expert_tp: Optional[int] = None) -> ParallelState:
    """A process-free state that places one rank in a TP x PP (x EP) layout (conversion, tests, meta models).

    Its TP, PP and EP groups have ``tp``, ``pp`` and ``ep`` members and no handle, so no
    collective may run on them; every other group is this rank alone.
    """
    groups = {name: Group([0], None, 0) for name in (*GROUP_DIMS, "embedding")}
    groups["tp"] = Group(list(range(tp)), None, tp_rank)
    groups["pp"] = Group(list(range(pp)), None, pp_rank)
    groups["ep"] = Group(list(range(ep)), None, ep_rank)
    groups["tp_ep"] = Group(list(range(tp * ep)), None, ep_rank * tp + tp_rank)
    return ParallelState(world_size=tp * pp * ep, rank=tp_rank, tp=tp, pp=pp, ep=ep, groups=groups,
                         expert_tp=expert_tp)


def unshard_state_dict(per_rank: list, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Full tensors from the state dicts of every TP rank (``model`` gives the shard specs)."""
    specs = {name: param_meta(p).tp_shard for name, p in model.named_parameters()}
    result = {}
    for name in per_rank[0]:
        shard = specs.get(name)
        tensors = [sd[name] for sd in per_rank]
        result[name] = shard.unshard(tensors) if shard is not None else tensors[0]
    return result

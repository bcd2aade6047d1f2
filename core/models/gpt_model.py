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

import math
import zlib
from typing import Dict, Iterable, List, Optional

import torch
from torch import nn

from core.parallel_state import Group
from core.pipeline_parallel.layout import Placement, chunk_specs
from core.tensor_parallel.cross_entropy import vocab_parallel_cross_entropy
from core.tensor_parallel.layers import ColumnParallelLinear, VocabParallelEmbedding, column_parallel_linear
from core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region
from core.transformer.block import TransformerBlock, hidden_dropout
from core.transformer.config import TransformerConfig
from core.transformer.rope import RotaryEmbedding

EMBEDDING_WEIGHT = "embedding.word_embeddings.weight"


class LanguageEmbedding(nn.Module):
    def __init__(self, config: TransformerConfig, tp_group: Group) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = VocabParallelEmbedding(
            config.vocab_size, config.padded_vocab_size, config.hidden_size, group=tp_group,
            sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.word_embeddings(input_ids.t())  # [b, s] -> [s, b, h] ([s/tp, b, h] under SP)
        cfg = self.config
        return hidden_dropout(hidden, cfg.hidden_dropout, self.training, cfg.sequence_parallel)


class GPTModel(nn.Module):
    def __init__(self, config: TransformerConfig, tp_group: Group, *, pre_process: bool = True,
                 post_process: bool = True, layer_numbers: Optional[Iterable[int]] = None) -> None:
        super().__init__()
        self.config, self.tp_group = config, tp_group
        self.pre_process, self.post_process = pre_process, post_process
        layer_numbers = list(range(config.num_layers) if layer_numbers is None else layer_numbers)
        self.embedding = LanguageEmbedding(config, tp_group) if pre_process else None
        self.rotary = RotaryEmbedding(config) if config.position_embedding_type == "rope" else None
        self.decoder = TransformerBlock(config, tp_group, layer_numbers, post_process)
        self.output_layer = None
        tied = not config.untie_embeddings_and_output_weights
        if post_process and (not tied or not pre_process):
            self.output_layer = ColumnParallelLinear(
                config.hidden_size, config.padded_vocab_size, group=tp_group, bias=False,
                sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)
            self.output_layer.weight.init_shape = (config.vocab_size, config.hidden_size)
        if tied and pre_process != post_process:
            self._mark_shared_embedding()
        self.input_tensor: Optional[torch.Tensor] = None

    def _mark_shared_embedding(self) -> None:
        """Tied embeddings split over pipeline stages: the last stage holds a copy of the word embeddings.

        The copy is ``output_layer.weight``, initialised with the draws of
        ``embedding.word_embeddings.weight`` (``init_name``); the two are kept equal by
        summing their gradients over the embedding group (``finalize_model_grads``).
        The copy is left out of the gradient norm (``shared``), as in Megatron.
        """
        if self.embedding is not None:
            self.embedding.word_embeddings.weight.shared_embedding = True
        if self.output_layer is not None:
            weight = self.output_layer.weight
            weight.shared_embedding = True
            weight.shared = True
            weight.init_name = EMBEDDING_WEIGHT

    def set_input_tensor(self, tensor: Optional[torch.Tensor]) -> None:
        """The previous stage's output ``[s, b, h]``, used by ``forward`` on a stage without embeddings."""
        self.input_tensor = tensor

    def output_weight(self) -> torch.Tensor:
        """The local ``[v/tp, h]`` weight that produces logits (tied: the word embeddings)."""
        if self.output_layer is not None:
            return self.output_layer.weight
        return self.embedding.word_embeddings.weight

    def forward(self, input_ids: Optional[torch.Tensor], labels: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None,
                hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Per-token loss ``[b, s]`` when ``labels`` are given, else local logits ``[b, s, v/tp]``.

        On a stage without embeddings, ``hidden_states`` ``[s, b, h]`` (or the tensor
        given to :meth:`set_input_tensor`) is the previous stage's output; a stage
        without the output layer returns its hidden states.
        """
        if self.pre_process:
            hidden = self.embedding(input_ids)
        else:
            hidden = hidden_states if hidden_states is not None else self.input_tensor
        rotary = None
        if self.rotary is not None:
            seq_len = input_ids.size(1) if input_ids is not None else self._full_seq_len(hidden)
            rotary = self.rotary(seq_len, hidden.device, hidden.dtype, position_ids)
        hidden = self.decoder(hidden, rotary)
        if not self.post_process:
            return hidden
        logits = column_parallel_linear(hidden, self.output_weight(), None, self.tp_group,
                                        sequence_parallel=self.config.sequence_parallel)  # [s, b, v/tp]
        if labels is None:
            return logits.transpose(0, 1)  # [b, s, v/tp]
        loss = vocab_parallel_cross_entropy(logits, labels.t(), self.tp_group, self.config.vocab_size)
        return loss.t().contiguous()  # [b, s]; not a view (FSDP2 hooks outputs)

    def _full_seq_len(self, hidden: torch.Tensor) -> int:
        return hidden.size(0) * (self.tp_group.size if self.config.sequence_parallel else 1)


def gather_logits(local_logits: torch.Tensor, model: GPTModel) -> torch.Tensor:
    """Full-vocabulary logits ``[b, s, vocab_size]`` from this rank's ``[b, s, v/tp]``."""
    full = gather_from_tensor_model_parallel_region(local_logits, model.tp_group)
    return full[..., :model.config.vocab_size]


def _param_generator(seed: int, name: str) -> torch.Generator:
    """A CPU generator that depends only on the seed and the global parameter name."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63 - 1))


def _full_shape(param: torch.Tensor) -> list:
    shape = list(param.shape)
    shard = getattr(param, "tp_shard", None)
    if shard is not None:
        shape[shard.dim] = shard.full_size
    return shape


def full_initial_value(name: str, param: torch.Tensor, config: TransformerConfig, seed: int) -> torch.Tensor:
    """The full (unsharded) initial tensor of a parameter, in fp32 on the CPU.

    The draws depend on the seed and the parameter's name, or its ``init_name``
    (the last stage's copy of tied embeddings draws those of the embeddings).
    """
    name = getattr(param, "init_name", None) or name
    full_shape = _full_shape(param)
    method = getattr(param, "init_method", "normal")
    if method == "ones":
        return torch.ones(full_shape)
    if method == "zeros":
        return torch.zeros(full_shape)
    std = config.init_method_std
    if method == "scaled_normal":
        std = std / math.sqrt(2.0 * config.num_layers)
    draw_shape = list(getattr(param, "init_shape", None) or full_shape)
    value = torch.empty(draw_shape).normal_(0.0, std, generator=_param_generator(seed, name))
    if draw_shape != full_shape:  # zero padding (e.g. vocabulary rows added for divisibility)
        padded = torch.zeros(full_shape)
        padded[tuple(slice(0, n) for n in draw_shape)] = value
        value = padded
    return value


@torch.no_grad()
def materialize(model: nn.Module, device: torch.device, seed: int, config: TransformerConfig,
                tp_rank: int, tp_size: int) -> nn.Module:
    """Allocate a meta-device model on ``device`` and initialise it independently of TP/PP."""
    # to_empty() makes new Parameter objects: carry over the attributes set by mark_param.
    attributes = {name: dict(vars(param)) for name, param in model.named_parameters()}
    model.to_empty(device=device)
    for name, param in model.named_parameters():
        vars(param).update(attributes[name])
        full = full_initial_value(name, param, config, seed)
        shard = getattr(param, "tp_shard", None)
        local = shard.shard(full, tp_rank, tp_size) if shard is not None else full
        param.copy_(local.to(param.dtype))
    return model


def build_model(config: TransformerConfig, tp_group: Group, device: torch.device, seed: int,
                **stage: object) -> GPTModel:
    """Build on the meta device, then allocate and initialise on ``device``."""
    with torch.device("meta"):
        model = GPTModel(config, tp_group, **stage)
    return materialize(model, device, seed, config, tp_group.rank, tp_group.size)


def build_model_chunks(config: TransformerConfig, tp_group: Group, device: torch.device, seed: int,
                       placement: Placement, pp_rank: int) -> List[GPTModel]:
    """This pipeline rank's model chunks (one per virtual stage), initialised independently of TP/PP."""
    return [build_model(config, tp_group, device, seed, pre_process=spec.pre_process,
                        post_process=spec.post_process, layer_numbers=spec.layer_numbers)
            for spec in chunk_specs(placement, pp_rank)]


def unshard_state_dict(per_rank: list, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Full tensors from the state dicts of every TP rank (``model`` gives the shard specs)."""
    specs = {name: getattr(p, "tp_shard", None) for name, p in model.named_parameters()}
    result = {}
    for name in per_rank[0]:
        shard = specs.get(name)
        tensors = [sd[name] for sd in per_rank]
        result[name] = shard.unshard(tensors) if shard is not None else tensors[0]
    return result

"""Our model at a TP / PP / EP layout, as the converter sees it: names, shard specs and shapes of the
parameters of the chunks training builds (a ``GPTModel`` on the meta device), and the checks that a target
TP or EP divides the model."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from core.models.gpt_model import EMBEDDING_WEIGHT, GPTModel, layout_state
from core.parallel_state import expert_dimension
from core.pipeline_parallel.layout import Placement, chunk_specs
from core.tensor_parallel.param_meta import TPShard, full_shape, param_meta
from core.transformer.config import TransformerConfig
from core.transformer.shared_block import is_shared_block_param
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.models.registry import RegistryError, TensorContext, WeightRule, find_rule

Location = Tuple[int, int, str]  # (pipeline stage, virtual chunk, parameter name in that chunk)


def checkpoint_tensors(model: torch.nn.Module) -> List[Tuple[str, torch.Tensor]]:
    """The tensors a checkpoint holds: the parameters, then the persistent buffers (a router's ``expert_bias``)."""
    persistent = set(model.state_dict(keep_vars=True))
    buffers = [(name, buf) for name, buf in model.named_buffers() if name in persistent]
    return list(model.named_parameters()) + buffers


class ModelLayout:
    """Our model at a TP size and pipeline placement, built on the meta device.

    ``names``, ``shards``, ``full_shapes`` and ``rules`` describe the whole model
    (one stage, every layer): the canonical parameter names. ``chunk_names[r][c]``
    are the names of chunk ``c`` on stage ``r`` as training builds it
    (:func:`core.pipeline_parallel.layout.chunk_specs` + ``GPTModel``, as
    ``build_model_chunks``), with their local shapes in ``local_shapes``.
    ``locations[name]`` lists where a canonical parameter is stored, its own
    place first; with tied embeddings over several stages the word embeddings
    also sit on the last stage as ``output_layer.weight``, and a shared block of
    'Z' layers (Zamba) sits, under its one name, on every chunk whose layers run it.
    """

    def __init__(self, config: TransformerConfig, rules: Sequence[WeightRule],
                 placement: Optional[Placement] = None) -> None:
        self.config, self.tp = config, config.tensor_model_parallel_size
        self.ep = config.expert_model_parallel_size  # every MoE layer's experts split over this many ranks
        etp = config.expert_tensor_parallel_size
        self.whole_experts = etp == 1 and self.tp > 1  # experts not split over TP: spread over TP x EP / TP
        self.ep_files = expert_dimension(self.tp, self.ep, etp)  # the EEE of mp_rank_TT_PPP_EEE
        self.placement: Placement = placement or [[list(range(config.num_layers))]]
        self.pp, self.vpp = len(self.placement), len(self.placement[0])
        self.tied = not config.untie_embeddings_and_output_weights
        # HF's own copy of tied embeddings (lm_head.weight; GPT-NeoX's embed_out.weight), which some checkpoints hold
        self.tied_output_names = _output_layer_names(rules) if self.tied else ()
        state = layout_state(self.tp, ep=self.ep_files, expert_tp=etp)
        self._read_whole_model(state)
        self.rules = {name: find_rule(rules, name) for name in self.names}
        self._place_chunks(state)

    def _read_whole_model(self, state: Any) -> None:
        """The canonical names, TP shard specs and full shapes, from the whole model on the meta device."""
        with torch.device("meta"):
            model = GPTModel(self.config, state)
        self.shards: Dict[str, Optional[TPShard]] = {}
        self.full_shapes: Dict[str, Tuple[int, ...]] = {}
        self.experts: set = set()  # expert tensors: EP rank r holds experts [r * E / ep, (r + 1) * E / ep)
        self.stored_shapes: Dict[str, Tuple[int, ...]] = {}  # torch_dist's: the vocabulary without TP padding
        for name, param in checkpoint_tensors(model):
            self.shards[name], self.full_shapes[name] = param_meta(param).tp_shard, tuple(full_shape(param))
            self.stored_shapes[name] = tuple(param_meta(param).init_shape or self.full_shapes[name])
            if param_meta(param).num_global_experts is not None:
                self.experts.add(name)
        del model
        self.names: List[str] = list(self.shards)

    def _place_chunks(self, state: Any) -> None:
        """Each stage's chunks as training builds them: their names, local shapes and shard specs, and where
        every canonical parameter is stored (its own place first, then the tied copies)."""
        self.chunk_names: List[List[List[str]]] = []
        self.local_shards: Dict[Location, Optional[TPShard]] = {}
        self.expert_locations: set = set()
        self.local_shapes: Dict[Location, Tuple[int, ...]] = {}
        self.locations: Dict[str, List[Location]] = {name: [] for name in self.names}
        copies: List[Tuple[str, Location]] = []
        for stage in range(self.pp):
            stage_names = []
            for chunk, spec in enumerate(chunk_specs(self.placement, stage)):
                with torch.device("meta"):
                    part = GPTModel(self.config, state, pre_process=spec.pre_process,
                                    post_process=spec.post_process, layer_numbers=spec.layer_numbers)
                stage_names.append(self._place_chunk(part, stage, chunk, spec.pre_process, copies))
                del part
            self.chunk_names.append(stage_names)
        for name, where in copies:
            self.locations[name].append(where)
        missing = [name for name, places in self.locations.items() if not places]
        if missing:
            raise AssertionError(f"parameters {missing[:3]} are on no pipeline stage")

    def _place_chunk(self, part: torch.nn.Module, stage: int, chunk: int, pre_process: bool,
                     copies: List[Tuple[str, Location]]) -> List[str]:
        """Record the tensors of one chunk (built on the meta device); their names in order."""
        names = []
        for name, param in checkpoint_tensors(part):
            where = (stage, chunk, name)
            if param_meta(param).num_global_experts is not None:
                self.expert_locations.add(where)
            self.local_shards[where] = param_meta(param).tp_shard
            self.local_shapes[where] = tuple(param.shape)
            names.append(name)
            if self.is_tied_copy(name) or (name == EMBEDDING_WEIGHT and not pre_process):  # MTP stage
                copies.append((EMBEDDING_WEIGHT, where))
            elif name in self.locations and not self.locations[name]:
                self.locations[name].append(where)
            elif is_shared_block_param(name) and name in self.locations:  # another chunk running the block
                copies.append((name, where))
            else:
                raise AssertionError(f"parameter {name} placed twice or unknown")
        return names

    def is_tied_copy(self, name: str) -> bool:
        """The last stage's copy of tied word embeddings (only exists when PP > 1)."""
        return self.tied and name == "output_layer.weight"

    @property
    def ranks(self) -> int:
        """Files per pipeline stage: one per (TP rank, EP rank), numbered ``ep_rank * tp + tp_rank``."""
        return self.tp * self.ep_files

    def expert_index(self, rank: int) -> int:
        """Which of the ``ep`` slices of every expert tensor file ``rank`` holds."""
        return rank if self.whole_experts else rank // self.tp

    @property
    def chunk_keys(self) -> List[str]:
        """The state-dict keys of each file: ``model``, or ``model0``, ``model1``, ... (VPP)."""
        return ["model"] if self.vpp == 1 else [f"model{c}" for c in range(self.vpp)]

    def context(self, name: str) -> TensorContext:
        """What the registry's transforms of ``name`` need: its TP split sizes, the vocabulary and the config."""
        shard = self.shards[name]
        splits = tuple(seg.size for seg in shard.segments) if shard is not None else ()
        return TensorContext(splits, self.config.vocab_size, self.config.padded_vocab_size, self.config)

    def hf_names(self) -> List[str]:
        """Every HF tensor name the weight map reads or writes for this model."""
        return [hf for name in self.names for hf in self.rules[name][1]]


def check_tp(config: TransformerConfig, tp: int, source: str) -> None:
    """Reject a target TP that does not divide the heads, KV heads or FFN (named with our flag)."""
    heads, groups, ffn = config.num_attention_heads, config.num_query_groups, config.ffn_hidden_size
    problems = []
    if not config.has_attention_layers:  # all Mamba layers: the config checks the mixer's sizes
        return
    if heads % tp:
        problems.append(f"num_attention_heads {heads}")
    if (groups >= tp and groups % tp) or (groups < tp and tp % groups):
        problems.append(f"num_key_value_heads {groups} (must divide or be divided by TP)")
    if ffn % tp:
        problems.append(f"ffn_hidden_size {ffn}")
    if problems:
        raise ConversionError(f"--target-tensor-parallel-size {tp} does not divide {', '.join(problems)} "
                              f"of {source}; choose a TP size that divides them")


def check_ep(config: TransformerConfig, ep: int, source: str) -> None:
    """Reject a target EP that does not divide the experts (or a model without experts)."""
    if ep == 1:
        return
    if config.num_experts is None:
        raise ConversionError(f"--target-expert-parallel-size {ep}: {source} has no experts (a dense model); "
                              "drop the flag")
    if config.num_experts % ep:
        raise ConversionError(f"--target-expert-parallel-size {ep} does not divide the {config.num_experts} experts "
                              f"of {source}; choose an EP size that divides them")


def with_tp(config: TransformerConfig, tp: int, divisible_by: int, dtype: Optional[torch.dtype],
            source: str, **layers: Any) -> TransformerConfig:
    """``config`` at target TP ``tp`` (checked), vocabulary padding, dtype and the given layer settings."""
    check_tp(config, tp, source)
    changes: Dict[str, Any] = {"tensor_model_parallel_size": tp, "make_vocab_size_divisible_by": divisible_by,
                               **layers}
    if dtype is not None:
        changes["params_dtype"] = dtype
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as error:
        raise ConversionError(f"{source}: {error}") from None


def _output_layer_names(rules: Sequence[WeightRule]) -> Tuple[str, ...]:
    """The HF names of the output layer's weight in the family's map (``lm_head.weight`` without one)."""
    try:
        return find_rule(rules, "output_layer.weight")[1]
    except RegistryError:
        return ("lm_head.weight",)


def real_layers(config: TransformerConfig) -> List[int]:
    """The global numbers of the layers that hold weights (HF layer ``j`` is the ``j``-th of them)."""
    noop = set(config.noop_layers)
    return [i for i in range(config.num_layers) if i not in noop]



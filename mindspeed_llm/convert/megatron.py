"""Checkpoints of Megatron-LM and MindSpeed-LLM (``megatron``): their rank files, with the model and layout in
``args``, chunk-local layer numbers, Transformer Engine or local norm names and ``linear_qkv`` rows interleaved
per query group (``mindspeed_llm/models/megatron_format.py``, ``mindspeed_llm/models/qkv_layout.py``)."""
from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import torch

from core.checkpointing import CHECKPOINT_VERSION, CheckpointError, map_foreign_file
from core.pipeline_parallel.layout import Placement
from core.tensor_parallel.param_meta import TPShard
from core.transformer.config import TransformerConfig
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.convert.layout import Location, ModelLayout
from mindspeed_llm.convert.native import MegatronSink, MegatronSource, checkpoint_args
from mindspeed_llm.models import megatron_format
from mindspeed_llm.models.registry import RegistryError
from mindspeed_llm.models.qkv_layout import interleaved_to_ours, ours_to_interleaved

ABSORBED = object()  # a sink's entry for a parameter written inside another's tensor (a GDN in_proj part)


class ExpertEntries(NamedTuple):
    """Where a rank file holds one of our stacked expert tensors: Megatron's layout and its entries' names."""

    layout: str  # megatron_format.SEQUENTIAL_EXPERTS, TE_GROUPED_EXPERTS or GROUPED_EXPERTS
    which: str  # "fc1" or "fc2"
    names: Tuple[str, ...]  # the entries' keys in the chunk's state dict, in expert order


class MegatronLMSource(MegatronSource):
    """A checkpoint written by Megatron-LM or MindSpeed-LLM (``--load-model-type megatron``).

    The model is the one its ``args`` describe (:func:`megatron_format.config_from_args`); the
    TP/PP/VPP layout, ``num_layer_list`` and noop layers come from there too. Names are mapped to
    ours (chunk-local layer numbers to global ones, Transformer Engine norm names to ours,
    ``_extra_state`` entries skipped), and the ``linear_qkv`` rows of the TP ranks (each a contiguous
    run of query groups) are joined and permuted from the per-group interleaved layout to ours. A
    hybrid model's stages are the ``|`` segments of its ``hybrid_layer_pattern`` when it has them
    (segment ``c * PP + r`` on chunk ``c`` of stage ``r``); its Mamba tensors are split over TP as ours.
    A gated DeltaNet's ``in_proj`` is read as our two projections (views of its rows); a rank's experts,
    in any of Megatron's three layouts, as our stacked ``[E, rows, cols]`` piece, and the EP rank files
    hold the expert slices. MLA down projections whose rows the files split over TP (megatron-core's local
    layers) are joined; MTP layers are read under either of megatron-core's names.
    """

    def __init__(self, load_dir: str, family_name: Optional[str], vocab_size: Optional[int]) -> None:
        self.vocab_size_flag = vocab_size
        self.stored_names: Dict[Tuple[int, int], Dict[str, Any]] = {}  # (stage, chunk) -> {ours: theirs}
        self.split_names: set = set()  # our MLA down projections whose rows the files split over TP
        super().__init__(load_dir, family_name)
        self.config = self._family_routing(self.config)

    def _family_routing(self, config: TransformerConfig) -> TransformerConfig:
        """Of our spellings of the routing Megatron computes, the one the family's HF config can say: Megatron's
        softmax over the top-k logits is also a softmax over every expert whose top-k is renormalised (our
        ``--moe-router-pre-softmax --norm-topk-prob``: Qwen's MoE families say only that one, Mixtral-like ones
        the first), and its group score, the sum of a group's best top-k / group-topk, is our default or that
        number written out (DeepSeek-V3-like families say the second). ``config`` when no spelling fits."""
        if not config.num_experts:
            return config
        candidates = [config]
        if (config.moe_router_score_function == "softmax" and not config.moe_router_pre_softmax
                and config.moe_router_num_groups is None and not config.moe_router_enable_expert_bias):
            candidates.append(replace(config, moe_router_pre_softmax=True, norm_topk_prob=True))
        if config.moe_router_num_groups is not None and config.moe_router_group_score_topk is None:
            candidates.append(replace(config, moe_router_group_score_topk=config.moe_router_topk
                                      // config.moe_router_group_topk))
        for candidate in candidates:
            try:
                self.family.to_hf_config(candidate)
            except (RegistryError, ValueError):
                continue
            return candidate
        return config  # the family refuses something else: an HF target says what

    def _load(self, path: str) -> Dict[str, Any]:
        """One rank file of Megatron's, memory-mapped; its foreign objects load as inert placeholders."""
        try:
            return map_foreign_file(path)
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _config(self, first: Dict[str, Any], args: argparse.Namespace, load_dir: str) -> TransformerConfig:
        path = self.path(0, 0)
        if "transformer_config" in first:
            raise ConversionError(f"{path} stores a transformer_config: it was written by this suite, whose "
                                  "linear_qkv rows are not Megatron's; pass --load-model-type mg")
        if not isinstance(first.get("args"), argparse.Namespace):
            raise ConversionError(f"{path} has no 'args': Megatron-LM and MindSpeed-LLM store the model's arguments "
                                  "there, and without them its heads, groups and parallel layout are unknown")
        saved_pp = int(getattr(args, "pipeline_model_parallel_size", None) or 1)
        if saved_pp != self.pp:
            raise ConversionError(f"{load_dir}: args.pipeline_model_parallel_size is {saved_pp}, the rank "
                                  f"directories give {self.pp}; the checkpoint is incomplete or inconsistent")
        try:
            kwargs = megatron_format.config_from_args(args, self.vocab_size_flag)
            config = TransformerConfig(**{**kwargs, "tensor_model_parallel_size": self.tp,
                                          "expert_model_parallel_size": self.ep if kwargs.get("num_experts") else 1})
        except ValueError as error:  # MegatronFormatError included
            raise ConversionError(f"{path}: {error}") from None
        if config.num_query_groups % self.tp:
            raise ConversionError(f"{path}: args.num_query_groups {config.num_query_groups} is not divisible by "
                                  f"args.tensor_model_parallel_size {self.tp}; the checkpoint is inconsistent")
        return config

    def _placement(self, first: Dict[str, Any], args: argparse.Namespace) -> Placement:
        segments = megatron_format.pattern_segments(args)
        if segments is not None:  # a hybrid pattern's '|' segments: virtual stage c * PP + r each
            return self._segment_placement(segments)
        layer_list = getattr(args, "num_layer_list", None)
        if isinstance(layer_list, str):  # MindSpeed's flag value, "3,5"
            args = argparse.Namespace(**{**vars(args), "num_layer_list": [int(n) for n in layer_list.split(",")]})
        return super()._placement(first, args)

    def _segment_placement(self, segments: List[str]) -> Placement:
        chunks = len(segments) // self.pp
        if chunks * self.pp != len(segments) or not all(segments):
            raise ConversionError(f"{self.path(0, 0)}: args.hybrid_layer_pattern has {len(segments)} '|'-separated "
                                  f"segments, which are not non-empty and a multiple of the {self.pp} pipeline "
                                  "stages; the checkpoint is inconsistent")
        starts = [sum(len(segment) for segment in segments[:index]) for index in range(len(segments))]
        return [[list(range(starts[chunk * self.pp + stage], starts[chunk * self.pp + stage]
                            + len(segments[chunk * self.pp + stage]))) for chunk in range(chunks)]
                for stage in range(self.pp)]

    def _our_names(self, state: Dict[str, Any], stage: int, chunk: int) -> Dict[str, Any]:
        layers = self.placement[stage][chunk]
        ours: Dict[str, Any] = {}
        names: Dict[str, Any] = {}
        experts: Dict[str, Dict[Tuple[str, str, Optional[int]], str]] = {}  # our stacked name -> its entries
        for their, value in state.items():
            if their.split(".")[0] == "language_model":
                raise ConversionError(f"{self.path(0, stage)} holds a legacy (non-mcore) GPT model ({their!r}); "
                                      "only mcore models (--use-mcore-models) are supported")
            parsed = megatron_format.our_layer_name(their)
            if parsed is None:
                continue  # _extra_state: no weights
            local, name = parsed
            if local is not None:
                if local >= len(layers):
                    raise ConversionError(f"{self.path(0, stage)}: {their!r} is layer {local} of a chunk of "
                                          f"{len(layers)} layers; the checkpoint does not match its args")
                name = name.replace("{i}", str(layers[local]))
            layer_prefix, experts_marker, entry_name = their.partition(".mlp.experts.")
            entry = megatron_format.expert_entry("mlp.experts." + entry_name) if experts_marker else None
            if entry is not None:  # a rank's experts: stacked into ours below
                stacked = f"{layer_prefix}.mlp.experts.linear_{entry[1]}.weight"
                ours_stacked = megatron_format.our_layer_name(stacked)[1]
                if local is not None:
                    ours_stacked = ours_stacked.replace("{i}", str(layers[local]))
                experts.setdefault(ours_stacked, {})[entry] = their
                continue
            if megatron_format.is_gdn_in_proj(their):  # two of ours: [qkvz part; ba part]
                prefix = name[:-len(megatron_format.GDN_IN_PROJ)]
                for part in megatron_format.GDN_IN_PROJ_PARTS:
                    ours[prefix + part], names[prefix + part] = self._gdn_part(value, part), their
                continue
            if self._split_rows(name, value):  # a local MLA down projection: rows split over TP, shape as ours
                value = torch.empty((value.size(0) * self.tp, *value.shape[1:]), dtype=value.dtype, device="meta")
                self.split_names.add(name)
            ours[name], names[name] = value, their
        for name, entries in experts.items():
            names[name] = self._expert_entries(name, entries)
            ours[name] = self._stacked_experts(state, names[name], meta=True)
        self.stored_names[(stage, chunk)] = names
        return ours

    def _expert_entries(self, name: str, entries: Dict[Tuple[str, str, Optional[int]], str]) -> ExpertEntries:
        """The Megatron entries of our stacked expert tensor ``name`` in expert order; one layout, every local
        expert once."""
        layouts = {layout for layout, _, _ in entries}
        local = self.config.num_experts // self.ep
        ordered = sorted(entries.items(), key=lambda item: item[0][2] or 0)
        layout, which, _ = ordered[0][0]
        indices = [index for (_, _, index), _ in ordered]
        expected = [None] if layout == megatron_format.GROUPED_EXPERTS else list(range(local))
        if len(layouts) > 1 or indices != expected:
            raise ConversionError(f"{self.path(0, 0)}: the experts of {name!r} are stored as "
                                  f"{sorted(their for _, their in ordered)[:4]}...; expected the {local} local experts "
                                  "of one Megatron layout (local_experts.i, linear_fc1.weight<i> or weight1/weight2)")
        return ExpertEntries(layout, which, tuple(their for _, their in ordered))

    def _stacked_experts(self, state: Dict[str, Any], entries: ExpertEntries, meta: bool = False) -> torch.Tensor:
        """A rank's experts as our ``[E, rows, cols]`` piece (``meta``: its shape only)."""
        tensors = [state[name] for name in entries.names]
        if meta:
            tensors = [torch.empty(tuple(t.shape), dtype=t.dtype, device="meta") for t in tensors]
        return megatron_format.experts_from_megatron(entries.layout, entries.which, tensors,
                                                     self.config.num_experts // self.ep)

    def _gdn_part(self, in_proj: Any, part: str) -> Any:
        """The rows of Megatron's GDN ``in_proj`` (one TP rank's) that hold our ``part`` (a view)."""
        qkvz, ba = megatron_format.gdn_in_proj_rows(self.config, self.tp)
        if not isinstance(in_proj, torch.Tensor) or in_proj.dim() < 1 or in_proj.size(0) != qkvz + ba:
            shape = tuple(in_proj.shape) if isinstance(in_proj, torch.Tensor) else type(in_proj).__name__
            raise ConversionError(f"{self.path(0, 0)}: a gated DeltaNet in_proj of shape {shape} does not hold the "
                                  f"{qkvz} + {ba} rows its args give a TP rank; the checkpoint does not match its args")
        first = part == megatron_format.GDN_IN_PROJ_PARTS[0]
        return in_proj.narrow(0, 0 if first else qkvz, qkvz if first else ba)

    def _split_rows(self, name: str, value: Any) -> bool:
        """Whether ``value`` is a TP rank's rows of an MLA down projection (megatron-core's local layers build them
        as ColumnParallelLinear and gather their output; Transformer Engine's keep them whole)."""
        if not name.endswith(megatron_format.MLA_DOWN_PROJECTIONS) or not isinstance(value, torch.Tensor):
            return False
        return self.tp > 1 and value.size(0) * self.tp == megatron_format.mla_down_rows(self.config, name)

    def _stored_shard(self, name: str, layout: ModelLayout) -> Optional[TPShard]:
        if name in self.split_names:
            return TPShard.even(0, megatron_format.mla_down_rows(self.config, name))
        return super()._stored_shard(name, layout)

    def _stored_name(self, stage: int, chunk: int, local: str) -> str:
        stored = self.stored_names[(stage, chunk)][local]
        return stored.names[0] if isinstance(stored, ExpertEntries) else stored

    def _stored_piece(self, state: Dict[str, Any], stage: int, chunk: int, local: str) -> torch.Tensor:
        stored = self.stored_names[(stage, chunk)][local]
        if isinstance(stored, ExpertEntries):
            return self._stacked_experts(state, stored)
        value = state[stored]
        if megatron_format.is_gdn_in_proj_part(local):
            return self._gdn_part(value, local[local.index("self_attention."):])
        return value

    def _place(self, name: str, shard: TPShard, piece: torch.Tensor, rank: int, full: torch.Tensor) -> None:
        if megatron_format.is_gdn_in_proj_part(name):  # the rank's [q; k; v; z] / [b; a] rows, grouped as ours
            piece = megatron_format.gdn_part_from_megatron(name, piece, self.config, self.tp)
        if not megatron_format.is_fused_qkv(name):
            super()._place(name, shard, piece, rank, full)
            return
        rows = piece.size(0)  # each rank holds a contiguous run of query groups, in rank order
        full.narrow(0, rank * rows, rows).copy_(piece)

    def _to_our_layout(self, name: str, full: torch.Tensor) -> torch.Tensor:
        config = self.config
        if megatron_format.is_gdn_norm(name) and config.apply_layernorm_1p:
            return full + 1  # Megatron's out_norm is zero-centred with the model's norms: (1 + w)
        if not megatron_format.is_fused_qkv(name):
            return full
        # full: [groups * (q/g (+ q/g gates) + 2) * hd, ...] interleaved
        return interleaved_to_ours(full, config.num_attention_heads, config.num_query_groups, config.kv_channels,
                                   gated=config.attention_output_gate)


class MegatronLMSink(MegatronSink):
    """Writes a checkpoint Megatron-LM and MindSpeed-LLM load (``--save-model-type megatron``).

    Files as :class:`MegatronSink` writes ours, but with their names (chunk-local layer numbers;
    Transformer Engine norm names and ``_extra_state`` entries with ``--transformer-impl
    transformer_engine``), ``linear_qkv`` rows interleaved per query group and split over TP by
    whole groups, and ``args`` in their flag names (:func:`megatron_format.args_from_config`). A hybrid
    model gets Megatron's ``decoder.final_norm``, the ``_extra_state`` entries of each layer's kind, its
    pattern with ``|`` between the stages (and chunks) in ``hybrid_layer_pattern``, and needs a TP size
    that divides its Mamba groups. A gated DeltaNet's two projections are written as Megatron's one
    ``in_proj`` once both have come; the experts of a rank as the entries of the layout
    ``--moe-grouped-gemm`` and ``--transformer-impl`` select, one file per TP, PP and EP rank. With local
    layers the MLA down projections' rows are split over TP (megatron-core builds them as ColumnParallelLinear);
    MTP layers are named as ``--megatron-mtp-layer-name`` says.
    """

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str, hf_config: Optional[Dict[str, Any]],
                 transformer_impl: str, grouped_gemm: bool = False,
                 mtp_layer: str = megatron_format.MTP_LAYER) -> None:
        super().__init__(save_dir, layout, family_name, hf_config)
        config, self.transformer_impl, self.mtp_layer = layout.config, transformer_impl, mtp_layer
        # megatron-core's local MLA layers split the down projections' rows over TP (TE keeps them whole)
        self.split_down = config.multi_latent_attention and transformer_impl == "local" and layout.tp > 1
        for name in megatron_format.MLA_DOWN_PROJECTIONS if self.split_down else ():
            rows = megatron_format.mla_down_rows(config, name)
            if rows and rows % layout.tp:
                raise ConversionError(f"--target-tensor-parallel-size {layout.tp} does not divide the {rows} rows of "
                                      f"MLA's {name.split('.')[1]}, which megatron-core's local layers split over TP; "
                                      "choose a TP size that divides them or pass --transformer-impl "
                                      "transformer_engine")
        if config.is_dsa and transformer_impl != "transformer_engine":
            raise ConversionError("--save-model-type megatron: megatron-core builds DeepSeek Sparse Attention from "
                                  "Transformer Engine's layers only; pass --transformer-impl transformer_engine")
        if grouped_gemm and not config.num_experts:
            raise ConversionError("--moe-grouped-gemm lays out experts, and this model has none (a dense model); "
                                  "drop it")
        if mtp_layer != megatron_format.MTP_LAYER and not config.mtp_num_layers:
            raise ConversionError(f"--megatron-mtp-layer-name {mtp_layer} names MTP layers, and this model has none; "
                                  "drop it")
        self.experts = megatron_format.expert_layout(transformer_impl, grouped_gemm)
        self.local_experts = config.num_experts // layout.ep if config.num_experts else 0
        if layout.whole_experts:
            raise ConversionError("--save-model-type megatron splits each expert over TP as the dense MLP (Megatron's "
                                  "default expert TP); whole experts (expert TP 1) are not supported there")
        if config.num_query_groups % layout.tp:
            raise ConversionError(f"--target-tensor-parallel-size {layout.tp} does not divide the "
                                  f"{config.num_query_groups} key/value groups: Megatron-LM splits them over TP "
                                  "(it does not replicate them); choose a TP size that divides them")
        if config.has_mamba_layers and config.mamba_num_groups % layout.tp:
            raise ConversionError(f"--target-tensor-parallel-size {layout.tp} does not divide the "
                                  f"{config.mamba_num_groups} Mamba groups: Megatron-LM splits them over TP (it does "
                                  "not replicate them); choose a TP size that divides them")
        try:
            self.fields = megatron_format.args_from_config(config)
            self.fields.update(moe_grouped_gemm=grouped_gemm,
                               expert_tensor_parallel_size=layout.tp if config.num_experts else None)
            if config.hybrid_override_pattern is not None:  # newer Megatron-core places the stages by '|'
                self.fields["hybrid_layer_pattern"] = megatron_format.staged_pattern(config.hybrid_override_pattern,
                                                                                     layout.placement)
        except megatron_format.MegatronFormatError as error:
            raise ConversionError(f"--save-model-type megatron: {error}") from None
        self.names: Dict[Tuple[int, int], Dict[str, str]] = {}  # (stage, chunk) -> {ours: theirs}
        # (rank, stage, chunk, Megatron's name) -> {our part: its rows} of a GDN in_proj still missing a part
        self.pending_parts: Dict[Tuple[int, int, int, str], Dict[str, torch.Tensor]] = {}
        for stage, chunks in enumerate(layout.chunk_names):
            for chunk, names in enumerate(chunks):
                local = {layer: index for index, layer in enumerate(layout.placement[stage][chunk])}
                self.names[(stage, chunk)] = {name: self._their_name(name, local) for name in names}

    def _their_name(self, name: str, local: Dict[int, int]) -> str:
        parts = megatron_format.split_layer(name)
        config = self.layout.config
        layer = parts[0] if parts else (config.num_layers - 1)  # an MTP module's layer is built as the last one
        mixer, mlp = config.layer_parts(layer)
        return megatron_format.their_name(name, local[parts[0]] if parts else None, self.transformer_impl,
                                          hybrid=config.hybrid_override_pattern is not None, mixer=mixer, mlp=mlp,
                                          mla=config.multi_latent_attention, mtp_layer=self.mtp_layer,
                                          dsa=config.is_dsa)

    def _add(self, rank: int, stage: int, chunk: int, local: str, value: torch.Tensor) -> Any:
        """A rank's stacked experts ``[E, rows, cols]`` go in as Megatron's entries (one per expert, or the
        grouped layout's one tensor): a dict of their placeholders by Megatron name."""
        which = next((which for ours, which in megatron_format.EXPERT_PARTS.items() if local.endswith(ours)), None)
        if which is None:
            return super()._add(rank, stage, chunk, local, value)
        prefix = self.names[(stage, chunk)][local].rsplit(".mlp.experts.", 1)[0] + "."
        names = megatron_format.expert_entry_names(self.experts, which, value.size(0))
        tensors = megatron_format.experts_to_megatron(self.experts, which, value)
        return {prefix + name: super(MegatronLMSink, self)._add(rank, stage, chunk, local, tensor.contiguous())
                for name, tensor in zip(names, tensors)}

    def _piece(self, name: str, full: torch.Tensor, shard: Optional[TPShard], rank: int) -> torch.Tensor:
        config = self.layout.config
        if self.split_down and name.endswith(megatron_format.MLA_DOWN_PROJECTIONS):
            return full.chunk(self.layout.tp)[rank].clone()
        if megatron_format.is_gdn_norm(name) and config.apply_layernorm_1p:
            return full - 1  # Megatron's out_norm is zero-centred with the model's norms: (1 + w)
        if megatron_format.is_gdn_in_proj_part(name):  # our rank's rows, in Megatron's order for that rank
            return megatron_format.gdn_part_to_megatron(name, super()._piece(name, full, shard, rank), config,
                                                        self.layout.tp)
        if not megatron_format.is_fused_qkv(name):
            return super()._piece(name, full, shard, rank)
        interleaved = ours_to_interleaved(full, config.num_attention_heads, config.num_query_groups,
                                          config.kv_channels, gated=config.attention_output_gate)
        return interleaved.chunk(self.layout.tp, dim=0)[rank].clone()  # a contiguous run of groups

    def write(self, name: str, pieces: List[Tuple[int, Location, torch.Tensor]]) -> None:
        """As :class:`MegatronSink` writes, except that the two parts of a gated DeltaNet's ``in_proj`` are held
        until both have come and written as Megatron's one tensor (``in_proj_qkvz``'s rows, then
        ``in_proj_ba``'s), under the first part's name; the second is recorded as absorbed."""
        if not megatron_format.is_gdn_in_proj_part(name):
            super().write(name, pieces)
            return
        whole = []
        for rank, (stage, chunk, local), value in pieces:
            key = (rank, stage, chunk, self.names[(stage, chunk)][local])
            parts = self.pending_parts.setdefault(key, {})
            parts[local] = value
            if len(parts) < len(megatron_format.GDN_IN_PROJ_PARTS):
                continue
            del self.pending_parts[key]
            first, second = sorted(parts, key=lambda part: not part.endswith(megatron_format.GDN_IN_PROJ_PARTS[0]))
            self.per_file.setdefault((rank, stage), [{} for _ in range(self.layout.vpp)])[chunk][second] = ABSORBED
            self.missing[(rank, stage)].discard((chunk, second))
            whole.append((rank, (stage, chunk, first), torch.cat([parts[first], parts[second]])))
        if whole:
            super().write(name, whole)

    def _stored_states(self, stage: int, chunks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        states = []
        for chunk, state in enumerate(chunks):
            names = self.names[(stage, chunk)]
            stored: Dict[str, Any] = {}
            for name, value in state.items():
                if isinstance(value, dict):  # a rank's experts: Megatron's entries
                    stored.update(value)
                elif value is not ABSORBED:
                    stored[names[name]] = value
            if self.transformer_impl == "transformer_engine":
                config = self.layout.config
                layers = [(i, layer) for i, layer in enumerate(self.layout.placement[stage][chunk])
                          if layer not in set(config.noop_layers)]
                mtp = self.mtp_layer if any(name.startswith("mtp.") for name in state) else None
                stored.update({key: None for key in megatron_format.extra_state_names(
                    layers, config, self.experts, self.local_experts, mtp)})
            states.append(stored)
        return states

    def _metadata(self) -> Dict[str, Any]:
        args = checkpoint_args(self.layout, self.family_name)
        vars(args).update(self.fields, transformer_impl=self.transformer_impl)
        return {"args": args, "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0}



"""Tensor-parallel LoRA: low-rank adapters on the column- and row-parallel linears of the decoder.

``W x`` becomes ``W x + (alpha / r) * B A dropout(x)`` with ``A`` ``[r, in]`` and ``B`` ``[out, r]``
(LoRA, Hu et al. 2021; PEFT's ``lora_A`` / ``lora_B``). :func:`add_lora` turns the targeted layers of a
model into :class:`LoraColumnParallelLinear` / :class:`LoraRowParallelLinear` (the instance's class is
swapped, as ``torch.nn.utils.parametrize`` does, so the base parameters keep their names and checkpoint
keys) and freezes every other parameter (``requires_grad`` False: no gradient buffer, no optimizer state),
except the modules named in ``modules_to_save``, which are trained fully beside the adapters.

How the factors are split over TP (the base weight's :class:`TPShard` decides, segments included):

* column-parallel (``W`` ``[out/tp, in]``, fused QKV / gate-up by segments): ``A`` ``[r, in]`` replicated,
  ``B`` ``[out/tp, r]`` split exactly like ``W`` (per segment; replicated GQA key/value heads included).
  The adapter reads the input the product sees (all-gathered under sequence parallelism) and its output
  joins the local ``[s, b, out/tp]`` product. ``dL/dA = sum_tokens (B_local^T dy_local) x^T`` depends on
  this rank's rows of ``B`` only: a partial sum over TP, so ``A`` is marked ``grad_partial_over_tp``
  (summed over TP with the norm weights). ``dL/dB_local = dy_local (A x)^T`` is complete.
* row-parallel (``W`` ``[out, in/tp]``): ``A`` ``[r, in/tp]`` split like ``W`` along its input, ``B``
  ``[out, r]`` replicated. ``z = A_local x_local`` is a partial sum over TP and ``B z`` joins the partial
  product BEFORE the TP reduce (or reduce-scatter under sequence parallelism), so one collective carries
  both. ``dL/dB = dy z_local^T`` with the full ``dy`` (the reduce's backward copies it, the
  reduce-scatter's gathers it) and the partial ``z_local``: partial over TP, so ``B`` is marked
  ``grad_partial_over_tp``; ``dL/dA_local = (B^T dy) x_local^T`` is complete for its columns.

Adapters are fp32 whatever ``--bf16``/``--fp16`` says: the adapter input is cast to fp32 and the
adapter output back to the product's dtype. Dropout applies to the adapter input: with the default
generator on the column side (the input is the same on every TP rank) and with the model-parallel
generator on the row side (each rank holds other features). Initialisation is PEFT's: ``A``
kaiming-uniform with ``a = sqrt(5)`` (uniform in ``+-1/sqrt(in)``), ``B`` zeros; ``A`` is drawn as a
full tensor from the seed and its name and then sliced (``init='lora_kaiming_uniform'``, see
``core.models.gpt_model.full_initial_value``), so TP 1, 2 and 4 start from the same adapters.

Parameter names (what a converter maps to PEFT, per projection)::

    decoder.layers.{i}.self_attention.linear_qkv.lora_A.weight   [r, h]            replicated
    decoder.layers.{i}.self_attention.linear_qkv.lora_B.weight   [(q+k+v)/tp, r]   rows [Q; K; V] per rank
    decoder.layers.{i}.self_attention.linear_proj.lora_A.weight  [r, heads*hn/tp]
    decoder.layers.{i}.self_attention.linear_proj.lora_B.weight  [h, r]            replicated
    decoder.layers.{i}.mlp.linear_fc1.lora_A.weight              [r, h]            replicated
    decoder.layers.{i}.mlp.linear_fc1.lora_B.weight              [(2)ffn/tp, r]    rows [gate; up] per rank
    decoder.layers.{i}.mlp.linear_fc2.lora_A.weight              [r, ffn/tp]
    decoder.layers.{i}.mlp.linear_fc2.lora_B.weight              [h, r]            replicated

``i`` is the global layer number. The full ``B`` of a fused layer is ``param_meta(B).tp_shard.unshard``
of the ranks' pieces, with the rows in the weight's segment order: PEFT's ``q_proj``/``k_proj``/``v_proj``
(or ``gate_proj``/``up_proj``) adapters are that ``B``'s row blocks, each with the shared ``A``
(``lora_A`` of ``q_proj``, ``k_proj`` and ``v_proj`` are all this ``A``). MLA's column-parallel
``linear_q_proj``/``linear_q_up_proj``/``linear_kv_up_proj`` may be targeted the same way.
Routed MoE experts (``ExpertMLPs``) and replicated linears (MLA's down projections) take no adapters:
naming them is refused, as is a name that matches no linear (:func:`check_targets`).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Set, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, add_bias, linear, mark_param
from core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from core.tensor_parallel.param_meta import TPShard, param_meta, update_meta
from core.tensor_parallel.random import get_rng_tracker

LORA_INIT = "lora_kaiming_uniform"  # PEFT's A: kaiming_uniform_(a=sqrt(5)) == uniform(+-1/sqrt(fan_in))
ADAPTER_MARKERS = (".lora_A.", ".lora_B.")


class LoraTargetError(ValueError):
    """A target or module-to-save names nothing that can carry it (one line)."""


@dataclass(frozen=True)
class LoraConfig:
    """``--lora-r``, ``--lora-alpha``, ``--lora-dropout``, ``--lora-target-modules``, ``--lora-modules-to-save``."""

    r: int
    alpha: float
    dropout: float
    target_modules: Tuple[str, ...]
    modules_to_save: Tuple[str, ...] = ()
    # (target, rank) where a target's adapters have another rank than ``r`` (their scaling stays alpha / r): a
    # fused projection holding k PEFT adapters of rank r exactly, A = [A_q; A_k; A_v] and B block-diagonal
    module_ranks: Tuple[Tuple[str, int], ...] = ()

    @property
    def scaling(self) -> float:
        return self.alpha / self.r

    def rank_of(self, target: str) -> int:
        return dict(self.module_ranks).get(target, self.r)

    def record(self) -> Dict[str, object]:
        """What an adapter checkpoint stores about its adapters (checked by ``--lora-load``)."""
        return {"r": self.r, "alpha": self.alpha, "target_modules": sorted(self.target_modules),
                "modules_to_save": sorted(self.modules_to_save),
                **({"module_ranks": dict(sorted(self.module_ranks))} if self.module_ranks else {})}


def lora_init_bound(fan_in: int) -> float:
    """The bound of PEFT's ``kaiming_uniform_(a=sqrt(5))``: gain sqrt(2/6), bound sqrt(3)*gain/sqrt(fan_in)."""
    return math.sqrt(3.0) * math.sqrt(2.0 / (1.0 + 5.0)) / math.sqrt(fan_in)


class LoraFactor(nn.Module):
    """One factor, as PEFT's ``lora_A`` / ``lora_B`` ``nn.Linear`` (its parameter is ``.weight``).

    The adapted linears call it (not its weight), so FSDP's forward hooks on it gather the factor: FSDP
    keeps a layer's factors in their own fp32 unit (``core/distributed/fsdp.py``).
    """

    def __init__(self, weight: nn.Parameter) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight)  # [..., in] -> [..., out]


def _factor(shape: Tuple[int, ...], device: torch.device, base: nn.Parameter, **meta: object) -> LoraFactor:
    """A factor of the adapted weight ``base``: a copy of a shared block's (held by several pipeline chunks)
    where ``base`` is one, its gradients summed over the copies and counted in the grad norm where base's are."""
    factor = mark_param(nn.Parameter(torch.empty(shape, dtype=torch.float32, device=device)), **meta)
    if param_meta(base).replicated_over_pipeline:
        update_meta(factor, replicated_over_pipeline=True,
                    excluded_from_grad_norm=param_meta(base).excluded_from_grad_norm)
    return LoraFactor(factor)


def _adapter_input(x: torch.Tensor, dropout: float, training: bool) -> torch.Tensor:
    return F.dropout(x.float(), dropout, training=training) if dropout > 0 else x.float()


class LoraColumnParallelLinear(ColumnParallelLinear):
    """A column-parallel linear plus ``scaling * B_local A x`` on its local output rows."""

    lora_A: LoraFactor  # weight [r, in], replicated over TP
    lora_B: LoraFactor  # weight [out/tp, r], split like the base weight
    lora_scaling: float
    lora_dropout: float
    lora_enabled: bool = True  # False inside adapters_disabled(): the base layer alone

    def attach(self, config: LoraConfig, r: int) -> None:
        device = self.weight.device
        self.lora_scaling, self.lora_dropout = config.scaling, config.dropout
        self.lora_A = _factor((r, self.weight.shape[1]), device, self.weight, init=LORA_INIT,
                              grad_partial_over_tp=self.group.size > 1)
        self.lora_B = _factor((self.weight.shape[0], r), device, self.weight, init="zeros",
                              tp_shard=TPShard(0, self.shard.segments))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sequence_parallel:
            x = gather_from_sequence_parallel_region(x, self.group)  # [s/tp, b, in] -> [s, b, in]
        else:
            x = copy_to_tensor_model_parallel_region(x, self.group)  # [s, b, in]
        y = linear(x, self.weight, self.bias)  # [s, b, out/tp]
        if self.lora_enabled:
            low = self.lora_A(_adapter_input(x, self.lora_dropout, self.training))  # [s, b, r]
            y = y + (self.lora_B(low) * self.lora_scaling).to(y.dtype)  # [s, b, out/tp]
        if self.gather_output:
            y = gather_from_tensor_model_parallel_region(y, self.group)  # [s, b, out]
        return y


class LoraRowParallelLinear(RowParallelLinear):
    """A row-parallel linear plus ``scaling * B A_local x_local``, added before the TP reduce."""

    lora_A: LoraFactor  # weight [r, in/tp], split like the base weight
    lora_B: LoraFactor  # weight [out, r], replicated over TP
    lora_scaling: float
    lora_dropout: float
    lora_enabled: bool = True  # False inside adapters_disabled(): the base layer alone

    def attach(self, config: LoraConfig, r: int) -> None:
        device = self.weight.device
        self.lora_scaling, self.lora_dropout = config.scaling, config.dropout
        self.lora_A = _factor((r, self.weight.shape[1]), device, self.weight, init=LORA_INIT,
                              tp_shard=TPShard(1, self.shard.segments))
        self.lora_B = _factor((self.weight.shape[0], r), device, self.weight, init="zeros",
                              grad_partial_over_tp=self.group.size > 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = scatter_to_tensor_model_parallel_region(x, self.group)  # [s, b, in/tp]
        y = linear(x, self.weight)  # [s, b, out], a partial sum over TP
        if self.lora_enabled:
            with get_rng_tracker().fork() if self.lora_dropout > 0 and self.training else contextlib.nullcontext():
                adapter_in = _adapter_input(x, self.lora_dropout, self.training)  # [s, b, in/tp]
            low = self.lora_A(adapter_in)  # [s, b, r], a partial sum over TP
            y = y + (self.lora_B(low) * self.lora_scaling).to(y.dtype)  # [s, b, out], partial
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel_region(y, self.group)  # [s/tp, b, out]
        else:
            y = reduce_from_tensor_model_parallel_region(y, self.group)
        return add_bias(y, self.bias) if self.bias is not None else y


LORA_CLASSES = {ColumnParallelLinear: LoraColumnParallelLinear, RowParallelLinear: LoraRowParallelLinear}


def has_adapters(model: nn.Module) -> bool:
    return any(isinstance(module, tuple(LORA_CLASSES.values())) for module in model.modules())


@contextlib.contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """Inside, every adapted linear of ``model`` computes its base layer alone (the adapter branch is skipped:
    no adapter compute, no LoRA dropout draw): the base model, with no second copy of it (DPO's reference
    under LoRA). The adapters' previous state is restored on exit, exceptions included."""
    adapted = [module for module in model.modules() if isinstance(module, tuple(LORA_CLASSES.values()))]
    before = [module.lora_enabled for module in adapted]
    for module in adapted:
        module.lora_enabled = False
    try:
        yield
    finally:
        for module, enabled in zip(adapted, before):
            module.lora_enabled = enabled


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def linear_names(decoder: nn.Module) -> Dict[str, Set[str]]:
    """Leaf name -> kinds ('column', 'row', 'other') of the linear-like modules of ``decoder`` of that name.

    'other': a module that cannot carry an adapter (routed experts' ``linear_fc1``, replicated linears).
    """
    kinds: Dict[str, Set[str]] = {}
    for name, module in decoder.named_modules():
        leaf = _leaf(name)
        if isinstance(module, ColumnParallelLinear):
            kinds.setdefault(leaf, set()).add("column")
        elif isinstance(module, RowParallelLinear):
            kinds.setdefault(leaf, set()).add("row")
        elif leaf.startswith("linear_") and hasattr(module, "weight"):
            kinds.setdefault(leaf, set()).add("other")
    return kinds


def check_targets(decoder: nn.Module, targets: Iterable[str]) -> None:
    """Every target names column/row-parallel linears of ``decoder`` (a whole model's, e.g. on meta)."""
    kinds = linear_names(decoder)
    supported = " ".join(sorted(name for name, found in kinds.items() if "other" not in found))
    for target in targets:
        if target not in kinds:
            raise LoraTargetError(f"--lora-target-modules {target}: no such linear in this model; choose from "
                                  f"{supported}")
        if "other" in kinds[target]:
            raise LoraTargetError(f"--lora-target-modules {target}: some of those layers (routed MoE experts or "
                                  f"replicated linears) take no LoRA adapters; choose from {supported}")


def add_lora(model: nn.Module, config: LoraConfig) -> List[str]:
    """Attach adapters to the targeted linears of ``model.decoder`` and freeze everything else but
    ``config.modules_to_save``. Build it on the meta device and materialise after (the adapters are
    initialised there like every other parameter). Returns the adapted modules' names."""
    adapted = []
    for name, module in model.decoder.named_modules(prefix="decoder"):
        lora_class = LORA_CLASSES.get(type(module))
        if lora_class is None or _leaf(name) not in config.target_modules:
            continue
        module.__class__ = lora_class
        module.attach(config, config.rank_of(_leaf(name)))
        adapted.append(name)
    freeze_base(model, config.modules_to_save)
    return adapted


def is_adapter(name: str) -> bool:
    return any(marker in f".{name}" for marker in ADAPTER_MARKERS)


def saved_module(name: str, modules_to_save: Iterable[str]) -> bool:
    """Whether parameter ``name`` belongs to a module trained fully (a path component in the list)."""
    parts = set(name.split(".")[:-1])
    return any(module in parts for module in modules_to_save)


def freeze_base(model: nn.Module, modules_to_save: Iterable[str] = ()) -> None:
    """requires_grad False on every parameter but the adapters and the modules to save (with the word
    embeddings, the last pipeline stage's tied copy of them too). A reward model's value head, new and
    task-specific, always trains (PEFT keeps a sequence classifier's score head too)."""
    modules_to_save = tuple(modules_to_save) + ("value_head",)
    for name, param in model.named_parameters():
        tied_copy = "word_embeddings" in modules_to_save and param_meta(param).shared_across_stages
        param.requires_grad_(is_adapter(name) or saved_module(name, modules_to_save) or tied_copy)

"""Which global layer numbers each pipeline stage (and each virtual chunk) holds.

Megatron's placement rules:

* even split: stage ``r`` of ``p`` holds layers ``[r L/p, (r+1) L/p)``;
* ``--num-layer-list 3,5,5,3``: stage ``r`` holds the next ``n_r`` layers;
* virtual pipeline with ``k`` layers per virtual stage (``v = L / (p k)``
  chunks per stage): chunk ``c`` of stage ``r`` is virtual stage ``c p + r`` and
  holds layers ``[c L/v + r k, c L/v + (r+1) k)``.

Noop layers keep their slot (and number); they are parameterless identities.
The embedding sits on chunk 0 of stage 0, the final norm and output layer on
the last chunk of the last stage.

    placement = stage_layers(8, pp=2, vpp=2)      # [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

# placement[pp_rank][chunk] -> global layer numbers
Placement = List[List[List[int]]]


class LayoutError(ValueError):
    """A pipeline layout that does not fit the model; the message names the flags."""


def _even_counts(num_layers: int, pp: int) -> List[int]:
    if num_layers % pp != 0:
        raise LayoutError(f"--num-layers ({num_layers}) is not divisible by --pipeline-model-parallel-size "
                          f"({pp}); change either, give --num-layer-list, or pad with --noop-layers")
    return [num_layers // pp] * pp


def _checked_list(num_layers: int, pp: int, num_layer_list: Sequence[int]) -> List[int]:
    counts = list(num_layer_list)
    if len(counts) != pp:
        raise LayoutError(f"--num-layer-list has {len(counts)} entries, expected one per pipeline stage "
                          f"(--pipeline-model-parallel-size {pp})")
    if sum(counts) != num_layers or any(n < 0 for n in counts):
        raise LayoutError(f"--num-layer-list {','.join(map(str, counts))} sums to {sum(counts)}, expected "
                          f"--num-layers ({num_layers}) with no negative entry")
    return counts


def virtual_size(num_layers: int, pp: int, layers_per_virtual_stage: Optional[int]) -> Optional[int]:
    """Chunks per stage for ``--num-layers-per-virtual-pipeline-stage`` (None without VPP)."""
    if layers_per_virtual_stage is None:
        return None
    per_stage = num_layers // pp
    if layers_per_virtual_stage < 1 or num_layers % pp or per_stage % layers_per_virtual_stage:
        raise LayoutError(f"--num-layers-per-virtual-pipeline-stage ({layers_per_virtual_stage}) must divide the "
                          f"layers per pipeline stage (--num-layers / --pipeline-model-parallel-size = "
                          f"{num_layers / pp:g})")
    return per_stage // layers_per_virtual_stage


def resolve_virtual_pipeline(num_layers: int, pp: int, layers_per_virtual_stage: Optional[int],
                             vpp: Optional[int]) -> Optional[int]:
    """Chunks per stage from ``--num-layers-per-virtual-pipeline-stage`` and/or
    ``--virtual-pipeline-model-parallel-size`` (they must agree); None without a virtual pipeline."""
    if (layers_per_virtual_stage is not None or vpp is not None) and pp < 2:
        raise LayoutError("--num-layers-per-virtual-pipeline-stage / --virtual-pipeline-model-parallel-size need "
                          "--pipeline-model-parallel-size of 2 or more; drop them or raise the pipeline size")
    if vpp is not None and layers_per_virtual_stage is None:
        if vpp < 1 or num_layers % (pp * vpp) != 0:
            raise LayoutError(f"--virtual-pipeline-model-parallel-size ({vpp}) x --pipeline-model-parallel-size "
                              f"({pp}) must divide --num-layers ({num_layers})")
        layers_per_virtual_stage = num_layers // (pp * vpp)
    derived = virtual_size(num_layers, pp, layers_per_virtual_stage)
    if vpp is not None and derived != vpp:
        raise LayoutError(f"--virtual-pipeline-model-parallel-size ({vpp}) disagrees with "
                          f"--num-layers-per-virtual-pipeline-stage ({layers_per_virtual_stage}), "
                          f"which gives {derived}")
    return derived if derived and derived > 1 else None


def stage_layers(num_layers: int, pp: int, vpp: Optional[int] = None,
                 num_layer_list: Optional[Sequence[int]] = None) -> Placement:
    """``placement[r][c]``: the global layer numbers of chunk ``c`` on pipeline stage ``r``."""
    if vpp is not None and vpp > 1:
        if num_layer_list:
            raise LayoutError("--num-layer-list cannot be combined with a virtual pipeline "
                              "(--num-layers-per-virtual-pipeline-stage); drop one of them")
        if num_layers % (pp * vpp) != 0:
            raise LayoutError(f"--num-layers ({num_layers}) is not divisible by --pipeline-model-parallel-size "
                              f"({pp}) x virtual pipeline size ({vpp})")
        per_virtual = num_layers // (pp * vpp)
        per_chunk_span = num_layers // vpp
        return [[list(range(c * per_chunk_span + r * per_virtual, c * per_chunk_span + (r + 1) * per_virtual))
                 for c in range(vpp)] for r in range(pp)]
    counts = _checked_list(num_layers, pp, num_layer_list) if num_layer_list else _even_counts(num_layers, pp)
    starts = [sum(counts[:r]) for r in range(pp)]
    return [[list(range(starts[r], starts[r] + counts[r]))] for r in range(pp)]


@dataclass(frozen=True)
class ChunkSpec:
    """One model chunk: its layers and whether it holds the embedding / the output layer."""

    layer_numbers: List[int]
    pre_process: bool
    post_process: bool


def chunk_specs(placement: Placement, pp_rank: int) -> List[ChunkSpec]:
    """The model chunks of stage ``pp_rank``, in virtual order."""
    pp, vpp = len(placement), len(placement[0])
    return [ChunkSpec(placement[pp_rank][c], pre_process=pp_rank == 0 and c == 0,
                      post_process=pp_rank == pp - 1 and c == vpp - 1) for c in range(vpp)]

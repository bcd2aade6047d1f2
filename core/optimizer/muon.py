"""Muon (``--optimizer muon``): momentum SGD whose update of each weight matrix is orthogonalised, with AdamW for
the parameters that are not hidden matrices.

For a matrix parameter with gradient ``g`` (Keller Jordan's Muon, as Megatron-core and Moonlight use it)::

    m  <- mu * m + g                               (--muon-momentum)
    u  <- g + mu * m   with --muon-use-nesterov, else m
    O  <- NewtonSchulz(u)                          (--muon-num-ns-steps quintic iterations: U V^T of u's SVD, roughly)
    w  <- w * (1 - lr * wd) - lr * scale(rows, cols) * O

``scale`` is ``--muon-scale-mode`` times ``--muon-extra-scale-factor`` (Megatron-core's rules, on the *full*
matrix's shape): ``spectral`` ``sqrt(max(rows, cols))``, ``unit_rms_norm`` ``sqrt(rows / cols)``, ``shape_scaling``
``sqrt(max(1, rows / cols))``. Moonlight's learning-rate matching rule (the update's RMS equal to AdamW's, so
AdamW's learning rate and weight decay carry over) is ``spectral`` with an extra factor of 0.2.

Which parameters are matrices (:func:`uses_muon`): 2-D weights whose two dimensions both exceed one, and the
``[experts, out, in]`` stacks of MoE experts (each expert's matrix on its own). Everything else takes AdamW with
``--adam-beta1/2`` and ``--adam-eps`` (torch's AdamW formula, written out here so both live in one optimizer and
one state dict): the word and position embeddings and the output layer (Megatron's rule), norms, biases, and
tensors of other ranks (convolution kernels, per-head vectors).

Orthogonalisation needs the whole matrix, and in a parallel run nobody holds it. ``--muon-tp-mode``:

* ``duplicated`` (our default): every TP rank gathers the full matrix (``TPShard.unshard``, so fused QKV and
  gate/up rows land where one process has them, replicated KV heads once), orthogonalises it and keeps its slice:
  the same numbers as one process.
* ``distributed``: the Newton-Schulz products are summed over TP instead of gathered (each rank multiplies its own
  columns); equal to one process up to the order of the sums. Tensors with replicated KV heads fall back to
  ``duplicated``.
* ``blockwise`` (Megatron-core's default): each TP rank orthogonalises its own slice. Cheapest, and it depends on
  the TP size: a TP 2 run is not a TP 1 run.

With ``--muon-split-qkv`` (Megatron's default; ``--muon-no-split-qkv`` turns it off) a fused ``linear_qkv`` weight is
orthogonalised as its three matrices Q, K and V, each with its own scale. The data-parallel layouts gather what
they shard before any of this (the distributed optimizer its flat pieces, FSDP2 its row shards): the optimizer
that owns the parameters passes :class:`Muon` the function that does it (``orthogonalize_batch``).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from core.device import reduced_fp32_matmul_pays
from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce
from core.tensor_parallel.param_meta import ParamMeta, TPShard, gather_full_tensor, param_meta

MUON_SCALE_MODES = ("spectral", "unit_rms_norm", "shape_scaling")
MUON_TP_MODES = ("duplicated", "distributed", "blockwise")
# --muon-fp32-matmul-prec -> torch.set_float32_matmul_precision inside Newton-Schulz (Megatron's words -> torch's)
MUON_MATMUL_PRECISIONS: Dict[str, str] = {"high": "highest", "medium": "high", "low": "medium"}
QUINTIC = (3.4445, -4.7750, 2.0315)  # Keller Jordan's Newton-Schulz coefficients (a, b, c)
NS_EPS = 1e-7  # added to the Frobenius norm before dividing by it
MUON_KEYS = ("momentum_buffer",)  # its state per matrix (torch's SGD names its momentum alike)
QKV_WEIGHT = "linear_qkv.weight"


@dataclass(frozen=True)
class MuonSettings:
    """The Muon flags (Megatron-core's names without ``--muon-``)."""

    momentum: float = 0.9
    use_nesterov: bool = False
    num_ns_steps: int = 5
    scale_mode: str = "spectral"
    extra_scale_factor: float = 1.0
    tp_mode: str = "duplicated"
    split_qkv: bool = True
    fp32_matmul_prec: str = "medium"


def uses_muon(name: str, param: torch.Tensor, shape: Optional[Sequence[int]] = None) -> bool:
    """Whether ``param`` (called ``name``; ``shape``: its TP-local shape when ``param`` is a shard of it) is a
    matrix Muon steps; the rest takes AdamW."""
    shape = tuple(shape if shape is not None else param.shape)
    embedding_or_output = "embedding" in name or name.startswith("output_layer") or ".output_layer." in name
    if name.endswith(".bias") or embedding_or_output:
        return False
    if len(shape) == 3 and param_meta(param).is_expert:
        return min(shape[1:]) > 1
    return len(shape) == 2 and min(shape) > 1


def muon_scale(rows: int, cols: int, settings: MuonSettings) -> float:
    """The factor of an orthogonalised ``[rows, cols]`` update (``--muon-scale-mode``, ``--muon-extra-scale-factor``)."""
    if settings.scale_mode == "spectral":
        base = math.sqrt(max(rows, cols))
    elif settings.scale_mode == "unit_rms_norm":
        base = math.sqrt(rows / cols)
    elif settings.scale_mode == "shape_scaling":
        base = math.sqrt(max(1.0, rows / cols))
    else:
        raise ValueError(f"--muon-scale-mode {settings.scale_mode!r} is not one of {MUON_SCALE_MODES}")
    return settings.extra_scale_factor * base


@contextlib.contextmanager
def matmul_precision(setting: str, device_type: str) -> Iterator[None]:
    """``--muon-fp32-matmul-prec`` for the products inside (torch's fp32 matmul precision, restored after). Where
    reduced-precision fp32 products are emulated, slower than IEEE ones (a CPU without AMX), every setting runs
    IEEE fp32: the setting trades accuracy for speed, and there it would buy none."""
    before = torch.get_float32_matmul_precision()
    wanted = MUON_MATMUL_PRECISIONS[setting] if reduced_fp32_matmul_pays(device_type) else "highest"
    torch.set_float32_matmul_precision(wanted)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def newton_schulz(update: torch.Tensor, steps: int,
                  column_sum: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> torch.Tensor:
    """The orthogonal polar factor of each matrix of ``update`` [..., rows, cols], by ``steps`` quintic
    Newton-Schulz iterations in fp32 (the wide orientation: a tall matrix is worked on transposed).

    ``column_sum``: when the columns of ``update`` are split over ranks, the function that sums a partial
    ``[..., rows, rows]`` Gram matrix (and the squared norm) over them; the caller must then pass each rank's
    columns in the wide orientation already.
    """
    x = update.float()
    tall = column_sum is None and x.shape[-2] > x.shape[-1]
    if tall:
        x = x.transpose(-2, -1)
    sum_cols = column_sum if column_sum is not None else (lambda t: t)
    norm = sum_cols(x.square().sum(dim=(-2, -1), keepdim=True)).sqrt()  # [..., 1, 1]
    x = x / (norm + NS_EPS)
    a, b, c = QUINTIC
    for _ in range(steps):
        gram = sum_cols(x @ x.transpose(-2, -1))  # [..., rows, rows]
        poly = b * gram + c * (gram @ gram)
        x = a * x + poly @ x
    return x.transpose(-2, -1) if tall else x


def _blocks(meta: ParamMeta, name: str, settings: MuonSettings, full_rows: int, local: bool,
            tp: int) -> List[int]:
    """The row counts of the matrices a (full or TP-local) QKV weight is orthogonalised as; one block otherwise."""
    shard = meta.tp_shard
    if not (settings.split_qkv and name.endswith(QKV_WEIGHT) and shard is not None and shard.dim == 0):
        return [full_rows]
    return [seg.local_units(tp) * seg.unit_size if local else seg.size for seg in shard.segments]


def _orthogonalize_blocks(matrix: torch.Tensor, blocks: List[int], full_blocks: List[int], cols: int,
                          settings: MuonSettings) -> torch.Tensor:
    """Each row block of ``matrix`` [..., rows, cols] orthogonalised and scaled by its full block's shape."""
    parts = matrix.split(blocks, dim=-2)
    out = [newton_schulz(part, settings.num_ns_steps) * muon_scale(full, cols, settings)
           for part, full in zip(parts, full_blocks)]
    return torch.cat(out, dim=-2) if len(out) > 1 else out[0]


def _matrix_dims(update: torch.Tensor) -> Tuple[int, int]:
    """The (row, column) dimensions of a matrix update: the last two."""
    return update.dim() - 2, update.dim() - 1


def orthogonalize_local(update: torch.Tensor, name: str, meta: ParamMeta, settings: MuonSettings,
                        tp_group: Optional[Group]) -> torch.Tensor:
    """The scaled, orthogonalised update of one parameter from this TP rank's whole slice ``update`` (the same
    shape as the TP-local parameter); collective over TP for a split tensor unless ``blockwise``."""
    shard = meta.tp_shard
    tp = tp_group.size if tp_group is not None else 1
    row_dim, col_dim = _matrix_dims(update)
    with matmul_precision(settings.fp32_matmul_prec, update.device.type):
        if shard is None or tp == 1:
            blocks = _blocks(meta, name, settings, update.shape[row_dim], False, 1)
            return _orthogonalize_blocks(update, blocks, blocks, update.shape[col_dim], settings)
        full_shape = shard.full_shape(update.shape)
        rows, cols = full_shape[row_dim], full_shape[col_dim]
        full_blocks = _blocks(meta, name, settings, rows, False, tp)
        if settings.tp_mode == "blockwise":
            local_blocks = _blocks(meta, name, settings, update.shape[row_dim], True, tp)
            return _orthogonalize_blocks(update, local_blocks, full_blocks, cols, settings)
        if settings.tp_mode == "distributed" and not shard.has_replicas(tp) and len(full_blocks) == 1:
            return _distributed(update, shard, row_dim, rows, cols, settings, tp_group)
        full = gather_full_tensor(update, shard, tp_group)  # the one-process tensor
        return shard.shard(_orthogonalize_blocks(full, full_blocks, full_blocks, cols, settings), tp_group.rank, tp)


def _distributed(update: torch.Tensor, shard: TPShard, row_dim: int, rows: int, cols: int, settings: MuonSettings,
                 tp_group: Group) -> torch.Tensor:
    """Newton-Schulz with the Gram matrices summed over TP: the split dimension becomes the columns."""
    split_rows = shard.dim == row_dim
    x = update.transpose(-2, -1) if split_rows else update  # [..., unsplit, split part]

    def column_sum(partial: torch.Tensor) -> torch.Tensor:
        total = partial.contiguous()
        all_reduce(total, tp_group)
        return total

    out = newton_schulz(x, settings.num_ns_steps, column_sum) * muon_scale(rows, cols, settings)
    return out.transpose(-2, -1) if split_rows else out


OrthogonalizeBatch = Callable[[List[torch.Tensor], List[torch.Tensor]], List[torch.Tensor]]


class Muon(torch.optim.Optimizer):
    """Muon for the groups marked ``muon=True``, AdamW for the others, in one optimizer.

    ``orthogonalize_batch(params, updates)`` turns the momentum updates of the Muon parameters into their scaled,
    orthogonalised updates (same shapes); the optimizer that owns the parameters sets it (it knows how they are
    sharded). Without it the parameters are taken as whole matrices.
    """

    def __init__(self, groups: List[Dict], lr: float, weight_decay: float, betas: Tuple[float, float], eps: float,
                 settings: MuonSettings) -> None:
        if settings.num_ns_steps < 1:
            raise ValueError(f"--muon-num-ns-steps {settings.num_ns_steps} must be at least 1")
        self.settings = settings
        self.orthogonalize_batch: Optional[OrthogonalizeBatch] = None
        super().__init__(groups, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps, muon=False))

    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None) -> None:
        if closure is not None:
            raise ValueError("Muon takes no closure")
        matrices: List[Tuple[torch.Tensor, Dict]] = []
        updates: List[torch.Tensor] = []
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if group["muon"]:
                    matrices.append((param, group))
                    updates.append(self._momentum_update(param))
                else:
                    self._adamw(param, group)
        if not matrices:
            return
        params = [param for param, _ in matrices]
        orthogonal = (self.orthogonalize_batch(params, updates) if self.orthogonalize_batch is not None else
                      [orthogonalize_local(u, "", param_meta(p), self.settings, None) for p, u in zip(params, updates)])
        for (param, group), direction in zip(matrices, orthogonal):
            param.mul_(1.0 - group["lr"] * group["weight_decay"])
            param.add_(direction.to(param.dtype), alpha=-group["lr"])

    def _momentum_update(self, param: torch.Tensor) -> torch.Tensor:
        """Advance ``param``'s momentum by its gradient; the update to orthogonalise (Nesterov's or the momentum)."""
        state = self.state[param]
        grad = param.grad
        if "momentum_buffer" not in state:
            state["step"] = torch.tensor(0.0)
            state["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["step"] += 1
        momentum = state["momentum_buffer"]
        momentum.mul_(self.settings.momentum).add_(grad)
        if self.settings.use_nesterov:
            return grad.add(momentum, alpha=self.settings.momentum)
        return momentum.clone()

    def _adamw(self, param: torch.Tensor, group: Dict) -> None:
        """torch.optim.AdamW's single-tensor step (decoupled weight decay, bias corrections)."""
        state = self.state[param]
        if "exp_avg" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        beta1, beta2 = group["betas"]
        lr, grad = group["lr"], param.grad
        state["step"] += 1
        step = float(state["step"])
        param.mul_(1.0 - lr * group["weight_decay"])
        state["exp_avg"].lerp_(grad, 1.0 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        bias_correction1 = 1.0 - beta1 ** step
        bias_correction2_sqrt = math.sqrt(1.0 - beta2 ** step)
        denom = (state["exp_avg_sq"].sqrt() / bias_correction2_sqrt).add_(group["eps"])
        param.addcdiv_(state["exp_avg"], denom, value=-lr / bias_correction1)


def split_muon_groups(groups: List[Dict], is_matrix: Callable[[torch.Tensor], bool]) -> List[Dict]:
    """Megatron's decay / no-decay groups with the matrices moved into a group of their own (``muon=True``)."""
    result = []
    for group in groups:
        matrices = [p for p in group["params"] if is_matrix(p)]
        others = [p for p in group["params"] if not is_matrix(p)]
        if matrices:
            result.append({**group, "params": matrices, "muon": True})
        if others:
            result.append({**group, "params": others, "muon": False})
    return result

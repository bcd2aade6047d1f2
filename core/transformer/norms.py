"""RMSNorm and LayerNorm, with an optional fused kernel behind one function each.

The pure-PyTorch reference of RMSNorm computes in fp32 and casts back, as
Hugging Face's Llama does, so converted models match to the last bit in fp32.
On an NPU the vendor library's RMSNorm is used when present, on an NVIDIA GPU
apex's fused RMSNorm when NVIDIA apex is installed, else the reference (with or
without ``--use-fused-rmsnorm``: today's default). The flag adds a
``torch.compile``d reference where no package kernel exists (the CPU; see
``core/fused.py``; ``core/device.py`` says which package serves which device).
``rms_norm_kernel(device_type, fused)`` says which one (the vendor's, ``"apex"``,
``"compiled"`` or ``"reference"``);
``tests/unit/test_norms.py`` and ``tests/unit/test_fused_ops.py`` test that
choice with fake kernels and compare a real fused kernel with the reference
where one exists.

``--use-fused-rmsnorm`` also fuses the residual add before the MLP's pre-norm
(``add_rms_norm``: the sum and its norm in one pass): flash-attn's Triton
``rms_norm_fn`` with a residual on CUDA, the add then the vendor's RMSNorm on an
NPU, a ``torch.compile``d reference elsewhere.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import VENDOR_KERNEL, kernels_by_device, vendor_op
from core.fused import FusedOp, decide_kernel, kernel_choice, register_fused_op
from core.parallel_state import Group
from core.tensor_parallel.layers import mark_param
from core.tensor_parallel.mappings import sum_partials_over_tensor_model_parallel_region
from core.tensor_parallel.param_meta import Segment, TPShard


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * x / rms(x)``, computed in fp32; x ``[..., h]``."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


def weight_for_input(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``weight`` raised to fp32 when ``x`` is an fp32 residual stream and the parameters are bf16/fp16.

    The norm then computes in fp32 and its output is fp32, as Megatron's mixed-dtype
    norms (``--fp32-residual-connection``); the caller casts it to the parameters' dtype.
    """
    if x.dtype == torch.float32 and weight.dtype != torch.float32:
        return weight.float()
    return weight


RMSNormKernel = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def _vendor_kernel() -> Optional[RMSNormKernel]:
    vendor_rms_norm = vendor_op("rms_norm")
    if vendor_rms_norm is None:
        return None
    return lambda x, weight, eps: vendor_rms_norm(x, weight, epsilon=eps)[0]  # (y, rstd)


def _apex_kernel() -> Optional[RMSNormKernel]:
    try:
        from apex.normalization.fused_layer_norm import fused_rms_norm_affine
    except ImportError:  # apex is optional (and PyPI's "apex" is another project)
        return None
    return lambda x, weight, eps: fused_rms_norm_affine(x, weight, (x.size(-1),), eps)


# device type -> (kernel name, loader returning the kernel or None when its package is missing)
FUSED_KERNELS: Dict[str, Tuple[str, Callable[[], Optional[RMSNormKernel]]]] = kernels_by_device(
    vendor=(VENDOR_KERNEL, _vendor_kernel), apex=("apex", _apex_kernel))


RMS_NORM = FusedOp("rmsnorm", "--use-fused-rmsnorm", rms_norm_reference, FUSED_KERNELS, kernels_by_default=True)


@kernel_choice
def rms_norm_kernel(device_type: str, fused: bool = False) -> Tuple[str, RMSNormKernel]:
    """The RMSNorm kernel for tensors on ``device_type``: (the vendor's | "apex" | "compiled" | "reference",
    function); ``fused``: ``--use-fused-rmsnorm``.

    Looked up once per device type (``rms_norm_kernel.cache_clear()`` forgets the choice).
    """
    return decide_kernel(RMS_NORM, device_type, fused)


register_fused_op("rmsnorm", "use_fused_rmsnorm", rms_norm_kernel)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, fused: bool = False) -> torch.Tensor:
    """RMSNorm through the kernel chosen for ``x``'s device (``fused``: ``--use-fused-rmsnorm``); x ``[..., h]``."""
    return rms_norm_kernel(x.device.type, fused)[1](x, weight, eps)


AddRMSNormKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], Tuple[torch.Tensor, torch.Tensor]]


def add_rms_norm_reference(residual: torch.Tensor, branch: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(residual + branch), residual + branch)``: a residual add and the norm that reads its sum;
    all ``[..., h]``."""
    total = residual + branch
    return rms_norm_reference(total, weight, eps), total


def _vendor_add_kernel() -> Optional[AddRMSNormKernel]:
    norm = _vendor_kernel()
    if norm is None:
        return None

    def kernel(residual: torch.Tensor, branch: torch.Tensor, weight: torch.Tensor,
               eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
        total = residual + branch
        return norm(total, weight, eps), total
    return kernel


def _flash_attn_add_kernel() -> Optional[AddRMSNormKernel]:
    try:
        from flash_attn.ops.triton.layer_norm import rms_norm_fn
    except ImportError:  # flash-attn is optional
        return None

    def kernel(residual: torch.Tensor, branch: torch.Tensor, weight: torch.Tensor,
               eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
        normed, total = rms_norm_fn(branch, weight, None, residual=residual, eps=eps, prenorm=True)
        return normed, total
    return kernel


ADD_RMS_NORM = FusedOp("add_rmsnorm", "--use-fused-rmsnorm", add_rms_norm_reference,
                       kernels_by_device(vendor=(VENDOR_KERNEL, _vendor_add_kernel),
                                         flash_attn=("flash_attn", _flash_attn_add_kernel)))


@kernel_choice
def add_rms_norm_kernel(device_type: str, fused: bool = False) -> Tuple[str, AddRMSNormKernel]:
    """The residual add + RMSNorm kernel for ``device_type``: (the vendor's | "flash_attn" | "compiled" |
    "reference", function); ``fused``: ``--use-fused-rmsnorm``."""
    return decide_kernel(ADD_RMS_NORM, device_type, fused)


register_fused_op("add_rmsnorm", "use_fused_rmsnorm", add_rms_norm_kernel)


class RMSNorm(nn.Module):
    """``weight * x / rms(x)``; with ``offset`` (``--apply-layernorm-1p``) the scale is ``1 + weight``.

    ``grad_partial_over_tp``: each TP rank's gradient is a partial sum (sequence
    parallelism, or a per-head norm applied to each rank's own heads). ``fused``: ``--use-fused-rmsnorm``.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6, grad_partial_over_tp: bool = False,
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None,
                 offset: bool = False, fused: bool = False) -> None:
        super().__init__()
        self.eps, self.offset, self.fused = eps, offset, fused
        self.weight = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                                 init="zeros" if offset else "ones", grad_partial_over_tp=grad_partial_over_tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = weight_for_input(self.weight, x)
        return rms_norm(x, weight + 1.0 if self.offset else weight, self.eps, self.fused)

    def add_forward(self, residual: torch.Tensor, branch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(self(residual + branch), residual + branch)`` through :func:`add_rms_norm_kernel`."""
        weight = weight_for_input(self.weight, residual)
        kernel = add_rms_norm_kernel(residual.device.type, self.fused)[1]
        return kernel(residual, branch, weight + 1.0 if self.offset else weight, self.eps)


class LayerNorm(nn.Module):
    """LayerNorm with weight and (unless ``bias=False``, ``--no-layernorm-bias``) bias; with ``offset`` the
    scale is ``1 + weight`` (LayerNorm1P)."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, grad_partial_over_tp: bool = False,
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None,
                 offset: bool = False, bias: bool = True) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                                 init="zeros" if offset else "ones", grad_partial_over_tp=grad_partial_over_tp)
        self.bias = None
        if bias:
            self.bias = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                                   init="zeros", grad_partial_over_tp=grad_partial_over_tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = weight_for_input(self.weight, x), self.bias
        weight = weight + 1.0 if self.offset else weight
        bias = weight_for_input(bias, x) if bias is not None else None
        return F.layer_norm(x, (x.size(-1),), weight, bias, self.eps)


class NonParametricNorm(nn.Module):
    """RMSNorm or LayerNorm without weight or bias, computed in fp32 (Olmo's LayerNorm)."""

    def __init__(self, kind: str, eps: float) -> None:
        super().__init__()
        self.kind, self.eps = kind, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()  # [..., h]
        if self.kind == "LayerNorm":
            return F.layer_norm(x32, (x.size(-1),), None, None, self.eps).to(x.dtype)
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class TensorParallelRMSNorm(nn.Module):
    """RMSNorm over a dim split over TP by ``segment`` (heads x head_dim): Olmo2's full-width q/k norm.

    Each rank holds its heads' channels and their weights; the sum of squares is
    all-reduced over TP in forward and backward (replicated heads, TP above the
    KV heads, are counted once), so every rank normalises by the full-width RMS.
    """

    def __init__(self, segment: Segment, eps: float, group: Group, dtype: Optional[torch.dtype] = None,
                 offset: bool = False) -> None:
        super().__init__()
        tp = group.size
        self.eps, self.offset, self.group, self.full_size = eps, offset, group, segment.size
        self.replicas = tp // segment.units if segment.is_replicated(tp) else 1
        local = segment.local_units(tp) * segment.unit_size
        self.weight = mark_param(nn.Parameter(torch.empty(local, dtype=dtype)), init="zeros" if offset else "ones",
                                 tp_shard=TPShard(0, (segment,)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x [..., local heads * hn]
        dtype = x.dtype
        x32 = x.float()
        squares = x32.pow(2).sum(-1, keepdim=True)  # [..., 1] this rank's partial sum
        squares = sum_partials_over_tensor_model_parallel_region(squares, self.group) / self.replicas
        x32 = x32 * torch.rsqrt(squares / self.full_size + self.eps)
        weight = self.weight + 1.0 if self.offset else self.weight
        return weight * x32.to(dtype)


class PerHeadNorm(nn.Module):
    """RMSNorm or LayerNorm over each head's ``head_dim`` with a weight (and bias) per head: Cohere's q/k norm.

    The weight is ``[heads, head_dim]``, split over TP by whole heads; heads replicated over TP (TP above the KV heads) hold a
    copy whose partial gradients the shard spec sums. Each rank normalises its own
    heads over the whole sequence, so no gradient is a partial sum otherwise.
    """

    def __init__(self, kind: str, heads: int, head_dim: int, eps: float, tp: int,
                 dtype: Optional[torch.dtype] = None, offset: bool = False, bias: bool = False) -> None:
        super().__init__()
        self.kind, self.eps, self.offset = kind, eps, offset
        shard = TPShard(0, (Segment(heads),))  # dim 0 of [heads, head_dim], one row per head
        local = (Segment(heads).local_units(tp), head_dim)
        self.weight = mark_param(nn.Parameter(torch.empty(local, dtype=dtype)), init="zeros" if offset else "ones",
                                 tp_shard=shard)
        self.bias = None
        if bias and kind == "LayerNorm":
            self.bias = mark_param(nn.Parameter(torch.empty(local, dtype=dtype)), init="zeros", tp_shard=shard)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x [s, b, local heads, hn]; weight [local heads, hn]
        dtype = x.dtype
        x32 = x.float()
        if self.kind == "LayerNorm":
            x32 = F.layer_norm(x32, (x.size(-1),), None, None, self.eps)
        else:
            x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        weight = self.weight + 1.0 if self.offset else self.weight
        out = weight * x32.to(dtype)
        return out + self.bias if self.bias is not None else out


def build_norm(kind: str, hidden_size: int, eps: float, grad_partial_over_tp: bool,
               dtype: Optional[torch.dtype] = None, offset: bool = False, parametric: bool = True,
               bias: bool = True, fused: bool = False) -> nn.Module:
    """An RMSNorm or LayerNorm (``kind`` as ``--normalization``) over the last ``hidden_size`` dims;
    ``parametric=False``: without weight or bias; ``bias=False``: a LayerNorm without bias; ``fused``: an RMSNorm
    through ``--use-fused-rmsnorm``'s kernel."""
    if not parametric:
        return NonParametricNorm(kind, eps)
    if kind == "LayerNorm":
        return LayerNorm(hidden_size, eps, grad_partial_over_tp=grad_partial_over_tp, dtype=dtype, offset=offset,
                         bias=bias)
    return RMSNorm(hidden_size, eps, grad_partial_over_tp=grad_partial_over_tp, dtype=dtype, offset=offset,
                   fused=fused)

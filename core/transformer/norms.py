"""RMSNorm and LayerNorm, with an optional fused kernel behind one function each.

The pure-PyTorch reference of RMSNorm computes in fp32 and casts back, as
Hugging Face's Llama does, so converted models match to the last bit in fp32.
On an NPU ``torch_npu.npu_rms_norm`` is used when present, on an NVIDIA GPU
apex's fused RMSNorm when NVIDIA apex is installed, else the reference.
``rms_norm_kernel(device_type)`` says which one (``"npu"``, ``"apex"`` or
``"reference"``); ``tests/unit/test_norms.py`` tests that choice with fake
kernels and compares a real fused kernel with the reference where one exists.
"""
from __future__ import annotations

import functools
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.tensor_parallel.layers import mark_param


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * x / rms(x)``, computed in fp32; x ``[..., h]``."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


RMSNormKernel = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def _npu_kernel() -> Optional[RMSNormKernel]:
    try:
        import torch_npu
    except ImportError:
        return None
    return lambda x, weight, eps: torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]


def _apex_kernel() -> Optional[RMSNormKernel]:
    try:
        from apex.normalization.fused_layer_norm import fused_rms_norm_affine
    except ImportError:  # apex is optional (and PyPI's "apex" is another project)
        return None
    return lambda x, weight, eps: fused_rms_norm_affine(x, weight, (x.size(-1),), eps)


# device type -> (kernel name, loader returning the kernel or None when its package is missing)
FUSED_KERNELS: Dict[str, Tuple[str, Callable[[], Optional[RMSNormKernel]]]] = {
    "npu": ("npu", _npu_kernel),
    "cuda": ("apex", _apex_kernel),
}


@functools.lru_cache(maxsize=None)
def rms_norm_kernel(device_type: str) -> Tuple[str, RMSNormKernel]:
    """The RMSNorm kernel for tensors on ``device_type``: ("npu" | "apex" | "reference", function).

    Looked up once per device type (``rms_norm_kernel.cache_clear()`` forgets the choice).
    """
    name, loader = FUSED_KERNELS.get(device_type, ("reference", lambda: None))
    kernel = loader()
    if kernel is None:
        return "reference", rms_norm_reference
    return name, kernel


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm through the fused kernel of ``x``'s device when there is one; x ``[..., h]``."""
    return rms_norm_kernel(x.device.type)[1](x, weight, eps)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, sequence_parallel: bool = False,
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                                 init="ones", grad_partial_over_tp=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class LayerNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, sequence_parallel: bool = False,
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                                 init="ones", grad_partial_over_tp=sequence_parallel)
        self.bias = mark_param(nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device)),
                               init="zeros", grad_partial_over_tp=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.size(-1),), self.weight, self.bias, self.eps)


def build_norm(kind: str, hidden_size: int, eps: float, sequence_parallel: bool,
               dtype: Optional[torch.dtype] = None) -> nn.Module:
    cls = {"RMSNorm": RMSNorm, "LayerNorm": LayerNorm}[kind]
    return cls(hidden_size, eps, sequence_parallel=sequence_parallel, dtype=dtype)

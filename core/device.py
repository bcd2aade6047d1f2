"""The one module that knows which accelerator runs the job.

Every other module asks this one for the device, the collective backend, RNG
state access, synchronisation and memory statistics, so the same code runs on
the CPU (gloo), NVIDIA GPUs (nccl) and Ascend NPUs (torch_npu + hccl).

Selection order: an explicit ``--device`` flag, else an NPU when ``torch_npu``
imports and reports devices, else CUDA when available, else the CPU.

Optional fused kernels come from packages that serve one device type each: the accelerator vendor's
operator library (``torch_npu``, whose operations :func:`vendor_op` returns), NVIDIA apex, flash-attn and
bitsandbytes on CUDA. A layer declares its kernels by package; :func:`kernels_by_device` turns that into
the per-device-type table its ``FusedOp`` (``core/fused.py``) reads, so no other module names a device.

FP8 GEMMs ask :func:`fp8_matmul` whether ``torch._scaled_mm`` runs on the device and on FP8 matrix units (CUDA
compute capability 8.9+), and :func:`rowwise_scaled_mm_in_fp32` how its per-row scaled product is written.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import resource
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

BACKEND_FOR_DEVICE = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}  # device type -> collective backend
DEVICE_TYPES = tuple(BACKEND_FOR_DEVICE)  # what --device accepts


def device_for_backend(backend: Optional[str]) -> Optional[str]:
    """The device type an accelerator's collective backend needs (nccl: CUDA, hccl: NPU); None for gloo,
    which runs anywhere, and for any other name."""
    accelerators = {name: device_type for device_type, name in BACKEND_FOR_DEVICE.items() if device_type != "cpu"}
    return accelerators.get(backend or "")


def _npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
    except Exception:
        return False
    return bool(getattr(torch, "npu", None)) and torch.npu.is_available() and torch.npu.device_count() > 0


def detect_device_type() -> str:
    """'npu', 'cuda' or 'cpu', in that order of preference."""
    if _npu_available():
        return "npu"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "cuda"
    return "cpu"


@dataclass(frozen=True)
class Accelerator:
    """The device type of this process and what follows from it."""

    type: str
    local_rank: int = 0

    @property
    def backend(self) -> str:
        return BACKEND_FOR_DEVICE[self.type]

    @property
    def device(self) -> torch.device:
        if self.type == "cpu":
            return torch.device("cpu")
        return torch.device(self.type, self.local_rank)

    @property
    def module(self) -> Any:
        """torch.cuda / torch.npu, or None on the CPU."""
        return None if self.type == "cpu" else getattr(torch, self.type)

    def set_current(self) -> None:
        if self.module is not None:
            self.module.set_device(self.local_rank)

    def synchronize(self) -> None:
        if self.module is not None:
            self.module.synchronize()

    def manual_seed(self, seed: int) -> None:
        if self.module is not None:
            self.module.manual_seed(seed)

    def get_rng_state(self) -> torch.Tensor:
        """RNG state of the generator that drives random ops on this device."""
        if self.module is None:
            return torch.get_rng_state()
        return self.module.get_rng_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        if self.module is None:
            torch.set_rng_state(state)
        else:
            self.module.set_rng_state(state)

    def new_stream(self) -> Any:
        """A side stream for copies that overlap compute; None on the CPU (copies run in place)."""
        return None if self.module is None else self.module.Stream(device=self.device)

    def current_stream(self) -> Any:
        return None if self.module is None else self.module.current_stream()

    def use_stream(self, stream: Any) -> Any:
        """Context manager: work issued inside runs on ``stream`` (nothing changes on the CPU)."""
        return contextlib.nullcontext() if stream is None else self.module.stream(stream)

    def new_event(self) -> Any:
        return None if self.module is None else self.module.Event()

    def max_memory_gb(self) -> float:
        """Peak device memory (GB); on the CPU the process's peak RSS."""
        if self.module is None:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB -> GiB
        return self.module.max_memory_allocated() / 1024**3

    def name(self) -> str:
        if self.module is None:
            return "cpu"
        return str(self.module.get_device_name(self.local_rank))


def device_problem(device_type: Optional[str], local_rank: Optional[int] = None) -> Optional[str]:
    """Why this process cannot run on ``device_type`` (``--device``; None: detected), in one line, or None.

    Checked before any process group: an accelerator torch does not see, or fewer of them than the node's
    processes (``LOCAL_RANK`` from torchrun).
    """
    chosen = device_type or detect_device_type()
    if chosen == "cpu":
        return None
    count = _device_count(chosen)
    if count == 0:
        what = "torch_npu is not installed or sees no NPU" if chosen == "npu" else "torch sees no CUDA device"
        return (f"--device {chosen}: {what} on this machine; run on a machine with one, or pass --device cpu "
                "(or drop --device to use what is there)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else local_rank
    if local_rank >= count:
        return (f"LOCAL_RANK {local_rank}, but this node has {count} {chosen} device(s); start at most {count} "
                "processes per node (torchrun --nproc-per-node)")
    return None


def _device_count(device_type: str) -> int:
    if device_type == "npu":
        return torch.npu.device_count() if _npu_available() else 0
    if device_type == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    return 1


_current: Optional[Accelerator] = None

# glibc's mallopt() parameters (malloc.h) and the environment variables through which a user sets them.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_GLIBC_MALLOC_ENV = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
_host_memory_kept = False


def keep_freed_host_memory() -> bool:
    """Have glibc's malloc keep freed memory for reuse instead of returning it to the kernel; once per process.

    On the CPU every activation, logit block and gradient is host memory. glibc serves a large request
    (always above 32 MiB, often above 128 KiB) with a fresh ``mmap`` and unmaps it on ``free``, so each
    step faults its big tensors in again, page by page (about 400k page faults per step on the
    ``bench/train_throughput.py`` model). With no mmap and no trimming, freed blocks stay in the heap and
    the next step reuses them: that step is 13% faster in bf16 and 8% in fp32, at the same peak RSS (the
    heap keeps what it once held, and aligned allocations leave a few gaps before blocks are reused).
    Left alone when the user tunes malloc (``MALLOC_*_`` or ``GLIBC_TUNABLES``) or the C library is not
    glibc (musl, or jemalloc/tcmalloc through ``LD_PRELOAD``, which already cache). Returns whether it applied.
    """
    global _host_memory_kept
    if _host_memory_kept:
        return True
    if any(name in os.environ for name in _GLIBC_MALLOC_ENV) or "malloc" in os.environ.get("LD_PRELOAD", ""):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _host_memory_kept = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    return _host_memory_kept


def init_accelerator(device_type: Optional[str] = None) -> Accelerator:
    """Choose the accelerator for this process (``device_type`` overrides detection)."""
    global _current
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    chosen = device_type or detect_device_type()
    if chosen not in BACKEND_FOR_DEVICE:
        raise ValueError(f"--device {chosen!r} is not one of {sorted(BACKEND_FOR_DEVICE)}")
    _current = Accelerator(chosen, local_rank if chosen != "cpu" else 0)
    _current.set_current()
    if chosen == "cpu":  # tensors live in host memory: reuse it rather than fault it in every step
        keep_freed_host_memory()
    return _current


def accelerator() -> Accelerator:
    """The accelerator chosen by ``init_accelerator`` (detected on first use)."""
    return _current if _current is not None else init_accelerator()


def current_device() -> torch.device:
    return accelerator().device


def default_backend() -> str:
    return accelerator().backend


def autocast_device_type() -> str:
    return accelerator().type


def pins_host_memory(device: torch.device) -> bool:
    """Whether host tensors that feed ``device`` are pinned (page-locked) so copies to it run asynchronously:
    on a CUDA device (the optimizer's swapped moments, the data loader's batches)."""
    return device.type == "cuda" and torch.cuda.is_available()


def profiler_activity(device_type: str) -> Optional[Any]:
    """The ``torch.profiler.ProfilerActivity`` that records work on ``device_type``, or None (the CPU, or an
    accelerator the profiler does not know)."""
    from torch.profiler import ProfilerActivity

    if device_type == "cuda" and torch.cuda.is_available():
        return ProfilerActivity.CUDA
    if device_type == "npu" and hasattr(ProfilerActivity, "PrivateUse1"):
        return ProfilerActivity.PrivateUse1  # torch_npu registers the NPU as PyTorch's private-use device
    return None


# --------------------------------------------------------------------------- fused-kernel packages

# The package of optional fused kernels -> the device type whose tensors it takes ("vendor": torch_npu).
_KERNEL_PACKAGE_DEVICE = {"vendor": "npu", "apex": "cuda", "flash_attn": "cuda", "bitsandbytes": "cuda",
                         "fla": "cuda", "mamba_ssm": "cuda", "causal_conv1d": "cuda"}
VENDOR_KERNEL = "npu"  # the log line's name of a kernel from the vendor's library ("rmsnorm=npu")


def vendor_kernel_name(operation: str = "") -> str:
    """How the log line names the vendor's kernel: ``npu``, or ``npu_<operation>`` (``npu_fusion_attention``)."""
    return f"{VENDOR_KERNEL}_{operation}" if operation else VENDOR_KERNEL


def kernels_by_device(**by_package: Tuple[Any, ...]) -> Dict[str, Tuple[Any, ...]]:
    """``{device type: entry}`` from ``{package: entry}``; packages: ``vendor``, ``apex``, ``flash_attn``,
    ``bitsandbytes``, ``fla`` (flash-linear-attention), ``mamba_ssm``, ``causal_conv1d`` (an entry is whatever
    the caller's table holds, e.g. ``(kernel name, loader)``)."""
    unknown = sorted(set(by_package) - set(_KERNEL_PACKAGE_DEVICE))
    if unknown:
        raise ValueError(f"unknown kernel package(s) {unknown}; known: {sorted(_KERNEL_PACKAGE_DEVICE)}")
    table = {_KERNEL_PACKAGE_DEVICE[package]: entry for package, entry in by_package.items()}
    if len(table) != len(by_package):
        raise ValueError(f"two kernel packages for one device type: {sorted(by_package)}")
    return table


def vendor_op(name: str) -> Optional[Callable[..., Any]]:
    """The vendor library's fused operation ``name`` (torch_npu's ``npu_<name>``: ``rms_norm``, ``swiglu``,
    ``rotary_mul``, ``fusion_attention``), or None when the library is not installed."""
    try:
        import torch_npu
    except ImportError:
        return None
    return getattr(torch_npu, f"npu_{name}")


# Peak dense TFLOP/s per device for MFU, by the substring of the device name.
# bf16/fp16 tensor-core figures from the vendors' data sheets (dense, no sparsity).
_PEAK_TFLOPS_BF16 = {
    "H200": 989.0, "H100": 989.0, "H800": 989.0, "H20": 148.0, "A100": 312.0, "A800": 312.0,
    "L40S": 362.0, "A10": 125.0, "V100": 125.0, "910B": 313.0, "910": 256.0,
}


def _cpu_flags() -> str:
    """This CPU's feature flags (x86 ``flags``, Arm ``Features``) as /proc/cpuinfo lists them, or ''."""
    try:
        with open("/proc/cpuinfo") as info:
            return info.read()
    except OSError:
        return ""


# Instructions that multiply half-precision operands in hardware, per dtype (x86 flag names, Arm's "bf16").
_HALF_GEMM_UNITS = {torch.bfloat16: ("amx_bf16", "avx512_bf16", " bf16"), torch.float16: ("amx_fp16", "avx512_fp16")}


def _detect_half_gemm_units(dtype: torch.dtype) -> bool:
    """Whether this CPU multiplies ``dtype`` (bf16/fp16) matrices in hardware and oneDNN uses it.

    Without such units PyTorch's bf16 GEMM on the CPU falls back to a reference kernel many times slower
    than fp32 (seen on AVX2-only AMD EPYC machines).
    """
    flags = _cpu_flags()
    units = any(unit in flags for unit in _HALF_GEMM_UNITS.get(dtype, ()))
    try:
        onednn = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) if dtype == torch.bfloat16 else units
    except (AttributeError, RuntimeError):
        onednn = False
    return units and onednn


# Read once at import: a compiled region then reads a constant, not /proc/cpuinfo (which breaks its graph).
_CPU_HALF_GEMM_UNITS = {dtype: _detect_half_gemm_units(dtype) for dtype in _HALF_GEMM_UNITS}
_CPU_FLAGS = _cpu_flags()


def cpu_has_half_gemm_units(dtype: torch.dtype) -> bool:
    """Whether this CPU has matrix units for ``dtype`` (:func:`_detect_half_gemm_units`, at import)."""
    return _CPU_HALF_GEMM_UNITS.get(dtype, False)


def gemm_dtype(tensor: torch.Tensor) -> torch.dtype:
    """The dtype matrix products of ``tensor``'s dtype run in on its device.

    fp32 for bf16/fp16 on a CPU without half-precision matrix units (faster there, and more accurate);
    otherwise the tensor's own dtype. Weights and activations stay in their dtype; only the product is raised.
    """
    dtype = tensor.dtype
    if tensor.device.type == "cpu" and dtype in _HALF_GEMM_UNITS and not cpu_has_half_gemm_units(dtype):
        return torch.float32
    return dtype


def reduced_fp32_matmul_pays(device_type: str) -> bool:
    """Whether torch's reduced-precision fp32 matmuls (``torch.set_float32_matmul_precision`` 'high' / 'medium':
    TF32 or bf16 passes) run faster than IEEE fp32 on ``device_type``: on accelerators, and on a CPU with AMX
    tiles. Elsewhere oneDNN emulates them: on an AVX512-BF16 CPU without AMX, a 704 x 128 Newton-Schulz ran 19x
    slower at 'high' and 4x at 'medium' than at 'highest'."""
    if device_type != "cpu":
        return True
    return "amx_bf16" in _CPU_FLAGS


def _cpu_peak_tflops(half_precision: bool) -> float:
    """Peak of this CPU, an estimate at ~2.5 GHz: per core and cycle, 2 FMA pipes x fp32 lanes x 2 flops,
    doubled for bf16 with AVX512-BF16 dot products, and 1024 bf16 flops with AMX tiles (one 16x16x32
    TDPBF16PS every 16 cycles); the fp32 figure where PyTorch does not use such units
    (:func:`cpu_has_half_gemm_units`), as bf16 products then run in fp32."""
    flags = _cpu_flags()
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    flops_per_cycle = 2 * lanes * 2
    half_units = half_precision and cpu_has_half_gemm_units(torch.bfloat16)  # else bf16 GEMMs run in fp32
    if half_units and "amx_bf16" in flags:
        flops_per_cycle = 1024
    elif half_units and "avx512_bf16" in flags:
        flops_per_cycle *= 2
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores * flops_per_cycle * 2.5e9 / 1e12


def peak_tflops(override: Optional[float] = None, half_precision: bool = True) -> float:
    """Peak TFLOP/s of one device, used as the MFU denominator (``--peak-tflops`` overrides).

    Accelerators: the dense bf16 figure. CPU: fp32, or bf16 when ``half_precision``
    and the CPU has bf16 dot products.
    """
    if override:
        return float(override)
    acc = accelerator()
    if acc.type == "cpu":
        return _cpu_peak_tflops(half_precision)
    name = acc.name()
    for key, value in _PEAK_TFLOPS_BF16.items():
        if key in name:
            return value
    return 100.0


# --------------------------------------------------------------------------- FP8 GEMMs

FP8_MATMUL_CAPABILITY = (8, 9)  # CUDA compute capability of the first FP8 tensor cores (Ada; Hopper is 9.0)


@dataclass(frozen=True)
class Fp8Matmul:
    """What a device type offers an FP8 GEMM through ``torch._scaled_mm`` (``--fp8-gemm``).

    ``runs``: torch has a ``_scaled_mm`` kernel for it; ``fast``: on FP8 matrix units, faster than an fp32
    product; ``device``: the device in words; ``why_not_fast``: when not ``fast``, why, in words.
    """

    runs: bool
    fast: bool
    device: str
    why_not_fast: str = ""


def _scaled_mm_in_torch() -> bool:
    return hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "float8_e5m2")


def fp8_matmul(device_type: Optional[str] = None) -> Fp8Matmul:
    """The FP8 GEMM facts of ``device_type`` (None: detected); for CUDA, of this process's device
    (``LOCAL_RANK``), read before any process group."""
    chosen = device_type or detect_device_type()
    in_torch = _scaled_mm_in_torch()
    if chosen == "cuda" and torch.cuda.is_available():
        index = min(int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count() - 1)
        capability = torch.cuda.get_device_capability(index)
        device = f"{torch.cuda.get_device_name(index)} (compute capability {capability[0]}.{capability[1]})"
        fast = in_torch and tuple(capability) >= FP8_MATMUL_CAPABILITY
        return Fp8Matmul(fast, fast, device, "" if fast else "FP8 GEMMs need compute capability 8.9 or newer")
    if chosen == "npu":
        return Fp8Matmul(False, False, "the NPU", "torch._scaled_mm has no NPU kernel, and torch_npu's quantised "
                         "matmul is not wired here")
    return Fp8Matmul(in_torch, False, "the CPU", "no FP8 matrix units (its torch._scaled_mm is slower than the "
                     "fp32 product)")


def rowwise_scaled_mm_in_fp32(device_type: str) -> bool:
    """Whether ``torch._scaled_mm`` with per-row scales writes an fp32 product on ``device_type``: on the CPU; on
    CUDA only with cuBLAS 12.9+ on compute capability 9.0 (its CUTLASS kernel, used elsewhere, writes bf16 only),
    so never counted on there."""
    return device_type == "cpu"

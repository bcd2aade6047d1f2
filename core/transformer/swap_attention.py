"""``--swap-attention`` (MindSpeed's activation offload): a layer's saved activations wait in host memory.

In the forward, what autograd saves inside the chosen sub-modules of each transformer layer
(``--swap-modules``, MindSpeed's default ``input_norm,self_attention,post_attention_norm``) is copied to
host memory and its device memory released at the end of the layer's forward; in the backward it is
copied back. When a layer's backward starts (the gradient of its output arrives), its own tensors and
those of the layer that ran before it in the same block forward (the next one the backward needs) are
prefetched; an unpack that finds nothing prefetched copies back at once. The backward frees each copy
once the nodes that saved it have run, so about two layers' activations are back on the device at once.

* Keys: every layer forward (one micro-batch, one model chunk) gets its own :class:`LayerRecord`, and
  autograd keeps the handles that :meth:`LayerRecord.pack` returns in that micro-batch's graph, so
  micro-batches in flight under 1F1B or VPP never share or mix stored tensors. Device storages are
  copied once per layer forward however many views of them are saved (q, k and v sliced from one
  fused projection), and views are rebuilt with their offsets and strides, so the backward sees
  bit-identical tensors and the results equal a run without swapping exactly.
* What is offloaded: activations, i.e. tensors an autograd op produced (``grad_fn`` set, MindSpeed's
  rule). Not: parameters (trainable or frozen) and views of them (``weight.t()`` has a ``grad_fn``; its
  ``_base`` is the parameter), other leaves (pipeline inputs, the recompute anchor), constants, masks,
  RoPE tables and non-differentiable outputs, released storages, tensors on another device, and
  storages below ``min_bytes`` (MindSpeed's rule: under 512 KiB the copy costs more than it frees).
  Nothing is offloaded outside training, under ``no_grad`` (the first run of a recomputed region) or
  while a recomputed region runs again in the backward (its tensors are needed at once).
* Saved-tensor hooks hand the backward a new tensor object even for a tensor they keep, so code that
  needs a parameter itself in the backward keeps it on ``ctx`` (zero-bubble's deferred weight gradients).
* Accelerators: host copies are pinned; device-to-host and host-to-device copies run on a side stream
  ordered by events (and ``record_stream``, so the caching allocator never reuses memory that a
  pending copy reads or writes); the compute stream waits only for the copy it needs. On the CPU the
  same path runs with plain copies, so it can be tested; :attr:`ActivationSwapper.stats` counts the
  bytes.
* Recompute (MindSpeed's interplay): ``--swap-attention --recompute-num-layers N`` without
  ``--recompute-granularity`` recomputes the MLP of the first N layers of each model chunk (unless the
  MLP is swapped itself). Megatron's full recompute keeps its meaning: checkpointed layers keep only
  their inputs, the other layers swap. Selective recompute composes: the core attention's inputs are
  swapped, its internals recomputed. With ``--recompute-activation-function`` the activation's output,
  released after its consumer's forward and refilled before its backward, is not brought back.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import nn

from core.device import accelerator
from core.tensor_parallel.checkpoint import is_recomputing

# --swap-modules names -> TransformerLayer attributes (MindSpeed's legacy names and ours)
SWAP_MODULES: Dict[str, str] = {
    "input_norm": "input_layernorm", "input_layernorm": "input_layernorm",
    "self_attention": "self_attention",
    "post_self_attn_layernorm": "post_self_attn_layernorm",
    "post_attention_norm": "pre_mlp_layernorm", "pre_mlp_layernorm": "pre_mlp_layernorm",
    "mlp": "mlp",
    "post_mlp_layernorm": "post_mlp_layernorm",
}
DEFAULT_SWAP_MODULES = "input_norm,self_attention,post_attention_norm"  # MindSpeed's default
MIN_SWAP_BYTES = 512 * 1024  # MindSpeed skips tensors under 512 KiB


def parse_swap_modules(text: str) -> Tuple[str, ...]:
    """``"input_norm,self_attention"`` -> ``("input_norm", "self_attention")``, names stripped."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def check_swap_modules(names: Tuple[str, ...]) -> None:
    """ValueError (one line) for an empty list or a name that is no swappable sub-module."""
    unknown = [name for name in names if name not in SWAP_MODULES]
    if unknown or not names:
        raise ValueError(f"--swap-modules {','.join(names) or repr('')}: unknown module name(s) "
                         f"{unknown or ['(none given)']}; choose from {', '.join(SWAP_MODULES)}")


def swapped_attributes(names: Tuple[str, ...]) -> Tuple[str, ...]:
    """The TransformerLayer attributes that ``--swap-modules`` names, each once."""
    return tuple(dict.fromkeys(SWAP_MODULES[name] for name in names))


def recomputes_mlp(config: Any, position: int) -> bool:
    """MindSpeed: with ``--swap-attention``, ``--recompute-num-layers N`` alone recomputes the MLP of the
    first N layers of each model chunk (``position`` counts the chunk's layers from 0)."""
    return (bool(config.swap_attention) and config.recompute_granularity is None
            and config.recompute_num_layers is not None and position < config.recompute_num_layers
            and "mlp" not in swapped_attributes(config.swap_modules))


@dataclass
class SwapStats:
    """What this process offloaded and brought back (bytes of unique storages)."""

    offloaded_bytes: int = 0
    offloaded_storages: int = 0
    restored_bytes: int = 0
    prefetched_storages: int = 0  # restored by a backward-start prefetch rather than on demand


class _HostCopy:
    """One device storage's bytes in host memory, and, from the backward on, back on the device."""

    __slots__ = ("device", "source", "host", "restored", "ready", "nbytes", "__weakref__")

    def __init__(self, source: torch.UntypedStorage, host: torch.UntypedStorage, device: torch.device) -> None:
        self.source: Optional[torch.UntypedStorage] = source  # held until the layer's forward ends
        self.host = host
        self.device = device
        self.nbytes = source.nbytes()
        self.restored: Optional[torch.UntypedStorage] = None
        self.ready: Any = None  # the event after the host-to-device copy (accelerators)


@dataclass(frozen=True)
class _SavedView:
    """What autograd keeps instead of a saved tensor: its storage's host copy and its view geometry."""

    copy: _HostCopy
    dtype: torch.dtype
    offset: int
    size: Tuple[int, ...]
    stride: Tuple[int, ...]


def is_activation(tensor: torch.Tensor) -> bool:
    """Whether autograd produced ``tensor`` (``grad_fn`` set) from something other than a parameter view."""
    if tensor.grad_fn is None or isinstance(tensor, nn.Parameter):
        return False
    base = tensor._base  # a view's root: a parameter, or a leaf that requires grad, owns the memory
    return base is None or not (isinstance(base, nn.Parameter) or (base.is_leaf and base.requires_grad))


class ActivationSwapper:
    """This process's offload engine: the side stream, the copies and the byte counts."""

    def __init__(self, min_bytes: int = MIN_SWAP_BYTES) -> None:
        self.min_bytes = min_bytes
        self.stats = SwapStats()
        self._stream: Any = None
        self._chain_last: Optional[LayerRecord] = None  # the last record with copies since start_chain

    # ------------------------------------------------------------------ records
    def start_chain(self) -> None:
        """A block forward (one micro-batch, one model chunk) begins: its first layer links to nothing."""
        self._chain_last = None

    def new_record(self) -> "LayerRecord":
        return LayerRecord(self, self._chain_last)

    @contextlib.contextmanager
    def saving(self, record: "LayerRecord") -> Iterator[None]:
        """Inside: what autograd saves goes through ``record``."""
        with torch.autograd.graph.saved_tensors_hooks(record.pack, _unpack):
            yield

    # ------------------------------------------------------------------ copies
    def _side_stream(self) -> Any:
        if self._stream is None:
            self._stream = accelerator().new_stream()
        return self._stream

    def worth_offloading(self, tensor: torch.Tensor) -> bool:
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided or not is_activation(tensor):
            return False
        nbytes = tensor.untyped_storage().nbytes()
        return nbytes > 0 and nbytes >= self.min_bytes and tensor.device.type == accelerator().type

    def offload(self, tensor: torch.Tensor) -> _HostCopy:
        """Start copying ``tensor``'s whole storage to host memory."""
        source = tensor.untyped_storage()
        acc = accelerator()
        stream = self._side_stream()
        if stream is None:  # CPU: a plain copy
            host = torch.empty(source.nbytes(), dtype=torch.uint8).untyped_storage()
            host.copy_(source)
        else:
            host = torch.empty(source.nbytes(), dtype=torch.uint8, pin_memory=True).untyped_storage()
            stream.wait_stream(acc.current_stream())  # the tensor's producer has run
            with acc.use_stream(stream):
                host.copy_(source, non_blocking=True)
            tensor.record_stream(stream)  # its memory is not reused before the copy has read it
        self.stats.offloaded_bytes += source.nbytes()
        self.stats.offloaded_storages += 1
        return _HostCopy(source, host, tensor.device)

    def restore(self, copy: _HostCopy, prefetch: bool) -> None:
        """Start copying ``copy`` back to the device (once)."""
        if copy.restored is not None:
            return
        acc = accelerator()
        stream = self._side_stream()
        restored = torch.empty(copy.nbytes, dtype=torch.uint8, device=copy.device)
        if stream is None:
            restored.untyped_storage().copy_(copy.host)
        else:
            stream.wait_stream(acc.current_stream())  # the compute stream is done with this memory's past
            with acc.use_stream(stream):
                restored.untyped_storage().copy_(copy.host, non_blocking=True)
                copy.ready = acc.new_event()
                copy.ready.record(stream)
            restored.record_stream(stream)
        copy.restored = restored.untyped_storage()
        self.stats.restored_bytes += copy.nbytes
        self.stats.prefetched_storages += int(prefetch)

    def wait(self, copy: _HostCopy) -> None:
        if copy.ready is not None:
            accelerator().current_stream().wait_event(copy.ready)


class LayerRecord:
    """What one layer forward (one micro-batch, one model chunk) offloaded.

    It holds its host copies only weakly: the :class:`_SavedView` handles in the autograd graph own
    them, so a copy (and its restored device storage) is freed once the backward has used it.
    """

    def __init__(self, swapper: ActivationSwapper, previous: Optional["LayerRecord"]) -> None:
        self.swapper = swapper
        # the layer with copies that ran before this one in the same forward: its backward comes next
        # (weak: records never keep each other alive; a record lives as long as its output's graph)
        self._previous = weakref.ref(previous) if previous is not None else None
        self._copies: List["weakref.ReferenceType[_HostCopy]"] = []
        self._by_storage: Dict[int, _HostCopy] = {}  # while the forward runs: one copy per storage

    def pack(self, tensor: torch.Tensor) -> Union[torch.Tensor, _SavedView]:
        if not self.swapper.worth_offloading(tensor):
            return tensor
        key = tensor.untyped_storage().data_ptr()
        copy = self._by_storage.get(key)
        if copy is None:
            copy = self._by_storage[key] = self.swapper.offload(tensor)
            self._copies.append(weakref.ref(copy))
        return _SavedView(copy, tensor.dtype, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))

    def close(self, output: torch.Tensor) -> None:
        """The layer's forward has ended: release the device storages; prefetch when its backward starts.

        A storage its owner has released meanwhile is refilled by that owner before the backward
        needs it (``--recompute-activation-function``): its host copy is dropped and the backward reads
        the refilled storage.
        """
        for copy in self._by_storage.values():
            if copy.source.nbytes() == 0:
                copy.restored, copy.host = copy.source, None
                self.swapper.stats.offloaded_bytes -= copy.nbytes
                self.swapper.stats.offloaded_storages -= 1
            copy.source = None
        self._by_storage = {}
        if self._copies and output.requires_grad:
            output.register_hook(self._backward_starts)
            self.swapper._chain_last = self

    def prefetch(self) -> None:
        for ref in self._copies:
            copy = ref()
            if copy is not None:
                self.swapper.restore(copy, prefetch=True)

    @property
    def previous(self) -> Optional["LayerRecord"]:
        return self._previous() if self._previous is not None else None

    def _backward_starts(self, grad: torch.Tensor) -> None:
        self.prefetch()
        previous = self.previous
        if previous is not None:
            previous.prefetch()


def _unpack(saved: Union[torch.Tensor, _SavedView]) -> torch.Tensor:
    if isinstance(saved, torch.Tensor):
        return saved
    copy = saved.copy
    swapper = get_activation_swapper()
    swapper.restore(copy, prefetch=False)
    swapper.wait(copy)
    view = torch.empty(0, dtype=saved.dtype, device=copy.device)
    return view.set_(copy.restored, saved.offset, saved.size, saved.stride)


_swapper: Optional[ActivationSwapper] = None


def get_activation_swapper() -> ActivationSwapper:
    """The process's swapper (made on first use)."""
    global _swapper
    if _swapper is None:
        _swapper = ActivationSwapper()
    return _swapper


def swapping(config: Any, training: bool) -> bool:
    """Whether a layer forward now offloads: ``--swap-attention``, training, grad on, not a recomputation."""
    return bool(config.swap_attention) and training and torch.is_grad_enabled() and not is_recomputing()

"""Our ``--ckpt-format torch_dist`` checkpoint (``core/dist_checkpointing.py``): ``torch.distributed.checkpoint``
files holding every tensor whole, plus ``common.pt``; it loads at any layout, so it reads and writes as TP 1,
PP 1."""
from __future__ import annotations

import argparse
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from core import dist_checkpointing as dist_format
from core.checkpointing import CHECKPOINT_VERSION, CheckpointError, atomic_save, iteration_dir, map_file, write_tracker
from core.pipeline_parallel.layout import stage_layers
from mindspeed_llm.convert.errors import ConversionError, check_shape
from mindspeed_llm.convert.hf import resolve_family
from mindspeed_llm.convert.layout import ModelLayout
from mindspeed_llm.convert.native import MegatronSource, checkpoint_args
from mindspeed_llm.models.registry import to_hf, to_ours

class DistSource(MegatronSource):
    """Our ``--ckpt-format torch_dist`` checkpoint (core/dist_checkpointing.py): every tensor is stored whole,
    so it reads as a TP 1, PP 1 checkpoint, one DCP read per tensor."""

    def __init__(self, load_dir: str, family_name: Optional[str], found: Tuple[int, bool]) -> None:
        self.load_dir = load_dir
        self.iteration, self.release = found
        self.directory = directory = iteration_dir(load_dir, self.iteration, self.release)
        self.tp, self.pp, self.ep = 1, 1, 1
        common = _read_common(directory)
        args = common.get("args") or argparse.Namespace()
        self.config = self._config(common, argparse.Namespace(), load_dir)
        self.placement = stage_layers(self.config.num_layers, 1, None, None)
        self.hf_config = common.get("hf_config")
        self.family = resolve_family(family_name or getattr(args, "model_type_hf", None), self.hf_config,
                                     os.path.join(directory, dist_format.COMMON_FILENAME))
        self.family_name = self.family.name
        self.metadata = dist_format.read_metadata(directory)
        self.stored = dist_format.stored_keys(self.metadata)
        self._reading = threading.Lock()

    def path(self, rank: int, pp_rank: int) -> str:
        return os.path.join(self.directory, dist_format.COMMON_FILENAME)

    def check(self, layout: ModelLayout) -> None:
        for name in layout.names:
            key, want = dist_format.MODEL_PREFIX + name, layout.stored_shapes[name]
            if name in self.supplied:
                continue
            if key not in self.stored:
                raise ConversionError(f"{self.directory} has no tensor {name!r}, which family {self.family_name} "
                                      "needs; the checkpoint does not match its own transformer_config")
            if self.stored[key] != want:
                raise ConversionError(f"tensor {name!r} in {self.directory} has shape {self.stored[key]}, expected "
                                      f"{want}; the checkpoint does not match its own transformer_config")

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the stored key, the checkpoint directory) of ``name`` (DCP spreads a tensor over its files)."""
        return dist_format.MODEL_PREFIX + name, self.directory

    def describe(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """What :meth:`read` gives, on the meta device (the dtype from the checkpoint's metadata)."""
        if name in self.supplied:
            return [tensor.to("meta") for tensor in self.read(name, hf_names, layout)]
        dtype = self.metadata.state_dict_metadata[dist_format.MODEL_PREFIX + name].properties.dtype
        full = torch.empty(layout.full_shapes[name], dtype=dtype, device="meta")
        return to_hf(layout.rules[name][0], full, layout.context(name))

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """The HF tensors of our parameter ``name``, read whole (the vocabulary's TP padding zero)."""
        if name in self.supplied:
            return to_hf(layout.rules[name][0], self.overlay(name, None), layout.context(name))
        with self._reading:  # one DCP read at a time (reads run on worker threads)
            stored = dist_format.read_full(self.directory, [dist_format.MODEL_PREFIX + name], self.metadata)
        value = stored[dist_format.MODEL_PREFIX + name]
        full = value.new_zeros(layout.full_shapes[name])  # the TP padding of the vocabulary, zero as trained
        full[tuple(slice(0, n) for n in value.shape)] = value
        if self.overlay is not None:
            full = self.overlay(name, full)
        return to_hf(layout.rules[name][0], full, layout.context(name))


def _read_common(directory: str) -> Dict[str, Any]:
    """The checkpoint's ``common.pt`` (args, configs), memory-mapped."""
    path = os.path.join(directory, dist_format.COMMON_FILENAME)
    try:
        return map_file(path)
    except CheckpointError as error:
        raise ConversionError(str(error)) from None


class DistSink:
    """Writes an mg ``--ckpt-format torch_dist`` checkpoint (``release``): every tensor whole, as DCP's
    global tensors, with ``common.pt``. Holds the model's tensors until :meth:`finish` (one DCP save)."""

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str,
                 hf_config: Optional[Dict[str, Any]]) -> None:
        self.save_dir, self.layout, self.family_name, self.hf_config = save_dir, layout, family_name, hf_config
        self.tensors: Dict[str, torch.Tensor] = {}

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        return list(names)

    def prepare(self, name: str, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """The whole tensor of ``name`` as stored (its vocabulary without the TP padding)."""
        full = to_ours(self.layout.rules[name][0], tensors, self.layout.context(name))
        check_shape(name, full, self.layout.full_shapes[name])
        return full[tuple(slice(0, n) for n in self.layout.stored_shapes[name])].contiguous()

    def write(self, name: str, stored: torch.Tensor) -> None:
        """Keep the :meth:`prepare` d tensor of ``name`` for the one DCP save."""
        self.tensors[dist_format.MODEL_PREFIX + name] = stored

    def finish(self) -> None:
        directory = iteration_dir(self.save_dir, None, release=True)
        state = {key: dist_format.LocalPieces(value.shape, [((0,) * value.dim(), value)])
                 for key, value in self.tensors.items()}
        dist_format.save(directory, state)
        common = {"args": checkpoint_args(self.layout, self.family_name),
                  "transformer_config": self.layout.config.to_dict(), "hf_config": self.hf_config,
                  "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0, "optimizer": None}
        dist_format.write_common(directory, common, atomic_save)
        write_tracker(self.save_dir, None, release=True)



"""The sequence state of recurrent mixers: where it starts, restarts and travels.

A recurrent mixer (Mamba, the gated DeltaNet, a short convolution) exposes the part
of its work that runs along the sequence as a *stateful core*::

    core(inputs [b, s_seg, c_in], carry) -> (outputs [b, s_seg, c_out], carry)

``carry`` is a tuple of ``[b, ...]`` tensors holding everything the next token
needs (a convolution's last ``k - 1`` inputs, the recurrent state in fp32); None
is the zero state of a sequence or document start. :func:`sequence_scan` runs a
core over this rank's tokens:

* one sequence on one rank: the core once, from the zero state;
* packed documents (``--reset-attention-mask``, packed SFT): each row is cut at its
  document starts and every piece runs from the zero state, so a document's output
  is the one it has alone.

Context parallelism (the carry passed from the rank holding the tokens before) is
refused here until a mixer implements it.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch

from core.transformer.context_parallel import SequenceLayout

Carry = Tuple[torch.Tensor, ...]
StatefulCore = Callable[[torch.Tensor, Optional[Carry]], Tuple[torch.Tensor, Carry]]


def document_pieces(documents: torch.Tensor) -> List[Tuple[int, int]]:
    """``(start, end)`` of each run of equal document numbers in ``documents`` ``[s]``."""
    starts = [0] + (torch.nonzero(documents[1:] != documents[:-1]).flatten() + 1).tolist()
    return list(zip(starts, starts[1:] + [documents.numel()]))


def _scan_documents(core: StatefulCore, inputs: torch.Tensor, documents: torch.Tensor) -> torch.Tensor:
    """Each row's documents from the zero state; inputs ``[b, s, c_in]``, documents ``[b, s]``."""
    rows = []
    for row in range(inputs.size(0)):
        pieces = [core(inputs[row:row + 1, start:end], None)[0]
                  for start, end in document_pieces(documents[row])]  # each [1, s_doc, c_out]
        rows.append(torch.cat(pieces, dim=1))
    return torch.cat(rows, dim=0)  # [b, s, c_out]


def sequence_scan(core: StatefulCore, inputs: torch.Tensor, layout: Optional[SequenceLayout]) -> torch.Tensor:
    """``core`` over this rank's tokens ``inputs`` ``[b, s_local, c_in]`` -> ``[b, s_local, c_out]``."""
    if layout is not None and layout.cp is not None:
        raise NotImplementedError("context parallelism of recurrent mixers passes the state between ranks; "
                                  "this mixer does not do it yet")
    if layout is None or layout.documents is None:
        return core(inputs, None)[0]
    return _scan_documents(core, inputs, layout.documents[:, layout.positions])

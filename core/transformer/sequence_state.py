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
  is the one it has alone;
* context parallelism: this rank's tokens are cut into *runs* of consecutive sequence
  positions (``layout.positions``; under the ring's load balancing rank ``r`` holds
  chunks ``r`` and ``2 CP - 1 - r``, the middle rank's two chunks make one run; the
  contiguous and Ulysses layouts give one run per rank). Every run starts from the
  carry of the run just before it in the sequence, received from the rank holding it
  (:func:`core.tensor_parallel.cp_mappings.recv_carry`), and sends its final carry to
  the rank holding the next one (``send_carry``). The chain visits the runs in sequence
  order, under load balancing ranks ``0 .. CP-1`` and then ``CP-1 .. 0``; the backward
  passes each carry's gradient back along it. Each rank runs its runs in sequence
  order and threads one token through its exchanges, from the mixer's input to its
  output, so that autograd runs every exchange's backward, a rank's in reverse sequence
  order and the earlier layers' only after them: no rank waits on a message another
  rank sends later. With documents, a row whose document continues across a run boundary
  starts from its row of the received carry, one starting there from zeros; a boundary
  where every row starts a new document exchanges nothing. A run shorter than the
  conv's ``k - 1`` tokens is no special case: its carry keeps the older inputs it received.

Cost: the chain is sequential. A rank waits for every run before its own, so one layer
takes about ``2 CP`` run times under load balancing (``CP`` contiguous) instead of one;
CP then splits the memory of the sequence, not its time. A parallel scan would remove
the wait: every rank runs its tokens from the zero state at once, the ranks exchange
only their runs' total decay and final state (a linear map), combine them by a prefix
scan over the CP ranks (``log CP`` steps of small messages), and each rank corrects its
outputs with the state entering it, which is cheap for a linear recurrence (an extra
``C h_in`` term decayed along the run, as the chunked SSD's inter-chunk step) but needs
each core to expose that correction; the convolution's carry needs no scan (the inputs
of the previous run are known before any compute).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch

from core.tensor_parallel.cp_mappings import end_relay, recv_carry, relay_token, send_carry
from core.transformer.context_parallel import SequenceLayout

Carry = Tuple[torch.Tensor, ...]
StatefulCore = Callable[[torch.Tensor, Optional[Carry]], Tuple[torch.Tensor, Carry]]


def document_pieces(documents: torch.Tensor) -> List[Tuple[int, int]]:
    """``(start, end)`` of each run of equal document numbers in ``documents`` ``[s]``."""
    starts = [0] + (torch.nonzero(documents[1:] != documents[:-1]).flatten() + 1).tolist()
    return list(zip(starts, starts[1:] + [documents.numel()]))


def _row(carry: Optional[Carry], row: int) -> Optional[Carry]:
    return None if carry is None else tuple(t[row:row + 1] for t in carry)


def _scan_rows(core: StatefulCore, inputs: torch.Tensor, carry: Optional[Carry], documents: torch.Tensor,
               continues: Optional[List[bool]]) -> Tuple[torch.Tensor, Carry]:
    """Each row's documents, the first from its row of ``carry`` where ``continues`` (else zeros), the others
    from zeros; inputs ``[b, s, c_in]``, documents ``[b, s]``. The carry out is each row's last piece's."""
    rows, carries = [], []
    for row in range(inputs.size(0)):
        pieces, row_carry = [], None
        for index, (start, end) in enumerate(document_pieces(documents[row])):
            continued = index == 0 and continues is not None and continues[row]
            out, row_carry = core(inputs[row:row + 1, start:end], _row(carry, row) if continued else None)
            pieces.append(out)  # [1, s_doc, c_out]
        rows.append(torch.cat(pieces, dim=1))
        carries.append(row_carry)
    return torch.cat(rows, dim=0), tuple(torch.cat(parts, dim=0) for parts in zip(*carries))  # [b, s, c_out]


def _scan_run(core: StatefulCore, inputs: torch.Tensor, carry: Optional[Carry], documents: Optional[torch.Tensor],
              continues: Optional[List[bool]]) -> Tuple[torch.Tensor, Carry]:
    """``core`` over one run of consecutive positions ``inputs`` ``[b, s_run, c_in]`` from ``carry``."""
    if documents is None:
        return core(inputs, carry)
    return _scan_rows(core, inputs, carry, documents, continues)


@dataclass(frozen=True)
class Run:
    """Consecutive sequence positions ``start .. end - 1`` held at ``local_start .. local_end - 1`` of a rank."""

    local_start: int
    local_end: int
    start: int

    @property
    def end(self) -> int:
        return self.start + self.local_end - self.local_start


def local_runs(positions: torch.Tensor) -> List[Run]:
    """The maximal runs of consecutive positions in ``positions`` ``[s_local]``, in sequence order."""
    positions = positions.cpu()
    cuts = (torch.nonzero(positions[1:] != positions[:-1] + 1).flatten() + 1).tolist()
    bounds = list(zip([0] + cuts, cuts + [positions.numel()]))
    return sorted((Run(a, b, int(positions[a])) for a, b in bounds), key=lambda run: run.start)


def _continuing(documents: Optional[torch.Tensor], boundary: int) -> Optional[List[bool]]:
    """Per row, whether the token at ``boundary`` continues the document of the one before (None: all do)."""
    if documents is None:
        return None
    return (documents[:, boundary - 1] == documents[:, boundary]).tolist()


def _position_owners(layout: SequenceLayout) -> List[int]:
    """The global rank holding each sequence position ``[s]``."""
    cp = layout.cp
    held = cp.all_positions(layout.seq_len, torch.device("cpu"))  # [s] in CP-rank order
    owners = [0] * layout.seq_len
    per_rank = layout.seq_len // cp.group.size
    for index, position in enumerate(held.tolist()):
        owners[position] = cp.group.ranks[index // per_rank]
    return owners


def _relay(core: StatefulCore, inputs: torch.Tensor, layout: SequenceLayout) -> torch.Tensor:
    """This rank's runs in sequence order, each from the carry of the run before (received from its rank) and
    sending its final carry to the rank of the run after; inputs ``[b, s_local, c_in]``."""
    group, documents, seq_len = layout.cp.group, layout.documents, layout.seq_len
    owners = _position_owners(layout)
    token = relay_token(inputs)
    outputs = {}
    for run in local_runs(layout.positions):
        carry, continues = None, None
        if run.start > 0:
            continues = _continuing(documents, run.start)
            if continues is None or any(continues):
                carry, token = recv_carry(token, owners[run.start - 1], group)
        pieces = documents[:, run.start:run.end] if documents is not None else None
        out, carry = _scan_run(core, inputs[:, run.local_start:run.local_end], carry, pieces, continues)
        if run.end < seq_len:
            following = _continuing(documents, run.end)
            if following is None or any(following):
                out, token = send_carry(out, carry, token, owners[run.end], group)
        outputs[run.local_start] = out
    return end_relay(torch.cat([outputs[start] for start in sorted(outputs)], dim=1), token)  # [b, s_local, c_out]


def carries_across_ranks(layout: Optional[SequenceLayout]) -> bool:
    """The sequence is split over several CP ranks: a core's final carry goes on to another rank's tokens
    (and its gradient comes back)."""
    return layout is not None and layout.cp is not None and layout.cp.group.size > 1


def sequence_scan(core: StatefulCore, inputs: torch.Tensor, layout: Optional[SequenceLayout]) -> torch.Tensor:
    """``core`` over this rank's tokens ``inputs`` ``[b, s_local, c_in]`` -> ``[b, s_local, c_out]``."""
    if carries_across_ranks(layout):
        return _relay(core, inputs, layout)
    if layout is None or layout.documents is None:
        return core(inputs, None)[0]
    return _scan_rows(core, inputs, None, layout.documents[:, layout.positions], None)[0]

"""The sequence state of recurrent mixers on one process (core/transformer/sequence_state.py).

* Mamba1's and Mamba2's stateful cores (conv + scan) run over a sequence cut into pieces, each from the
  carry the one before returned, give the outputs, the input gradient and every parameter gradient of one
  run over the whole sequence; the pieces include one shorter than the conv's ``d_conv - 1`` carried inputs
  and lengths Mamba2's chunk size does not divide.
* Packed documents: a Mamba model's logits for each document of a pack equal its logits alone (Mamba2 and
  Mamba1, and a hybrid with an attention layer); without document numbers they do not.
* The runs of consecutive positions a CP rank holds: two under the ring's load balancing, one for the
  middle rank and for contiguous parts.

CP ranks passing the carry to one another: tests/distributed/test_recurrent_context_parallel.py.

    python -m pytest -q tests/unit/test_sequence_state.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch

from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import token_positions
from core.transformer.mamba_mixer import MambaMixer
from core.transformer.sequence_state import Run, local_runs

MAMBA = {  # config fields per version: d_conv 4 carries 3 inputs; Mamba2's chunk of 4
    1: dict(mamba_version=1, mamba_state_dim=4, mamba_dt_rank=3),
    2: dict(mamba_state_dim=4, mamba_head_dim=8, mamba_num_groups=2, mamba_chunk_size=4),
}
PIECES = (5, 2, 1, 6)  # 14 tokens


def _config(version: int, pattern: str = "M", **extra) -> TransformerConfig:
    position = "rope" if "*" in pattern else "none"
    return TransformerConfig(num_layers=len(pattern), hidden_size=16, num_attention_heads=4, vocab_size=11,
                             normalization="RMSNorm", position_embedding_type=position,
                             hybrid_override_pattern=pattern, hidden_dropout=0.0, attention_dropout=0.0,
                             init_method_std=0.3, **MAMBA[version], **extra)


def _mixer(version: int) -> MambaMixer:
    torch.manual_seed(0)
    mixer = MambaMixer(_config(version), layout_state(1))
    with torch.no_grad():
        for param in mixer.parameters():
            param.copy_(torch.randn_like(param) * 0.4)
    return mixer


def _core_run(version: int, pieces: Tuple[int, ...]) -> Dict[str, torch.Tensor]:
    """The core over ``pieces`` of one input, the carry passed on: outputs, input and parameter gradients."""
    mixer = _mixer(version)
    core = mixer._mamba1_core if version == 1 else mixer._mamba2_core
    width = mixer.in_split[0] if version == 1 else sum(mixer.in_split[1:])
    x = torch.randn(2, sum(pieces), width, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    outputs, carry, start = [], None, 0
    for length in pieces:
        out, carry = core(x[:, start:start + length], carry)
        outputs.append(out)
        start += length
    y = torch.cat(outputs, dim=1)  # [b, s, d]
    weights = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
    ((y * weights).sum() + sum((t.float() ** 2).sum() for t in carry)).backward()
    grads = {name: p.grad for name, p in mixer.named_parameters() if p.grad is not None}
    return {"y": y.detach(), "x_grad": x.grad, "carry": [t.detach() for t in carry], **grads}


@pytest.mark.parametrize("version", [1, 2])
def test_pieces_from_the_carried_state_equal_the_whole_sequence(version: int) -> None:
    whole, pieces = _core_run(version, (sum(PIECES),)), _core_run(version, PIECES)
    assert whole["carry"][1].dtype == torch.float32 and whole["carry"][0].shape[1] == 3
    assert set(pieces) == set(whole) and len(whole) > 4
    for name, expected in whole.items():
        for got, want in zip(pieces[name], expected) if name == "carry" else [(pieces[name], expected)]:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")


def _model(version: int, pattern: str):
    return build_model(_config(version, pattern), layout_state(), torch.device("cpu"), seed=4).eval()


@pytest.mark.parametrize("version, pattern", [(2, "MM"), (1, "MM"), (2, "M*M")])
def test_each_packed_document_gets_the_logits_it_has_alone(version: int, pattern: str) -> None:
    model = _model(version, pattern)
    tokens = torch.randint(0, 11, (2, 13), generator=torch.Generator().manual_seed(3))
    documents = torch.tensor([[0] * 5 + [1] * 2 + [2] * 6, [0] * 9 + [1] * 4])
    with torch.no_grad():
        packed = model(tokens, document_ids=documents, position_ids=_restarting(documents))  # [b, s, v]
        plain = model(tokens)
        for row in range(2):
            for doc in documents[row].unique().tolist():
                where = (documents[row] == doc).nonzero().flatten()
                alone = model(tokens[row:row + 1, where])  # [1, s_doc, v]
                torch.testing.assert_close(packed[row, where], alone[0], rtol=1e-5, atol=1e-5)
    assert (packed - plain).abs().max().item() > 1e-3  # the documents restart the state


def _restarting(documents: torch.Tensor) -> torch.Tensor:
    """Positions counted from each document's start ``[b, s]``."""
    positions = torch.zeros_like(documents)
    for row in range(documents.size(0)):
        for doc in documents[row].unique().tolist():
            where = (documents[row] == doc).nonzero().flatten()
            positions[row, where] = torch.arange(where.numel())
    return positions


def test_a_cp_rank_holds_the_runs_of_its_positions() -> None:
    runs: List[List[Run]] = [local_runs(token_positions(16, 4, rank)) for rank in range(4)]
    assert runs[0] == [Run(0, 2, 0), Run(2, 4, 14)] and runs[1] == [Run(0, 2, 2), Run(2, 4, 12)]
    assert runs[3] == [Run(0, 4, 6)] and runs[3][0].end == 10  # chunks 3 and 4 meet
    assert local_runs(token_positions(16, 4, 2, balanced=False)) == [Run(0, 4, 8)]
    assert local_runs(torch.tensor([12, 13, 2, 3])) == [Run(2, 4, 2), Run(0, 2, 12)]  # in sequence order

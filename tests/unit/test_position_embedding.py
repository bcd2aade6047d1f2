"""Absolute position embeddings (core/transformer/position_embedding.py).

The sinusoidal table equals XGLM's (fairseq's) row by row, odd widths included;
each sequence-parallel rank reads the rows of its own chunk of positions; and
given ``position_ids`` (e.g. reset at document boundaries) reach the learned
table as in transformers (GPT-2 reads row p, OPT row p + 2).

    python -m pytest tests/unit/test_position_embedding.py -q
"""
from __future__ import annotations

import pytest
import torch

from core.models.gpt_model import layout_state
from core.transformer.position_embedding import local_position_ids, sinusoidal_embedding
from tests.models.test_hf_parity import our_logits
from tests.models.test_zoo_parity import load_ours, make_hf_model, prepare


@pytest.mark.parametrize("dim", [64, 33])
def test_sinusoidal_table_is_xglms(dim: int) -> None:
    from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

    theirs = XGLMSinusoidalPositionalEmbedding.get_embedding(40, dim)  # [40, dim]
    ours = sinusoidal_embedding(torch.arange(40), dim)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_sequence_parallel_rank_reads_its_chunk() -> None:
    given = torch.tensor([[0, 1, 2, 0, 1, 2], [5, 6, 7, 8, 9, 10]])  # [b, s]
    group = layout_state(tp=2, tp_rank=1).tp_group
    assert local_position_ids(6, given, group, True, torch.device("cpu")).tolist() == [[0, 8], [1, 9], [2, 10]]
    assert local_position_ids(6, None, group, True, torch.device("cpu")).tolist() == [[3], [4], [5]]
    assert local_position_ids(6, None, group, False, torch.device("cpu")).shape == (6, 1)


@pytest.mark.parametrize("name", ["gpt2", "opt"])
def test_given_position_ids_match_transformers(name: str, tmp_path) -> None:
    mg_dir, input_ids, _ = prepare(name, str(tmp_path), tp=1)
    position_ids = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7], [3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2]])
    model = load_ours(mg_dir, layout_state(1))
    with torch.no_grad():
        expected = make_hf_model(name)(input_ids=input_ids, position_ids=position_ids).logits.float()
        ours = model(input_ids, position_ids=position_ids).float()  # [b, s, v] at TP 1
        default = our_logits(model, input_ids)
    assert (ours - expected).abs().max().item() <= 1e-4
    assert (default - ours).abs().max().item() > 1e-3  # the positions were used

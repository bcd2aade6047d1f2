"""DeepSeek Sparse Attention's pieces (``core/transformer/sparse_attention.py``).

* the lightning indexer selects the keys transformers' DeepSeek-V3.2 indexer selects, from the same weights;
* the blocked top-k selection equals one over the full score matrix, at any block size;
* sparse attention over the selections equals dense attention masked to them, forward and backward, at any block
  size, whether a block gathers its selected rows or scores every key and masks; with every causal key selected it
  is causal attention;
* its memory grows linearly in the sequence at a fixed top-k (the probe's peak over a forward and backward at two
  lengths), the dense reference's quadratically.

    python -m pytest tests/unit/test_sparse_attention.py -q
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers

from core.memory_probe import MemoryProbe
from core.transformer.sparse_attention import (LightningIndexer, dense_masked_attention, indexer_rotary,
                                               indexer_scores, select_topk, sparse_attention)


def inputs(s: int, b: int = 2, heads: int = 3, dim: int = 8, value_dim: int = 5, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(s, b, heads, dim, generator=generator) for _ in range(2))
    v = torch.randn(s, b, heads, value_dim, generator=generator)
    q_index = torch.randn(s, b, 2, 4, generator=generator)
    k_index = torch.randn(s, b, 4, generator=generator)
    weights = torch.randn(s, b, 2, generator=generator)
    return q, k, v, (q_index, k_index, weights)


def test_indexer_selects_what_transformers_deepseek_v32_selects() -> None:
    config = transformers.DeepseekV32Config(hidden_size=32, q_lora_rank=24, index_n_heads=4, index_head_dim=16,
                                            index_topk=5, qk_rope_head_dim=8, num_attention_heads=4,
                                            kv_lora_rank=16, qk_nope_head_dim=8, v_head_dim=8)
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as hf

    torch.manual_seed(0)
    reference = hf.DeepseekV32Indexer(config, layer_idx=0).eval()
    with torch.no_grad():
        for param in reference.parameters():
            param.copy_(torch.randn_like(param) * 0.3)
    ours = LightningIndexer(32, 24, 4, 16, 8)
    # ours: the replicated linears' weights and a LayerNorm with weight and bias, under transformers' names
    ours.load_state_dict(reference.state_dict())
    s, b = 11, 2
    hidden, q_latent = torch.randn(b, s, 32), torch.randn(b, s, 24)
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = hf.DeepseekV32RotaryEmbedding(config)(hidden, positions)  # [b, s, rope], half-split
    causal = torch.ones(s, s, dtype=torch.bool).tril()[None].expand(b, s, s)
    expected = reference(hidden, q_latent, (cos, sin), causal, positions)  # [b, s, 5]
    rotary = tuple(t.transpose(0, 1).unsqueeze(2) for t in (cos, sin))  # [s, b, 1, rope]
    indices, valid = select_topk(*ours(hidden.transpose(0, 1), q_latent.transpose(0, 1), *rotary), top_k=5)
    for batch in range(b):
        for query in range(s):
            mine = indices[batch, query][valid[batch, query]].sort().values
            theirs = expected[batch, query].long()
            assert torch.equal(mine, theirs[theirs <= query].sort().values), (batch, query)


def test_indexer_rotary_converts_between_the_table_layouts() -> None:
    angles = torch.randn(4, 1, 1, 3)
    interleaved = torch.repeat_interleave(angles, 2, dim=-1)  # each angle twice in a row
    half = torch.cat([angles, angles], dim=-1)  # angle i on dims i and i + 3
    cos, sin = indexer_rotary(interleaved.cos(), interleaved.sin(), model_interleaved=True, indexer_interleaved=False)
    assert torch.equal(cos, half.cos())
    assert torch.equal(sin, half.sin())
    cos, sin = indexer_rotary(half.cos(), half.sin(), model_interleaved=False, indexer_interleaved=True)
    assert torch.equal(cos, interleaved.cos()) and torch.equal(sin, interleaved.sin())


@pytest.mark.parametrize("block", [1, 4, 64])
def test_blocked_selection_equals_the_full_score_matrix(block: int) -> None:
    _, _, _, index = inputs(13)
    indices, valid = select_topk(*index, top_k=6, block=block)
    causal = torch.ones(13, 13, dtype=torch.bool).tril()[None]
    scores = indexer_scores(*index, causal)  # [b, s, s]
    best, expected = scores.topk(6, dim=-1)
    assert torch.equal(indices, expected) and torch.equal(valid, best > float("-inf"))
    assert valid.sum(-1).tolist() == [[min(q + 1, 6) for q in range(13)]] * 2  # a query's causal keys, at most 6
    with pytest.raises(ValueError, match="top-k must be >= 1"):
        select_topk(*index, top_k=0)


@pytest.mark.parametrize("path", ["gather", "score_all"])
@pytest.mark.parametrize("block", [1, 5, 64])
def test_sparse_attention_equals_the_masked_dense_reference(block: int, path: str, monkeypatch) -> None:
    """Both ways a block attends (gathering its selected rows, or scoring every key and masking) equal the
    reference, forward and backward."""
    import core.transformer.sparse_attention as module

    monkeypatch.setattr(module, "GATHER_BELOW_DENSITY", 2.0 if path == "gather" else 0.0)
    q, k, v, index = inputs(17)
    indices, valid = select_topk(*index, top_k=6)
    grads = []
    for attention in (lambda *a: sparse_attention(*a, block=block), dense_masked_attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = attention(*leaves, indices, valid, 0.3)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append((out.detach(), *(t.grad for t in leaves)))
    for ours, reference in zip(*grads):
        assert (ours - reference).abs().max().item() <= 1e-6


def test_every_key_selected_is_causal_attention() -> None:
    q, k, v, index = inputs(9, value_dim=8)
    indices, valid = select_topk(*index, top_k=100)  # clamps to the sequence
    out = sparse_attention(q, k, v, indices, valid, 0.25, block=4)
    expected = F.scaled_dot_product_attention(*(t.permute(1, 2, 0, 3) for t in (q, k, v)), is_causal=True,
                                              scale=0.25).permute(2, 0, 1, 3)
    assert (out - expected).abs().max().item() <= 1e-6


def peak_bytes(attention, s: int, top_k: int = 8) -> int:
    """The probe's peak over one forward and backward of ``attention`` at length ``s`` (inputs made before)."""
    q, k, v, index = inputs(s, b=1, heads=2, dim=8, value_dim=8)
    indices, valid = select_topk(*index, top_k=top_k, block=32)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    probe = MemoryProbe()
    with probe.measuring():
        attention(*leaves, indices, valid, 0.3).sum().backward()
    return probe.peak_above_start()


def test_memory_grows_linearly_in_the_sequence() -> None:
    """Doubling the sequence at top-k 8 doubles sparse attention's peak (linear); the dense reference's grows
    about four times (its s x s scores)."""
    sparse = [peak_bytes(lambda *a: sparse_attention(*a, block=32), s) for s in (256, 512)]
    dense = [peak_bytes(dense_masked_attention, s) for s in (256, 512)]
    assert sparse[1] / sparse[0] < 2.3, sparse
    assert dense[1] / dense[0] > 3.5, dense
    assert sparse[1] < dense[1] / 8, (sparse, dense)


def test_dropout_is_replayed_by_the_checkpoint() -> None:
    """With attention dropout the checkpointed blocks redraw the forward's mask in the backward: output and
    gradients equal one pass without checkpointing from the same RNG state; the mask does drop."""
    from core.transformer.sparse_attention import _attend_block

    q, k, v, index = inputs(11)
    indices, valid = select_topk(*index, top_k=6)
    runs = []
    for checkpointed in (True, False):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(5)
        if checkpointed:
            out = sparse_attention(*leaves, indices, valid, 0.3, block=4, dropout=0.5)
        else:
            qb, kb, vb = (t.transpose(0, 1) for t in leaves)
            out = torch.cat([_attend_block(qb[:, i:i + 4], kb, vb, indices[:, i:i + 4], valid[:, i:i + 4], 0.3, 0.5)
                             for i in range(0, 11, 4)], dim=1).transpose(0, 1)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        runs.append((out.detach(), *(t.grad for t in leaves)))
    for ours, reference in zip(*runs):
        assert torch.equal(ours, reference)
    assert (runs[0][0] - sparse_attention(q, k, v, indices, valid, 0.3)).abs().max() > 0.1


@pytest.mark.parametrize("path", ["gather", "score_all"])
def test_an_invalid_entry_repeating_a_valid_index_changes_nothing(path: str, monkeypatch) -> None:
    """Under CP the invalid entries' indices are remapped and may repeat a valid entry's: the result is that of
    the valid entries alone (a scatter that let the invalid one win dropped the key, and a row could turn NaN)."""
    import core.transformer.sparse_attention as module

    monkeypatch.setattr(module, "GATHER_BELOW_DENSITY", 2.0 if path == "gather" else 0.0)
    q, k, v, index = inputs(9)
    indices, valid = select_topk(*index, top_k=4)
    expected = sparse_attention(q, k, v, indices, valid, 0.3)
    repeated = torch.where(valid, indices, indices[..., :1])  # every invalid entry points at the first selection
    assert (~valid).any()
    for attention in (sparse_attention, dense_masked_attention):
        out = attention(q, k, v, repeated, valid, 0.3)
        assert torch.isfinite(out).all() and (out - expected).abs().max() <= 1e-6

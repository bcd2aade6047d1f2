"""The next-token rules of mindspeed_llm/inference/sampling.py against hand computations, and the KV cache's
mask (per-row positions, padding, sliding windows) against the rule written out."""
from __future__ import annotations

import math

import pytest
import torch

from mindspeed_llm.inference.kv_cache import KVCache
from mindspeed_llm.inference.sampling import (SamplingConfig, apply_repetition_penalty, next_tokens,
                                              processed_logits, top_k_filter, top_p_filter)

INF = float("-inf")


def test_repetition_penalty_hugging_face_rule() -> None:
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0]])
    seen = torch.tensor([[True, True, False, False]])
    out = apply_repetition_penalty(logits, seen, 2.0)
    assert out.tolist() == [[1.0, -2.0, 0.5, -3.0]]  # seen: positive / 2, negative * 2; unseen unchanged


def test_top_k_keeps_the_k_largest() -> None:
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0], [0.0, -1.0, 5.0, 1.0]])
    assert top_k_filter(logits, 2).tolist() == [[INF, 4.0, 3.0, INF], [INF, INF, 5.0, 1.0]]
    assert torch.equal(top_k_filter(logits, 0), logits)


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    # masses before each token: 0, 0.5, 0.8, 0.95 -> p 0.8 keeps the first two (0.5 + 0.3 reaches 0.8)
    kept = top_p_filter(logits, 0.79).isfinite().tolist()
    assert kept == [[True, True, False, False]]
    assert top_p_filter(logits, 0.81).isfinite().tolist() == [[True, True, True, False]]
    assert top_p_filter(logits, 0.1).isfinite().tolist() == [[True, False, False, False]]  # at least one
    shuffled = logits[:, [2, 0, 3, 1]]  # order does not matter
    assert top_p_filter(shuffled, 0.79).isfinite().tolist() == [[False, True, False, True]]


def test_warpers_in_order_and_the_draw() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    seen = torch.zeros(1, 4, dtype=torch.bool)
    config = SamplingConfig(do_sample=True, temperature=0.5, top_k=3, top_p=0.98)
    scores = processed_logits(logits, seen, config)
    # temperature: [4, 2, 0, -2]; top-k 3 drops the last; over the three left the mass before the third is
    # (e^4 + e^2) / (e^4 + e^2 + e^0) ~ 0.984 >= 0.98: top-p drops it too (at 0.99 it would stay)
    total = math.exp(4) + math.exp(2) + 1
    assert 0.98 < (math.exp(4) + math.exp(2)) / total < 0.99
    assert scores.tolist() == [[4.0, 2.0, INF, INF]]
    kept_at_099 = processed_logits(logits, seen, SamplingConfig(do_sample=True, temperature=0.5, top_k=3, top_p=0.99))
    assert kept_at_099.isfinite().tolist() == [[True, True, True, False]]
    draws = [next_tokens(logits, seen, config, torch.Generator().manual_seed(s))[0].item() for s in range(200)]
    share = draws.count(0) / len(draws)
    assert set(draws) <= {0, 1} and abs(share - math.exp(4) / (math.exp(4) + math.exp(2))) < 0.07
    greedy = next_tokens(logits, seen, SamplingConfig())[0]
    assert greedy.tolist() == [0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(top_p=0.0), "--top-p 0.0 is outside"), (dict(top_p=1.5), "--top-p 1.5 is outside"),
    (dict(temperature=0.0), "--temperature"), (dict(top_k=-1), "--top-k"),
])
def test_bad_sampling_settings_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingConfig(**kwargs)


def test_cache_mask_per_row_positions_padding_and_window() -> None:
    cache = KVCache(batch=2, max_len=6, device=torch.device("cpu"))
    valid = torch.tensor([[True, True, True], [False, True, True]])  # row 1 left-padded by one
    positions = torch.tensor([[0, 1, 2], [0, 0, 1]])
    cache.begin_step(valid, positions)
    mask = cache.allowed(window=2, chunk=None)[:, 0]  # [b, sq, sk]
    expected_row0 = [[1, 0, 0], [1, 1, 0], [0, 1, 1]]  # causal, window 2
    expected_row1 = [[1, 0, 0], [0, 1, 0], [0, 1, 1]]  # the pad sees itself only; no query sees the pad
    assert mask.int().tolist() == [expected_row0, expected_row1]
    key = torch.randn(3, 2, 1, 4)
    keys, _ = cache.update(0, key, key)
    assert keys.shape == (3, 2, 1, 4) and torch.equal(keys, key)
    cache.end_step()
    cache.begin_step(torch.tensor([[True], [True]]), torch.tensor([[3], [2]]))
    step = cache.allowed(window=None, chunk=None)[:, 0]
    assert step.int().tolist() == [[[1, 1, 1, 1]], [[0, 1, 1, 1]]]
    keys, _ = cache.update(0, key[:1], key[:1])
    assert keys.shape == (4, 2, 1, 4) and torch.equal(keys[:3], key)


def test_filters_and_penalty_agree_with_transformers_processors() -> None:
    from transformers.generation.logits_process import (RepetitionPenaltyLogitsProcessor, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=generator) * 3
    input_ids = torch.randint(0, 50, (4, 12), generator=generator)
    seen = torch.zeros(4, 50, dtype=torch.bool).scatter(1, input_ids, True)
    expected = RepetitionPenaltyLogitsProcessor(1.7)(input_ids, logits.clone())
    assert torch.allclose(apply_repetition_penalty(logits, seen, 1.7), expected)
    for p in (0.3, 0.7, 0.95):
        ours = top_p_filter(logits, p).isfinite()
        assert torch.equal(ours, TopPLogitsWarper(p)(input_ids, logits.clone()).isfinite()), p
    assert torch.equal(top_k_filter(logits, 7), TopKLogitsWarper(7)(input_ids, logits.clone()))

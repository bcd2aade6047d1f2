"""A GPT model with NF4 linear weights at TP=2 (with and without sequence parallelism) equals TP=1.

Every rank builds the model (initialisation is independent of TP), stores its local shards of the
linear weights as NF4 (``quantize_module_linears``) and returns its per-token losses and its shard
of the word-embedding gradient. Rows of 64 weights per rank keep the NF4 blocks of each shard equal
to those of TP=1, so without double quantisation the dequantised weights are the same numbers and
the losses and gradients equal the single-process ones (fp32, 1e-5). With double quantisation each
shard has its own absmax offset and scales: close, not equal. One 2-process gloo launch.

    python -m pytest -q tests/distributed/test_nf4_tp.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.models.gpt_model import build_model
from core.parallel_state import ParallelState, initialize
from core.quantization import NF4Tensor, quantize_module_linears
from core.transformer.config import TransformerConfig

MODEL = dict(num_layers=2, hidden_size=128, num_attention_heads=4, num_query_groups=2, vocab_size=48,
             ffn_hidden_size=128, normalization="RMSNorm", activation="swiglu", add_bias_linear=False,
             attention_dropout=0.0, hidden_dropout=0.0, make_vocab_size_divisible_by=1, init_method_std=0.05)
LINEARS = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
CASES = [(sequence_parallel, double_quant) for sequence_parallel in (False, True) for double_quant in (False, True)]


def _batch() -> Tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 48, (2, 8), generator=generator)  # [b, s]
    return ids, torch.roll(ids, -1, dims=1)


def _loss_and_embedding_grad(state: ParallelState, sequence_parallel: bool,
                             double_quant: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-token losses ``[b, s]`` and this rank's word-embedding gradient ``[v/tp, h]``."""
    tp = state.tp_group.size
    config = TransformerConfig(**MODEL, tensor_model_parallel_size=tp, sequence_parallel=sequence_parallel)
    model = build_model(config, state, torch.device("cpu"), seed=3)
    quantize_module_linears(model, LINEARS, double_quant=double_quant)
    assert sum(isinstance(getattr(m, "weight", None), NF4Tensor) for m in model.modules()) == 8
    ids, labels = _batch()
    losses = model(ids, labels=labels)  # [b, s]
    losses.sum().backward()
    return losses.detach(), model.embedding.word_embeddings.weight.grad


def _worker(rank: int, world_size: int) -> Dict[Tuple[bool, bool], Tuple[torch.Tensor, torch.Tensor]]:
    state = initialize(tp=world_size)
    return {case: _loss_and_embedding_grad(state, *case) for case in CASES}


@pytest.fixture(scope="module")
def per_rank() -> List[Dict]:
    return run_distributed(2, _worker)


@pytest.mark.parametrize("sequence_parallel,double_quant", CASES)
def test_tp2_nf4_model_equals_tp1(per_rank, sequence_parallel, double_quant):
    losses, grad = _loss_and_embedding_grad(initialize(), False, double_quant)
    tp_losses = [result[(sequence_parallel, double_quant)][0] for result in per_rank]
    tp_grad = torch.cat([result[(sequence_parallel, double_quant)][1] for result in per_rank])  # [v, h]
    loss_diff, grad_diff = max((l - losses).abs().max() for l in tp_losses), (tp_grad - grad).abs().max()
    print(f"sp={sequence_parallel} double_quant={double_quant}: max |loss diff| {loss_diff:.2e}, "
          f"max |grad diff| {grad_diff:.2e}, relative grad diff {(tp_grad - grad).norm() / grad.norm():.2e}")
    if not double_quant:  # the same numbers
        for rank_losses in tp_losses:
            torch.testing.assert_close(rank_losses, losses, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tp_grad, grad, rtol=1e-5, atol=1e-5)
    else:  # per-shard absmax offsets and scales
        assert loss_diff < 2e-3 * losses.abs().max() and (tp_grad - grad).norm() < 0.05 * grad.norm()

"""The short-conv mixer at TP 2 and TP 2 + SP equals TP 1: output, input gradient, every parameter gradient.

Every rank builds the same full weights (seeded), takes its slice with each parameter's
:class:`TPShard` and runs a sum-of-squares loss; under SP it feeds and differentiates its own
sequence chunk. Gradients that grad sync completes (partial sums over TP: ``out_proj``'s bias under
SP) are completed here the same way, then unsharded and compared with one process. One case packs
documents, so the conv restarts at each document on the gathered sequence. One 2-process gloo launch.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.models.gpt_model import layout_state
from core.parallel_state import ParallelState, initialize
from core.tensor_parallel.mappings import all_gather_along_dim, all_reduce
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.short_conv import ShortConv

SEQ, BATCH, HIDDEN, KERNEL = 8, 2, 16, 3
TOLERANCE = 1e-5
DOCUMENTS = torch.tensor([[0] * 3 + [1] * 5, [0] * 6 + [1] * 2])  # [b, s]
CASES = ("tp", "sp", "sp_documents")  # name -> sequence parallel, packed documents


def _config(tp: int, sp: bool) -> TransformerConfig:
    return TransformerConfig(num_layers=2, hidden_size=HIDDEN, num_attention_heads=2, vocab_size=16,
                             normalization="RMSNorm", hidden_dropout=0.0, attention_dropout=0.0,
                             tensor_model_parallel_size=tp, sequence_parallel=sp,
                             experimental_attention_variant="short_conv", linear_attention_freq="[1,0]",
                             short_conv_kernel_size=KERNEL, short_conv_bias=True)


def _full_weights(module: ShortConv) -> Dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    full = {}
    for key, param in module.named_parameters():
        shard = param_meta(param).tp_shard
        shape = shard.full_shape(param.shape) if shard is not None else list(param.shape)
        full[key] = torch.randn(shape, generator=gen) * 0.3
    return full


def run_case(case: str, state: ParallelState) -> Dict[str, Any]:
    """Output ``[s, b, h]``, input gradient and full parameter gradients of one case on this rank."""
    group, sp = state.tp_group, case.startswith("sp")
    module = ShortConv(_config(group.size, sp), state)
    with torch.no_grad():
        for key, full in _full_weights(module).items():
            param = dict(module.named_parameters())[key]
            shard = param_meta(param).tp_shard
            param.copy_(shard.shard(full, group.rank, group.size) if shard is not None else full)
    x = torch.randn(SEQ, BATCH, HIDDEN, generator=torch.Generator().manual_seed(3))
    local = (x.chunk(group.size, dim=0)[group.rank] if sp else x).clone().requires_grad_(True)
    layout = SequenceLayout(SEQ, torch.arange(SEQ), DOCUMENTS) if case.endswith("documents") else None
    out = module(local, None, layout)
    out.pow(2).sum().backward()
    grads = {}
    for key, param in module.named_parameters():
        meta = param_meta(param)
        if meta.grad_partial_over_tp:
            all_reduce(param.grad, group)
        grads[key] = gather_full_tensor(param.grad, meta.tp_shard, group)
    if sp:
        return {"out": all_gather_along_dim(out.detach(), 0, group),
                "x_grad": all_gather_along_dim(local.grad, 0, group), "grads": grads}
    return {"out": out.detach(), "x_grad": local.grad, "grads": grads}


def _worker(rank: int, world_size: int) -> Dict[str, Dict[str, Any]]:
    state = initialize(tp=world_size)
    return {case: run_case(case, state) for case in CASES}


@pytest.fixture(scope="module")
def tp2_results() -> List[Dict[str, Dict[str, Any]]]:
    return run_distributed(2, _worker)


@pytest.mark.parametrize("case", CASES)
def test_tp2_equals_tp1(case: str, tp2_results: List[Dict[str, Dict[str, Any]]]) -> None:
    reference = run_case(case, layout_state(1))
    for rank, results in enumerate(tp2_results):
        result = results[case]
        torch.testing.assert_close(result["out"], reference["out"], rtol=0, atol=TOLERANCE,
                                   msg=lambda m: f"{case} rank {rank} output: {m}")
        torch.testing.assert_close(result["x_grad"], reference["x_grad"], rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{case} rank {rank} input gradient: {m}")
        assert set(result["grads"]) == set(reference["grads"])
        for key, grad in reference["grads"].items():
            torch.testing.assert_close(result["grads"][key], grad, rtol=1e-5, atol=1e-5,
                                       msg=lambda m: f"{case} rank {rank} {key}: {m}")

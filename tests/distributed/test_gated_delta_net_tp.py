"""The gated DeltaNet mixer at TP 2 and TP 2 + sequence parallelism equals TP 1.

Every rank builds the mixer with the same full weights (split with each parameter's TPShard), runs
the same input (under SP its own sequence chunk) with and without packed documents, and returns the
full output, the input gradient and every parameter's gradient completed as grad sync completes them
(partial sums over TP, the gated norm's weight, all-reduced) and reassembled. The parent compares
them with one process (fp32, 1e-5). Two key heads with two value heads each: one key-head group per
rank. One 2-process gloo launch for all cases.

    python -m pytest tests/distributed/test_gated_delta_net_tp.py -q
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
from core.transformer.context_parallel import sequence_layout
from core.transformer.gated_delta_net import GatedDeltaNet

SEQ, BATCH, HIDDEN = 12, 2, 16  # SEQ divisible by 2 for SP
TOLERANCE = 1e-5
CASES = [(sp, packed) for sp in (False, True) for packed in (False, True)]


def config(tp: int, sp: bool) -> TransformerConfig:
    return TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=2, vocab_size=16, normalization="RMSNorm",
        experimental_attention_variant="gated_delta_net", linear_attention_freq="[1]", linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=4, linear_value_head_dim=6, linear_conv_kernel_dim=3,
        linear_chunk_size=5, norm_epsilon=1e-6, add_bias_linear=False, hidden_dropout=0.0,
        attention_dropout=0.0, tensor_model_parallel_size=tp, sequence_parallel=sp)


def full_weights() -> Dict[str, torch.Tensor]:
    """Random full tensors for every parameter, from one seed (the norm's weight away from 1)."""
    reference = GatedDeltaNet(config(1, False), layout_state(1))
    gen = torch.Generator().manual_seed(0)
    return {name: torch.randn(param.shape, generator=gen) * 0.3 + (1.0 if name == "norm.weight" else 0.0)
            for name, param in reference.named_parameters()}


def documents() -> torch.Tensor:
    ids = torch.zeros(BATCH, SEQ, dtype=torch.long)
    ids[0, 5:], ids[0, 9:], ids[1, 1:] = 1, 2, 1
    return ids  # [b, s]


def run_mixer(state: ParallelState, sp: bool, packed: bool) -> Dict[str, Any]:
    """Full output, input gradient and full parameter gradients of a fixed random loss."""
    group = state.tp_group
    mixer = GatedDeltaNet(config(group.size, sp), state)
    weights = full_weights()
    with torch.no_grad():
        for name, param in mixer.named_parameters():
            shard = param_meta(param).tp_shard
            param.copy_(shard.shard(weights[name], group.rank, group.size) if shard is not None else weights[name])
    gen = torch.Generator().manual_seed(3)
    x, upstream = torch.randn(SEQ, BATCH, HIDDEN, generator=gen), torch.randn(SEQ, BATCH, HIDDEN, generator=gen)
    if sp:
        x, upstream = (t.chunk(group.size, dim=0)[group.rank] for t in (x, upstream))
    x.requires_grad_(True)
    layout = sequence_layout(None, SEQ, x.device, documents()) if packed else None
    out = mixer(x, None, layout)
    (out * upstream).sum().backward()
    grads = {}
    for name, param in mixer.named_parameters():
        if param_meta(param).grad_partial_over_tp:
            all_reduce(param.grad, group)
        grads[name] = gather_full_tensor(param.grad, param_meta(param).tp_shard, group)
    if sp:
        return {"out": all_gather_along_dim(out.detach(), 0, group),
                "x_grad": all_gather_along_dim(x.grad, 0, group), "grads": grads}
    return {"out": out.detach(), "x_grad": x.grad, "grads": grads}


def _worker(rank: int, world_size: int) -> Dict[Tuple[bool, bool], Dict[str, Any]]:
    state = initialize(tp=world_size)
    return {case: run_mixer(state, *case) for case in CASES}


@pytest.fixture(scope="module")
def tp2_results() -> List[Dict[Tuple[bool, bool], Dict[str, Any]]]:
    return run_distributed(2, _worker)


@pytest.mark.parametrize("sp, packed", CASES, ids=[f"sp{int(sp)}_packed{int(p)}" for sp, p in CASES])
def test_tp2_equals_tp1(tp2_results: List[Dict], sp: bool, packed: bool) -> None:
    reference = run_mixer(layout_state(1), False, packed)
    for rank, results in enumerate(tp2_results):
        result = results[(sp, packed)]
        torch.testing.assert_close(result["out"], reference["out"], rtol=TOLERANCE, atol=TOLERANCE)
        torch.testing.assert_close(result["x_grad"], reference["x_grad"], rtol=TOLERANCE, atol=TOLERANCE)
        assert set(result["grads"]) == set(reference["grads"])
        for name, grad in reference["grads"].items():
            torch.testing.assert_close(result["grads"][name], grad, rtol=TOLERANCE, atol=TOLERANCE,
                                       msg=lambda m: f"rank {rank} {name}: {m}")

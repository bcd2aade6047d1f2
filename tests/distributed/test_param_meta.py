"""Parameter metadata with processes (gloo, 2 ranks, launched once for the module).

- ``sum_replicas_over_tp`` at TP 2 with replicated K/V heads: the whole tensor (DDP)
  and any set of flat windows of it (FSDP shards) give the same bits, and the
  replicated rows hold the sum of both ranks' partial gradients;
- the expert part of the gradient norm is summed over the EP group;
- every parameter's ``ParamMeta`` survives ``fully_shard`` (FSDP2) and
  ``FullyShardedDataParallel`` (FSDP1), and FSDP refuses expert parameters by name.
"""
from __future__ import annotations

from typing import Dict

import pytest
import torch
from torch import nn

from core.launcher import run_distributed

WORLD = 2
ROWS, COLS = 6 + 3 + 3, 5  # local rows at TP 2: two Q heads of 3, one replicated K and one replicated V head


def _shard():
    from core.tensor_parallel.param_meta import Segment, TPShard

    return TPShard(0, (Segment(4, 3), Segment(1, 3), Segment(1, 3)))


def _replicas(rank: int) -> Dict[str, torch.Tensor]:
    from core.parallel_state import initialize
    from core.tensor_parallel.param_meta import sum_replicas_over_tp

    group = initialize(tp=WORLD).tp_group
    local = torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(rank))  # this rank's partial grads
    whole = local.clone().view(-1)
    sum_replicas_over_tp(whole, _shard(), local.shape, 0, group)
    windowed = local.clone().view(-1)
    for start, end in ((0, 13), (13, 33), (33, 47), (47, ROWS * COLS)):
        sum_replicas_over_tp(windowed[start:end], _shard(), local.shape, start, group)
    return {"local": local, "whole": whole.view(ROWS, COLS), "windowed": windowed.view(ROWS, COLS)}


def _expert_norm(rank: int) -> Dict[str, float]:
    from core.optimizer.clip_grads import global_grad_norm
    from core.parallel_state import initialize
    from core.tensor_parallel.param_meta import update_meta

    state = initialize(tp=1, ep=WORLD)
    dense = nn.Parameter(torch.zeros(4))
    expert = update_meta(nn.Parameter(torch.zeros(4)), is_expert=True)
    grads = [torch.full((4,), 1.0), torch.full((4,), 2.0 + rank)]  # each EP rank holds another expert
    norm = global_grad_norm([dense, expert], grads, state.tp_group, state.group("mp"), state.group("ep"))
    return {"norm": norm, "ep": state.group("ep").size}


def _fsdp_meta(kind: str) -> Dict[str, object]:
    from core.distributed import fsdp
    from core.models.gpt_model import build_model
    from core.parallel_state import initialize
    from core.tensor_parallel.param_meta import param_meta, update_meta
    from core.transformer.config import TransformerConfig

    state = initialize(tp=1)
    config = TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=100,
                               num_query_groups=2, normalization="RMSNorm", activation="swiglu", add_bias_linear=False,
                               max_position_embeddings=16, attention_dropout=0.0, hidden_dropout=0.0)
    wrap = fsdp.wrap_fsdp2 if kind == "fsdp2" else fsdp.wrap_fsdp1
    model = build_model(config, state, torch.device("cpu"), 0)
    before = {name: param_meta(p) for name, p in model.named_parameters()}
    wrapped = wrap(model, state)
    after = {name: param_meta(p) for name, p in fsdp.named_fsdp_params(wrapped)}
    expert_model = build_model(config, state, torch.device("cpu"), 0)
    update_meta(expert_model.decoder.layers["1"].mlp.linear_fc2.weight, is_expert=True)
    try:
        wrap(expert_model, state)
        refused = ""
    except NotImplementedError as error:
        refused = str(error)
    return {"before": before, "after": after, "refused": refused}


def worker(rank: int, world_size: int) -> Dict[str, object]:
    return {"replicas": _replicas(rank), "expert_norm": _expert_norm(rank),
            "fsdp2": _fsdp_meta("fsdp2"), "fsdp1": _fsdp_meta("fsdp1")}


@pytest.fixture(scope="module")
def results():
    return run_distributed(WORLD, worker)


def test_replicated_heads_are_summed_and_windows_agree_with_the_whole_tensor(results) -> None:
    locals_ = [r["replicas"]["local"] for r in results]
    summed = locals_[0][6:] + locals_[1][6:]  # K and V rows: the two replicas' partial sums
    for rank, result in enumerate(results):
        whole, windowed = result["replicas"]["whole"], result["replicas"]["windowed"]
        assert torch.equal(windowed, whole), f"rank {rank}: windows differ from the whole tensor"
        assert torch.equal(whole[:6], locals_[rank][:6]), f"rank {rank}: split Q heads must not change"
        torch.testing.assert_close(whole[6:], summed, rtol=0, atol=0)


def test_expert_part_of_the_norm_is_summed_over_the_ep_group(results) -> None:
    expected = (4 * 1.0 + 4 * 2.0 ** 2 + 4 * 3.0 ** 2) ** 0.5  # dense once, both experts
    for result in results:
        assert result["expert_norm"]["ep"] == WORLD
        assert result["expert_norm"]["norm"] == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("kind", ["fsdp2", "fsdp1"])
def test_param_meta_survives_fsdp_wrapping(results, kind: str) -> None:
    for result in results:
        before, after = result[kind]["before"], result[kind]["after"]
        assert after == before
        assert any(meta.tp_shard is not None for meta in after.values())
        assert "decoder.layers.1.mlp.linear_fc2.weight" in result[kind]["refused"]

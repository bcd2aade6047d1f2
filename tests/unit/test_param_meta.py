"""Parameter metadata (``core/tensor_parallel/param_meta.py``) in one process.

- the model gives every parameter its :class:`ParamMeta` and ``materialize`` keeps it;
  fp32 master copies carry the same record (no list of attribute names);
- ``TPShard.replica_weights`` counts every replicated KV head once in the grad norm,
  for the whole tensor and for any flat window of it (distributed-optimizer pieces,
  FSDP shards), simulated here rank by rank;
- expert parameters: their buffers and distributed-optimizer pieces use the expert-DP group.

The collective helper ``sum_replicas_over_tp`` is checked with processes in
``tests/distributed/test_param_meta.py``.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from core.distributed.grad_buffer import GradBuffers
from core.models.gpt_model import EMBEDDING_WEIGHT, build_model, layout_state
from core.optimizer.clip_grads import global_grad_norm, norm_squared_of_range
from core.optimizer.distrib_optimizer import DistributedOptimizer
from core.optimizer.optimizer import MixedPrecisionOptimizer, OptimizerConfig
from core.parallel_state import Group, single_process_state
from core.tensor_parallel.param_meta import (ParamMeta, Segment, TPShard, data_parallel_group, param_meta,
                                             set_meta, update_meta)
from core.transformer.config import TransformerConfig

# Q: 4 heads, K and V: 1 head each, head_dim 3 -> at TP 2 the K and V heads are replicated.
GQA_SHARD = TPShard(0, (Segment(4, 3), Segment(1, 3), Segment(1, 3)))
COLS = 5


def _config(**overrides) -> TransformerConfig:
    values = dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=100, ffn_hidden_size=128,
                  num_query_groups=2, max_position_embeddings=32, normalization="RMSNorm", activation="swiglu",
                  add_bias_linear=True, attention_dropout=0.0, hidden_dropout=0.0)
    values.update(overrides)
    return TransformerConfig(**values)


# --------------------------------------------------------------------------- records on the model


def test_every_model_parameter_has_its_record_after_materialize() -> None:
    state = layout_state(2, 1)
    model = build_model(_config(tensor_model_parallel_size=2, sequence_parallel=True), state,
                        torch.device("cpu"), 0)
    metas = {name: param_meta(p) for name, p in model.named_parameters()}
    qkv = metas["decoder.layers.0.self_attention.linear_qkv.weight"]
    assert qkv.tp_shard == TPShard(0, (Segment(4, 16), Segment(2, 16), Segment(2, 16)))
    assert metas["decoder.layers.0.self_attention.linear_proj.weight"].init_method == "scaled_normal"
    # under sequence parallelism: norms and row-parallel biases have partial gradients over TP
    assert metas["decoder.layers.0.input_layernorm.weight"] == ParamMeta(grad_partial_over_tp=True,
                                                                         init_method="ones")
    assert metas["decoder.layers.1.mlp.linear_fc2.bias"].grad_partial_over_tp
    assert not metas["decoder.layers.1.mlp.linear_fc1.bias"].grad_partial_over_tp  # column-parallel: split
    assert metas[EMBEDDING_WEIGHT].init_shape == (100, 64)  # padded rows are zeros
    assert all(param_meta(p) is metas[n] for n, p in model.named_parameters())  # one record, not copies


def test_tied_embeddings_over_stages_are_marked_shared_and_the_copy_leaves_the_norm() -> None:
    config = _config()
    first = build_model(config, layout_state(), torch.device("cpu"), 0, post_process=False, layer_numbers=[0])
    last = build_model(config, layout_state(), torch.device("cpu"), 0, pre_process=False, layer_numbers=[1])
    embedding, copy = param_meta(first.embedding.word_embeddings.weight), param_meta(last.output_layer.weight)
    assert embedding.shared_across_stages and not embedding.excluded_from_grad_norm
    assert copy.shared_across_stages and copy.excluded_from_grad_norm and copy.init_name == EMBEDDING_WEIGHT
    torch.testing.assert_close(last.output_layer.weight, first.embedding.word_embeddings.weight, rtol=0, atol=0)
    whole = build_model(config, layout_state(), torch.device("cpu"), 0)
    assert not any(param_meta(p).shared_across_stages for p in whole.parameters())


def test_a_parameter_nobody_marked_gets_the_default_record() -> None:
    bare = nn.Parameter(torch.zeros(3))
    assert param_meta(bare) == ParamMeta()
    assert update_meta(bare, is_expert=True) is bare and param_meta(bare).is_expert


def test_master_copies_carry_the_record() -> None:
    model = build_model(_config(params_dtype=torch.bfloat16), single_process_state(), torch.device("cpu"), 0)
    optimizer = MixedPrecisionOptimizer([model], OptimizerConfig(), single_process_state())
    assert optimizer.mixed
    for model_param, master in zip(optimizer.model_params, optimizer.master_params):
        assert master.dtype == torch.float32 and master is not model_param
        assert param_meta(master) is param_meta(model_param)


# --------------------------------------------------------------------------- replicated segments in the norm


def _local_grads(full: torch.Tensor, tp: int) -> list:
    """Each TP rank's slice of a full gradient (replicated heads: every holder has the same values)."""
    return [GQA_SHARD.shard(full, rank, tp) for rank in range(tp)]


@pytest.mark.parametrize("tp", [2, 4])
def test_replica_weights_count_each_replicated_head_once(tp: int) -> None:
    full = torch.randn(GQA_SHARD.full_size, COLS, generator=torch.Generator().manual_seed(tp))  # [18, 5]
    locals_ = _local_grads(full, tp)
    param = set_meta(nn.Parameter(torch.empty_like(locals_[0])), ParamMeta(tp_shard=GQA_SHARD))
    weights = GQA_SHARD.replica_weights(param.shape, tp).view(param.shape)  # [local rows, cols]
    assert weights[0, 0].item() == 1.0 and weights[-1, -1].item() == 1.0 / tp  # split Q rows, replicated V rows
    total = sum(norm_squared_of_range(param, g.reshape(-1), 0, rank, tp) for rank, g in enumerate(locals_))
    torch.testing.assert_close(total, full.pow(2).sum(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("cuts", [[0, 45], [0, 7, 31, 40, 45], [0, 20, 45]])
def test_windows_sum_to_the_whole_tensor(cuts: list) -> None:
    tp = 4  # local shape [3 + 3 + 3, 5]: one Q head; K and V replicated
    full = torch.randn(GQA_SHARD.full_size, COLS, generator=torch.Generator().manual_seed(0))
    local = _local_grads(full, tp)[1]
    assert local.numel() == cuts[-1]
    param = set_meta(nn.Parameter(torch.empty_like(local)), ParamMeta(tp_shard=GQA_SHARD))
    flat = local.reshape(-1)
    whole = norm_squared_of_range(param, flat, 0, 1, tp)
    windows = [norm_squared_of_range(param, flat[a:b], a, 1, tp) for a, b in zip(cuts, cuts[1:])]
    torch.testing.assert_close(sum(windows), whole, rtol=1e-6, atol=0)
    if len(cuts) == 2:
        assert torch.equal(windows[0], whole)  # the window covering everything is the whole-tensor case


def test_norm_weights_count_on_tp_rank_zero_only_and_the_tied_copy_not_at_all() -> None:
    grad = torch.tensor([3.0, 4.0])
    norm = set_meta(nn.Parameter(torch.ones(2)), ParamMeta(grad_partial_over_tp=True, init_method="ones"))
    assert norm_squared_of_range(norm, grad, 0, 0, 2).item() == 25.0
    assert norm_squared_of_range(norm, grad, 0, 1, 2).item() == 0.0
    copy = set_meta(nn.Parameter(torch.ones(2)), ParamMeta(tp_shard=TPShard.even(0, 4), excluded_from_grad_norm=True))
    assert norm_squared_of_range(copy, grad, 0, 0, 2).item() == 0.0


# --------------------------------------------------------------------------- expert parameters


class _TwoExperts(nn.Module):
    """A dense weight and an expert weight (the MoE issue will set ``is_expert``)."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Parameter(torch.randn(6, 4))
        self.expert = update_meta(nn.Parameter(torch.randn(6, 4)), is_expert=True)


def _dp2_ep2_groups():
    """Rank 1 of a DP-2 x EP-2 world of 4: dense DP over the 4 ranks, expert DP over 2 (no collective runs)."""
    return Group([0, 1, 2, 3], None, 1), Group([1, 3], None, 0)


def test_grad_buffers_reduce_expert_gradients_over_the_expert_dp_group() -> None:
    model = _TwoExperts()
    dense_dp, expert_dp = _dp2_ep2_groups()
    buffers = GradBuffers(model, dp_group=dense_dp, expert_dp_group=expert_dp, distributed_optimizer=True)
    assert buffers.bucket_of[id(model.dense)].dp_group is dense_dp
    assert buffers.bucket_of[id(model.expert)].dp_group is expert_dp
    optimizer = DistributedOptimizer([model], [buffers], OptimizerConfig(), single_process_state())
    owned = {piece.name: (piece.start, piece.end) for piece in optimizer.pieces}
    assert owned == {"dense": (6, 12), "expert": (0, 12)}  # 1/4 of 24 as DP rank 1; 1/2 as expert-DP rank 0
    with pytest.raises(ValueError, match="expert_dp_group"):
        GradBuffers(_TwoExperts(), dp_group=dense_dp)


def test_data_parallel_group_of_a_parameter() -> None:
    state = single_process_state()
    model = _TwoExperts()
    assert data_parallel_group(model.dense, state) is state.dp_group
    assert data_parallel_group(model.expert, state) is state.group("expert_dp")


def test_dense_and_expert_parts_of_the_norm_add_up() -> None:
    model = _TwoExperts()
    grads = [torch.full((6, 4), 1.0), torch.full((6, 4), 2.0)]
    one = Group([0])
    expected = (24 * 1.0 + 24 * 4.0) ** 0.5
    norm = global_grad_norm([model.dense, model.expert], grads, one, one, one)
    assert norm == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("units, tp", [((4, 2, 2), 2), ((4, 1, 1), 4), ((6,), 3), ((8, 2, 2), 8)])
@pytest.mark.parametrize("dim", [0, 1])
def test_place_is_unshard_one_rank_at_a_time(units: tuple, tp: int, dim: int) -> None:
    """The converter rebuilds a full tensor rank by rank; replicated units come from their first holder."""
    shard = TPShard(dim, tuple(Segment(n, 3) for n in units))
    full = torch.randn((shard.full_size, 5) if dim == 0 else (5, shard.full_size))
    pieces = [shard.shard(full, rank, tp) for rank in range(tp)]
    for offset in (0.0, 1000.0):  # with an offset per rank, replicas differ: the first holder's must win
        marked = [piece + rank * offset for rank, piece in enumerate(pieces)]
        placed = torch.full_like(full, float("nan"))
        for rank in reversed(range(tp)):
            shard.place(marked[rank], rank, tp, placed)
        assert torch.equal(placed, shard.unshard(marked))
        assert offset or torch.equal(placed, full)

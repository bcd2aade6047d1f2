"""The MoE layer in the decoder and in training (EP 1).

* The layer equals a per-token formula: sum_j w_tj expert_{e_tj}(x_t) + sigmoid(x_t . g) shared(x_t).
* Layer choice by --first-k-dense-replace / --moe-layer-freq.
* Pretraining steps with MoE layers (shared expert + gate, aux and z losses, expert bias) log
  ``load_balancing_loss`` and ``z_loss`` next to ``lm loss``; the expert bias moves after the step.
  In one 2-process launch TP2, TP2+SP, DP2 with the distributed optimizer and grouped GEMM
  give the TP1 losses of two steps (the second sees the first step's gradients), fp32, 1e-5.

    python -m pytest -q tests/unit/test_moe_layer.py
"""
from __future__ import annotations

from typing import Dict, List

import torch
import torch.nn.functional as F

from core.launcher import run_distributed
from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from core.transformer.mlp import MLP
from core.transformer.moe.moe_layer import MoELayer
from core.transformer.moe.router import TopKRouter

FIELDS = dict(num_layers=3, hidden_size=16, num_attention_heads=4, vocab_size=50, ffn_hidden_size=32,
              normalization="RMSNorm", activation="swiglu", add_bias_linear=False, attention_dropout=0.0,
              hidden_dropout=0.0,
              make_vocab_size_divisible_by=1, init_method_std=0.3, num_experts=4, moe_router_topk=2,
              moe_ffn_hidden_size=8, moe_shared_expert_intermediate_size=16, shared_expert_gate=True,
              moe_router_pre_softmax=True, norm_topk_prob=True, first_k_dense_replace=1)


def _swiglu(fc1: torch.Tensor, fc2: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    gate, up = fc1.chunk(2, dim=0)
    return fc2 @ (F.silu(gate @ x) * (up @ x))


def test_layers_and_the_per_token_formula() -> None:
    config = TransformerConfig(**FIELDS)
    model = build_model(config, layout_state(), torch.device("cpu"), seed=3)
    mlps = [layer.mlp for layer in model.decoder.layers.values()]
    assert [type(m) for m in mlps] == [MLP, MoELayer, MoELayer]
    assert [TransformerConfig(**{**FIELDS, "moe_layer_freq": 2}).is_moe_layer(i) for i in range(3)] == [
        False, False, True]
    layer: MoELayer = mlps[1]
    hidden = torch.randn(5, 2, 16)
    out = layer(hidden)
    flat = hidden.reshape(-1, 16)
    probs = torch.softmax(flat @ layer.router.weight.t(), dim=-1)
    fc1, fc2 = layer.experts.linear_fc1.weight, layer.experts.linear_fc2.weight
    shared = layer.shared_experts
    expected = []
    for x, p in zip(flat, probs):
        top = p.topk(2)
        weights = top.values / top.values.sum()
        routed = sum(w * _swiglu(fc1[e], fc2[e], x) for w, e in zip(weights, top.indices.tolist()))
        gate = torch.sigmoid(layer.shared_expert_gate[0] @ x)
        expected.append(routed + gate * _swiglu(shared.linear_fc1.weight, shared.linear_fc2.weight, x))
    assert (out.reshape(-1, 16) - torch.stack(expected)).abs().max() < 1e-5


PRETRAIN = ["--num-layers", "3", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
            "--seq-length", "8", "--max-position-embeddings", "8", "--vocab-size", "64", "--normalization", "RMSNorm",
            "--swiglu", "--disable-bias-linear", "--micro-batch-size", "2", "--global-batch-size", "4",
            "--train-iters", "2", "--optimizer", "sgd", "--lr", "0.5", "--mock-data", "--tokenizer-type",
            "NullTokenizer", "--seed", "3", "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0",
            "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
            "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3",
            "--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "8", "--n-shared-experts", "2",
            "--shared-expert-gate", "--moe-router-score-function", "sigmoid", "--norm-topk-prob",
            "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "0.01", "--moe-aux-loss-coeff", "0.1",
            "--moe-z-loss-coeff", "0.01", "--first-k-dense-replace", "1"]
PARALLEL = {"tp2": ["--tensor-model-parallel-size", "2"],
            "tp2_sp": ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
            "tp2_sp_grouped": ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--moe-grouped-gemm"],
            "dp2_distributed_optimizer": ["--use-distributed-optimizer"]}


def _steps(argv: List[str]) -> List[Dict[str, float]]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    results = [trainer.train_step(iterator).stats for _ in range(2)]
    biases = [m.expert_bias.clone() for m in trainer.model.modules() if isinstance(m, TopKRouter)]
    results.append({"bias_moved": float(all(b.abs().sum() > 0 for b in biases) and len(biases) == 2)})
    return results


def _parallel_worker(rank: int, world_size: int, jobs: Dict[str, List[str]]) -> Dict[str, List[Dict[str, float]]]:
    return {name: _steps(argv) for name, argv in jobs.items()}


def test_training_logs_aux_losses_and_parallel_runs_equal_tp1() -> None:
    tp1 = _steps(PRETRAIN)
    assert set(tp1[0]) == {"lm loss", "load_balancing_loss", "z_loss"}
    assert tp1[0]["load_balancing_loss"] > 0 and tp1[0]["z_loss"] > 0 and tp1[2]["bias_moved"] == 1.0
    assert tp1[1]["lm loss"] != tp1[0]["lm loss"]
    per_rank = run_distributed(2, _parallel_worker, {name: PRETRAIN + extra for name, extra in PARALLEL.items()})
    for results in per_rank:
        for name, steps in results.items():
            for step, (ours, reference) in enumerate(zip(steps[:2], tp1[:2])):
                for stat, value in reference.items():
                    assert abs(ours[stat] - value) <= 1e-5 * abs(value), (name, step, stat, ours[stat], value)
            assert steps[2]["bias_moved"] == 1.0, name


def test_resume_restores_the_expert_bias_and_the_next_loss(tmp_path) -> None:
    """The expert bias (a buffer) is saved and loaded: a resumed run's second step equals the uninterrupted one."""
    from mindspeed_llm.training.training import setup

    trainer = setup(PRETRAIN + ["--save", str(tmp_path)])
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)
    trainer.save()
    saved = [m.expert_bias.clone() for m in trainer.model.modules() if isinstance(m, TopKRouter)]
    expected = trainer.train_step(iterator).loss
    resumed = setup(PRETRAIN + ["--load", str(tmp_path)])
    loaded = [m.expert_bias for m in resumed.model.modules() if isinstance(m, TopKRouter)]
    assert all(s.abs().sum() > 0 and torch.equal(s, l) for s, l in zip(saved, loaded)) and len(loaded) == 2
    assert resumed.train_step(resumed.train_iterator()).loss == expected

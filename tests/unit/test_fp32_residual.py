"""``--fp32-residual-connection`` (Megatron) and HF Mamba's ``residual_in_fp32``.

* A bf16 transformer model and a bf16 Mamba model with the flag equal, bit for bit,
  a hand-written fp32-residual forward of the same modules (embedding cast to
  fp32, norms on the fp32 stream cast to bf16 before the branch, a Mamba layer's
  input cast before its norm, fp32 adds, final norm output cast to bf16); the
  same model without the flag does not (so the test can fail).
* With fp32 parameters the flag changes no bit of the logits or the gradients.
* The Mamba registry maps ``residual_in_fp32`` to the flag and back; Megatron
  ``args`` carry ``fp32_residual_connection`` both ways.
* One ``pretrain_gpt`` step (``--bf16 --fp32-residual-connection``, mock data)
  runs in process, with recompute and a noop layer exactly as without recompute,
  and its loss differs from the bf16-stream loss. In one 2-process gloo launch,
  PP2, PP2 with VPP, DP2 with the distributed optimizer, FSDP2 and FSDP1 steps
  give the TP1 loss exactly; TP2 and TP2+SP within a bf16 tolerance (2e-3
  relative: their row-parallel partial sums round in bf16).

    python -m pytest tests/unit/test_fp32_residual.py -q
"""
from __future__ import annotations

from argparse import Namespace
from typing import Dict, List

import pytest
import torch
import torch.nn.functional as F

from core.launcher import run_distributed
from core.models.gpt_model import GPTModel, build_model, layout_state
from core.transformer.block import MambaLayer
from core.transformer.config import TransformerConfig
from mindspeed_llm.models.megatron_format import args_from_config, config_from_args
from mindspeed_llm.models.registry import FAMILIES

BF16 = torch.bfloat16
TRANSFORMER = dict(num_layers=3, hidden_size=32, num_attention_heads=4, num_query_groups=2, vocab_size=50,
                   ffn_hidden_size=48, normalization="RMSNorm", activation="swiglu", add_bias_linear=False,
                   attention_dropout=0.0, hidden_dropout=0.0, make_vocab_size_divisible_by=1, init_method_std=0.2)
MAMBA = dict(num_layers=3, hidden_size=32, num_attention_heads=1, vocab_size=50, normalization="RMSNorm",
             position_embedding_type="none", hybrid_override_pattern="MMM", mamba_version=1, mamba_state_dim=8,
             mamba_expand=2, mamba_d_conv=4, mamba_dt_rank=4, add_bias_linear=False, attention_dropout=0.0,
             hidden_dropout=0.0, make_vocab_size_divisible_by=1, init_method_std=0.2)


def _model(fields: Dict, dtype: torch.dtype, flag: bool) -> GPTModel:
    config = TransformerConfig(**fields, params_dtype=dtype, fp32_residual_connection=flag)
    return build_model(config, layout_state(), torch.device("cpu"), seed=5).eval()


def _ids() -> torch.Tensor:
    return torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(0))  # [b, s]


def reference_logits(model: GPTModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The fp32-residual forward written out from the model's own modules; logits ``[b, s, v]``."""
    dtype = model.config.params_dtype
    hidden = model.embedding.word_embeddings(input_ids.t()).float()  # [s, b, h] fp32 stream
    rotary = model.rotary(input_ids.size(1), hidden.device, dtype, None) if model.rotary is not None else None
    for layer in model.decoder.layers.values():
        if isinstance(layer, MambaLayer):
            hidden = hidden + layer.mixer(layer.norm(hidden.to(dtype)))
            continue
        hidden = hidden + layer.self_attention(layer.input_layernorm(hidden).to(dtype), rotary)
        hidden = hidden + layer.mlp(layer.pre_mlp_layernorm(hidden).to(dtype))
    hidden = model.decoder.final_layernorm(hidden).to(dtype)  # [s, b, h] bf16
    return F.linear(hidden, model.output_weight()).transpose(0, 1)  # [b, s, v]


@pytest.mark.parametrize("fields", [TRANSFORMER, MAMBA], ids=["transformer", "mamba"])
def test_bf16_flag_matches_fp32_residual_reference(fields: Dict) -> None:
    with_flag, without = _model(fields, BF16, True), _model(fields, BF16, False)
    with torch.no_grad():
        reference = reference_logits(with_flag, _ids()).float()
        ours = with_flag(_ids()).float()
        plain = without(_ids()).float()
    assert ours.dtype == reference.dtype and torch.equal(ours, reference)
    # the bf16 stream rounds every add: the same check fails without the flag
    assert (plain - reference).abs().max() > 1e-3


@pytest.mark.parametrize("fields", [TRANSFORMER, MAMBA], ids=["transformer", "mamba"])
def test_fp32_params_flag_is_bit_identical(fields: Dict) -> None:
    results = []
    for flag in (True, False):
        model = _model(fields, torch.float32, flag).train()
        labels = torch.roll(_ids(), 1, dims=1)
        loss = model(_ids(), labels).sum()
        loss.backward()
        results.append((loss.detach(), {name: p.grad for name, p in model.named_parameters()}))
    (loss_on, grads_on), (loss_off, grads_off) = results
    assert torch.equal(loss_on, loss_off)
    assert all(torch.equal(grads_on[name], grads_off[name]) for name in grads_off)


def test_mamba_registry_maps_residual_in_fp32_both_ways() -> None:
    for family in ("mamba", "falcon_mamba", "mamba2"):
        spec = FAMILIES[family]
        assert "residual_in_fp32" not in spec.preserved_keys
        hf = dict(hidden_size=32, num_hidden_layers=2, vocab_size=50, state_size=8, expand=2,
                  num_heads=4, head_dim=16, n_groups=1, mixer_rms_eps=1e-6)
        for value in (True, False):
            config = TransformerConfig(**spec.to_config({**hf, "residual_in_fp32": value}))
            assert config.fp32_residual_connection is value
            assert spec.to_hf_config(config)["residual_in_fp32"] is value
        assert TransformerConfig(**spec.to_config(hf)).fp32_residual_connection  # HF's default: True


PRETRAIN = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "64",
            "--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "64",
            "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear", "--position-embedding-type", "rope",
            "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "1", "--optimizer", "sgd",
            "--lr", "0.1", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu",
            "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0",
            "--attention-dropout", "0", "--bf16", "--fp32-residual-connection", "--make-vocab-size-divisible-by", "1",
            "--init-method-std", "0.3"]
PARALLEL = {"tp2": ["--tensor-model-parallel-size", "2"],
            "tp2_sp": ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
            "pp2": ["--pipeline-model-parallel-size", "2"],
            "pp2_vpp": ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"],
            "dp2_distributed_optimizer": ["--use-distributed-optimizer"],
            "fsdp2": ["--use-torch-fsdp2"],
            "fsdp1": ["--use-torch-fsdp"]}


def step_loss(argv: List[str]) -> float:
    """The loss of one pretraining step through the training entry."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    return trainer.train_step(trainer.train_iterator()).loss


def _parallel_worker(rank: int, world_size: int, jobs: Dict[str, List[str]]) -> Dict[str, float]:
    return {name: step_loss(argv) for name, argv in jobs.items()}


def test_pretrain_step_bf16_fp32_residual_parallel() -> None:
    tp1 = step_loss(PRETRAIN)
    bf16_stream = step_loss([arg for arg in PRETRAIN if arg != "--fp32-residual-connection"])
    # the flag reaches the model through the entry: the loss sees the residual's precision. How far a bf16
    # stream moves it depends on the CPU's bf16 GEMM kernels (2.3e-4 relative on an AVX2 EPYC, more with
    # AMX); the forward's fp32-stream math itself is checked bit for bit above
    assert abs(bf16_stream - tp1) > 5e-5 * tp1
    recompute = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    noop = ["--noop-layers", "3"]
    assert step_loss(PRETRAIN + noop + recompute) == step_loss(PRETRAIN + noop)
    per_rank = run_distributed(2, _parallel_worker, {name: PRETRAIN + extra for name, extra in PARALLEL.items()})
    for losses in per_rank:
        for name, loss in losses.items():
            if name.startswith("tp2"):  # each rank's bf16 partial sums round differently from the TP1 matmul
                assert abs(loss - tp1) <= 2e-3 * tp1, (name, loss, tp1)
            else:  # the same bf16 math: p2p in fp32, FSDP's bf16 params feeding an fp32 stream
                assert loss == tp1, (name, loss, tp1)


def test_megatron_args_carry_the_flag_both_ways() -> None:
    for flag in (True, False):
        config = TransformerConfig(**TRANSFORMER, params_dtype=BF16, fp32_residual_connection=flag)
        args = args_from_config(config)
        assert args["fp32_residual_connection"] is flag
        assert TransformerConfig(**config_from_args(Namespace(**args))).fp32_residual_connection is flag

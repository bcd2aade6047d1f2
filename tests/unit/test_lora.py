"""LoRA (core/tensor_parallel/lora.py, mindspeed_llm/transforms/lora.py) in one process.

* An adapted linear computes ``W x + (alpha / r) B A x`` (column and row layers, fused gate/up), with the
  adapters in fp32 under --bf16; PEFT's initialisation (A uniform in +-1/sqrt(in), B zeros), drawn as full
  tensors, so the ranks' pieces at TP 2 and 4 unshard to TP 1's adapters.
* Training changes no base weight (bitwise), gives no frozen parameter a gradient buffer, and keeps
  optimizer state for the adapters only (its size is twice the adapters' for Adam); modules to save train.
* Checkpoints hold the adapters only; --load BASE --lora-load DIR resumes exactly (lora dropout on).
* Full recompute with LoRA dropout on is exact; MLA's projections take adapters.
* SFT with LoRA learns a fixed response.
* Bad input, one line each: an unknown target, a routed-expert target, LoRA flags without targets,
  output_layer tied to the embeddings, --lora-load of another rank / other targets / no checkpoint,
  --qlora with FSDP.
Tensor-parallel equivalence: tests/distributed/test_lora.py; under FSDP: tests/distributed/test_lora_fsdp.py.

    python -m pytest -q tests/unit/test_lora.py
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.datasets.sft_dataset import PACKED_FILES
from core.models.gpt_model import build_model, layout_state
from core.tensor_parallel.lora import LoraConfig, add_lora, is_adapter
from core.tensor_parallel.param_meta import param_meta
from mindspeed_llm.arguments import parse_args, transformer_config_from_args
from tests.unit.test_posttrain_sft import write_indexed

TARGETS = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--group-query-attention",
        "--num-query-groups", "2", "--ffn-hidden-size", "32", "--seq-length", "16", "--max-position-embeddings",
        "16", "--vocab-size", "32", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "3", "--optimizer", "adam",
        "--lr", "0.01", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu", "--eval-iters", "0",
        "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
        "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3", "--position-embedding-type", "rope",
        "--num-workers", "0", *TARGETS, "--lora-r", "4", "--lora-alpha", "8"]
MOCK = ARGV + ["--mock-data"]
PLAIN = ARGV[:ARGV.index(TARGETS[0])] + ["--mock-data"]  # no LoRA


def _trainer(argv: List[str]):
    from mindspeed_llm.training.training import setup

    return setup(argv)


def _steps(trainer, count: int) -> List[float]:
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(count)]


def test_an_adapted_linear_is_base_plus_scaled_low_rank() -> None:
    trainer = _trainer(MOCK + ["--bf16"])
    layer = trainer.model.decoder.layers["0"]
    generator = torch.Generator().manual_seed(0)
    for module in (layer.mlp.linear_fc1, layer.mlp.linear_fc2, layer.self_attention.linear_qkv):
        assert module.lora_A.weight.dtype == torch.float32 and module.weight.dtype == torch.bfloat16
        with torch.no_grad():
            module.lora_B.weight.copy_(torch.randn(module.lora_B.weight.shape, generator=generator))
        x = torch.randn(5, 2, module.weight.shape[1], generator=generator).to(torch.bfloat16)  # [s, b, in]
        expected = (F.linear(x.float(), module.weight.float())
                    + 2.0 * x.float() @ module.lora_A.weight.t() @ module.lora_B.weight.t())  # alpha/r = 8/4
        assert (module(x).float() - expected).abs().max() < 0.05 * expected.abs().max()  # bf16 rounding
        with torch.no_grad():
            module.lora_B.weight.zero_()
        assert torch.equal(module(x), F.linear(x, module.weight))  # B = 0: exactly the base layer


def _model(tp: int, rank: int, lora: LoraConfig):
    args = parse_args(ARGV)
    return build_model(transformer_config_from_args(args), layout_state(tp=tp, tp_rank=rank), torch.device("cpu"),
                       seed=3, meta_hooks=[lambda model: add_lora(model, lora)])


def test_the_adapters_start_as_peft_and_do_not_depend_on_tp() -> None:
    lora = LoraConfig(r=4, alpha=8.0, dropout=0.0, target_modules=("linear_qkv", "linear_proj", "linear_fc1",
                                                                     "linear_fc2"))
    reference = {n: p for n, p in _model(1, 0, lora).named_parameters() if is_adapter(n)}
    assert len(reference) == 16
    for name, param in reference.items():
        if ".lora_B." in name:
            assert torch.equal(param, torch.zeros_like(param))
        else:  # kaiming_uniform_(a=sqrt(5)): uniform in +-1/sqrt(fan_in), std bound/sqrt(3)
            bound = 1.0 / math.sqrt(param.shape[1])
            assert param.abs().max() <= bound and param.std() > 0.8 * bound / math.sqrt(3.0)
    assert not torch.equal(reference["decoder.layers.0.mlp.linear_fc1.lora_A.weight"],
                           reference["decoder.layers.1.mlp.linear_fc1.lora_A.weight"])
    for tp in (2, 4):
        ranks = [dict(_model(tp, r, lora).named_parameters()) for r in range(tp)]
        for name, full in reference.items():
            shard = param_meta(ranks[0][name]).tp_shard
            pieces = [rank[name].detach() for rank in ranks]
            assert torch.equal(shard.unshard(pieces) if shard is not None else pieces[0], full), (tp, name)
    assert param_meta(ranks[0]["decoder.layers.0.self_attention.linear_qkv.lora_A.weight"]).grad_partial_over_tp
    assert param_meta(ranks[0]["decoder.layers.0.mlp.linear_fc2.lora_B.weight"]).grad_partial_over_tp


def test_training_changes_no_base_weight_and_keeps_optimizer_state_for_adapters_only() -> None:
    trainer = _trainer(MOCK + ["--bf16", "--lora-modules-to-save", "word_embeddings"])
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    _steps(trainer, 3)
    adapters = {n: p for n, p in trainer.model.named_parameters() if is_adapter(n)}
    for name, param in trainer.model.named_parameters():
        trained = name in adapters or "word_embeddings" in name
        assert param.requires_grad == trained and hasattr(param, "main_grad") == trained, name
        assert torch.equal(param, before[name]) != trained, name  # frozen: bitwise equal; trained: moved
        assert param.dtype == (torch.float32 if name in adapters else torch.bfloat16), name
    state = trainer.optimizer.optimizer.state
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    moments = sum(s[k].numel() for s in state.values() for k in ("exp_avg", "exp_avg_sq"))
    assert len(state) == len(adapters) + 1 and moments == 2 * trainable


def test_checkpoints_hold_the_adapters_and_lora_load_resumes(tmp_path: Path) -> None:
    from core import checkpointing

    base = _trainer(PLAIN + ["--save", str(tmp_path / "base")])
    base.save()  # iteration 0: the "converted" base model
    base_weights = {n: p.detach().clone() for n, p in base.model.named_parameters()}
    argv = MOCK + ["--lora-dropout", "0.1", "--load", str(tmp_path / "base"), "--finetune"]
    first = _trainer(argv + ["--save", str(tmp_path / "adapters")])
    for name, param in first.model.named_parameters():
        assert is_adapter(name) or torch.equal(param, base_weights[name]), name
    iterator = first.train_iterator()
    first.train_step(iterator)
    path = first.save()
    expected = [first.train_step(iterator).loss for _ in range(2)]
    saved = checkpointing.load_file(path)
    assert set(saved["model"]) == {n for n, _ in first.model.named_parameters() if is_adapter(n)}
    assert saved["lora"] == {"r": 4, "alpha": 8.0, "target_modules": sorted(TARGETS[1:]), "modules_to_save": []}
    resume = [a for a in argv if a != "--finetune"] + ["--lora-load", str(tmp_path / "adapters")]
    resumed = _trainer(resume)
    assert resumed.iteration == 1
    assert _steps(resumed, 2) == expected  # bitwise: adapters, Adam state, schedule and dropout RNG
    # --finetune: the adapters' weights only, iteration 0, a fresh optimizer (the next stage's start)
    restarted = _trainer(argv + ["--lora-load", str(tmp_path / "adapters")])
    assert (restarted.iteration, restarted.consumed_samples) == (0, 0)
    assert not restarted.optimizer.optimizer.state
    restarted_params = dict(restarted.model.named_parameters())
    for name, tensor in saved["model"].items():  # the adapters after step 1
        assert torch.equal(restarted_params[name], tensor), name


def test_recompute_with_lora_dropout_is_exact() -> None:
    argv = MOCK + ["--lora-dropout", "0.2"]
    recompute = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    assert _steps(_trainer(argv + recompute), 3) == _steps(_trainer(argv), 3)


def _fixed_response_dataset(directory: Path, count: int = 16) -> str:
    """Random prompts ending in 2, always the reply 3 4 5 6 7 8 (only the reply is trained)."""
    rng = np.random.RandomState(0)
    rows = []
    for _ in range(count):
        prompt = rng.randint(10, 32, rng.randint(3, 8)).tolist() + [2]  # 2: "assistant:"
        reply = [3, 4, 5, 6, 7, 8]
        ids = (prompt + reply + [0] * 17)[:17]
        labels = ([-100] * len(prompt) + reply + [-100] * 17)[:17]
        rows.append((ids, [1] * 17, labels))
    prefix = str(directory / "fixed")
    write_indexed(prefix, PACKED_FILES, rows)
    return prefix


def test_sft_with_lora_learns_a_fixed_response(tmp_path: Path) -> None:
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.training import setup

    argv = ARGV + ["--stage", "sft", "--is-instruction-dataset", "--data-path", _fixed_response_dataset(tmp_path),
                   "--train-iters", "20", "--lr", "0.05", "--lora-r", "8", "--lora-alpha", "16"]
    trainer = setup(argv, SFTTask)
    losses = _steps(trainer, 20)
    assert losses[-1] < 0.2 * losses[0], losses  # 3.8 -> 0.49 (frozen tied embeddings bound the margin)
    batch = next(trainer.batches(trainer.datasets()[0]))  # from sample 0
    trainer.model.eval()
    with torch.no_grad():
        logits = trainer.model(batch["tokens"], position_ids=batch["position_ids"])  # [b, s, v]
    trained = batch["loss_mask"] > 0
    assert torch.equal(logits.argmax(-1)[trained], batch["labels"][trained])  # greedy: the reply, every token


def test_mla_projections_take_adapters() -> None:
    mla = ["--multi-latent-attention", "--num-query-groups", "4", "--q-lora-rank", "8", "--kv-lora-rank", "8",
           "--qk-head-dim", "4", "--qk-pos-emb-head-dim", "4", "--v-head-dim", "4"]
    trainer = _trainer(MOCK + mla + [TARGETS[0], "linear_q_up_proj", "linear_kv_up_proj", "linear_proj"])
    adapted = {n.rsplit(".lora_", 1)[0].rsplit(".", 1)[-1] for n, _ in trainer.model.named_parameters()
               if is_adapter(n)}
    assert adapted == {"linear_q_up_proj", "linear_kv_up_proj", "linear_proj"}
    losses = _steps(trainer, 3)
    assert losses[2] < losses[0]
    with pytest.raises(Exception, match="linear_kv_down_proj: some of those layers"):
        _trainer(MOCK + mla + [TARGETS[0], "linear_kv_down_proj"])


def _error(argv: List[str], capsys: pytest.CaptureFixture) -> str:
    from mindspeed_llm.training.training import pretrain

    with pytest.raises(SystemExit) as info:
        pretrain(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_bad_lora_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert "--lora-target-modules linear_qkvv: no such linear" in _error(MOCK + [TARGETS[0], "linear_qkvv"], capsys)
    moe = ["--num-experts", "4", "--moe-router-topk", "2"]
    assert "routed MoE experts" in _error(MOCK + moe, capsys)
    no_targets = PLAIN + ["--lora-r", "8"]
    assert "--lora-r needs --lora-target-modules" in _error(no_targets, capsys)
    assert "tied to the word embeddings" in _error(MOCK + ["--lora-modules-to-save", "output_layer"], capsys)
    assert "no adapter checkpoint" in _error(MOCK + ["--lora-load", str(tmp_path)], capsys)
    trainer = _trainer(MOCK + ["--save", str(tmp_path / "r4")])
    trainer.save()
    assert "holds LoRA adapters, not a base model" in _error(MOCK + ["--load", str(tmp_path / "r4")], capsys)
    message = _error(MOCK + ["--lora-r", "8", "--lora-load", str(tmp_path / "r4")], capsys)
    assert "was trained with --lora-r 4, this run has 8" in message
    message = _error(MOCK + ["--lora-target-modules", "linear_qkv", "--lora-load", str(tmp_path / "r4")], capsys)
    assert "was trained with --lora-target-modules linear_fc1 linear_fc2 linear_proj linear_qkv" in message


def test_qlora_under_fsdp_is_one_line(capsys: pytest.CaptureFixture) -> None:
    """LoRA works under FSDP (tests/distributed/test_lora_fsdp.py); QLoRA's NF4 buffers cannot be sharded."""
    for flag in ("--use-torch-fsdp2", "--use-torch-fsdp"):
        message = _error(MOCK + ["--qlora", flag], capsys)
        assert f"--qlora with {flag} is not supported" in message and "drop --qlora" in message


def test_a_reward_models_value_head_trains_under_lora() -> None:
    import dataclasses

    from core.models.gpt_model import build_model
    from core.parallel_state import single_process_state
    from core.tensor_parallel.lora import freeze_base
    from mindspeed_llm.arguments import parse_args, transformer_config_from_args

    config = dataclasses.replace(transformer_config_from_args(parse_args(PLAIN)), value_head=True)
    model = build_model(config, single_process_state(), torch.device("cpu"), seed=1)
    freeze_base(model)
    trainable = [name for name, param in model.named_parameters() if param.requires_grad]
    assert trainable and all(name.startswith("value_head.") for name in trainable), trainable

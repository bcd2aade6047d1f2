"""QLoRA in the trainer (mindspeed_llm/transforms/qlora.py) and DPO's LoRA reference (the base, adapters off).

* A QLoRA step equals a LoRA step on the dequantised base weights (losses, adapters) and stays close to LoRA on
  the original weights; the quantised base takes about 0.52/4 of the targeted weights' fp32 bytes, is no
  parameter, and the optimizer state is the adapters' only.
* --qlora-save-dequantize writes the merged model (dequantised base + adapters) as a plain checkpoint: a model
  without LoRA loaded from it, and transformers after tools/convert_ckpt.py, give the QLoRA model's logits.
* Bad input, one line each: --qlora without targets, --qlora-save-dequantize without --qlora, a norm as target.
* DPO with LoRA (and QLoRA) makes no reference copy, starts at ln 2, and its reference log-probs are the base
  model's: it trains exactly as DPO against --ref-model holding the initial base.

    python -m pytest -q tests/unit/test_qlora.py
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List

import pytest
import torch

from core import checkpointing
from core.quantization.nf4_linear import NF4Tensor
from mindspeed_llm.posttrain import pairwise
from mindspeed_llm.transforms import qlora
from tests.unit.test_lora import MOCK, PLAIN, TARGETS, _error, _steps, _trainer
from tests.unit.test_posttrain_preference import _trainer as _pairwise_trainer
from tests.unit.test_posttrain_preference import pairwise_dataset

QLORA = MOCK + ["--qlora"]


def _nf4_layers(trainer) -> dict:
    return {name: module for name, module in trainer.model.named_modules()
            if isinstance(getattr(module, "weight", None), NF4Tensor)}


def _adapters(trainer) -> dict:
    return {name: param.detach().clone() for name, param in trainer.model.named_parameters() if param.requires_grad}


def test_a_qlora_step_equals_lora_on_the_dequantised_base() -> None:
    quantized = _trainer(QLORA)
    layers = _nf4_layers(quantized)
    assert len(layers) == 8 and all(name.split(".")[-1] in TARGETS for name in layers)  # 2 layers x 4 targets
    on_dequantized, on_original = _trainer(MOCK), _trainer(MOCK)
    with torch.no_grad():
        for name, module in layers.items():
            dense = on_dequantized.model.get_submodule(name).weight
            assert (dense - module.weight.dequantized()).abs().max() > 0  # NF4 moved the weight
            dense.copy_(module.weight.dequantized())
    on_dequantized.dp.reload_model_params()
    losses = [_steps(trainer, 3) for trainer in (quantized, on_dequantized, on_original)]
    assert max(abs(a - b) for a, b in zip(losses[0], losses[1])) <= 1e-6, losses
    ours, theirs = _adapters(quantized), _adapters(on_dequantized)
    assert ours.keys() == theirs.keys() and len(ours) == 16
    assert max((ours[name] - theirs[name]).abs().max().item() for name in ours) <= 1e-5
    assert losses[0][2] < losses[0][0]  # it trains
    assert max(abs(a - b) / b for a, b in zip(losses[0], losses[2])) < 0.05, losses  # NF4 is close to the original


def test_the_quantised_base_is_small_frozen_and_has_no_optimizer_state() -> None:
    quantized, dense = _trainer(QLORA), _trainer(MOCK)
    layers = _nf4_layers(quantized)
    stored = sum(module.weight.nbytes_stored() for module in layers.values())
    original = sum(dense.model.get_submodule(name).weight.numel() * 4 for name in layers)  # fp32
    assert stored < 0.135 * original  # ~0.516 bytes per weight instead of 4
    assert qlora.base_weight_bytes(quantized.models) == qlora.base_weight_bytes(dense.models) - original + stored
    names = {name for name, _ in quantized.model.named_parameters()}
    assert not any(f"{name}.weight" in names for name in layers)  # not parameters: no buffer, state or ckpt entry
    _steps(quantized, 1)
    _steps(dense, 1)
    state_bytes = lambda t: sum(v.numel() for s in t.optimizer.optimizer.state.values()  # noqa: E731
                                for k, v in s.items() if k != "step")
    assert state_bytes(quantized) == state_bytes(dense) > 0  # Adam's moments of the adapters only


def test_qlora_save_dequantize_writes_the_merged_model(tmp_path: Path) -> None:
    save = str(tmp_path / "merged")
    trainer = _trainer(QLORA + ["--qlora-save-dequantize", "--save", save])
    _steps(trainer, 2)  # B moves off zero
    trainer.save()
    path, _, _ = checkpointing.find_checkpoint(save, 0, 0, 1)
    checkpoint = checkpointing.load_file(path)
    assert "lora" not in checkpoint and checkpoint["optimizer"] is None
    assert not any(".lora_" in key for key in checkpoint["model"])
    plain = _trainer(PLAIN + ["--load", save, "--finetune"])
    tokens = torch.randint(0, 32, (2, 16), generator=torch.Generator().manual_seed(1))
    trainer.model.eval()
    plain.model.eval()
    with torch.no_grad():
        ours, merged = trainer.model(tokens), plain.model(tokens)  # [b, s, v]
    base = _trainer(PLAIN)  # the unmerged base: the adapters do change the logits
    with torch.no_grad():
        assert (base.model.eval()(tokens) - ours).abs().max() > 1e-3
    assert (ours - merged).abs().max() <= 1e-5
    import transformers

    from tools.convert_ckpt import main as convert_main

    hf_dir = str(tmp_path / "hf")  # the converter takes it as any checkpoint: transformers gives the same logits
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", save,
                         "--save-dir", hf_dir]) == 0
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        assert (hf(tokens).logits - ours).abs().max() <= 1e-5


def test_bad_qlora_input_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert "--qlora has no effect without --lora-target-modules" in _error(PLAIN + ["--qlora"], capsys)
    message = _error(MOCK + ["--qlora-save-dequantize"], capsys)
    assert "--qlora-save-dequantize has no effect without --qlora" in message
    message = _error(QLORA + ["--lora-target-modules", "linear_qkv", "input_layernorm"], capsys)
    assert "--qlora stores linear layers only, but 'input_layernorm' is a" in message


# ------------------------------------------------------------------------------------ DPO's LoRA reference

LORA = [*TARGETS, "--lora-r", "4", "--lora-alpha", "8"]


def test_adapters_disabled_gives_the_base_layer_and_restores_them() -> None:
    from core.tensor_parallel.lora import adapters_disabled

    trainer = _trainer(MOCK)
    layer = trainer.model.decoder.layers["0"]
    x = torch.randn(3, 2, 16, generator=torch.Generator().manual_seed(0))  # [s, b, h]
    with torch.no_grad():
        for module in (layer.self_attention.linear_qkv, layer.mlp.linear_fc2):
            module.lora_B.weight.normal_()
    fc1 = layer.mlp.linear_fc1
    with torch.no_grad():
        fc1.lora_B.weight.normal_()
        adapted = fc1(x)
        with adapters_disabled(trainer.model):
            assert torch.equal(fc1(x), torch.nn.functional.linear(x, fc1.weight))
        assert torch.equal(fc1(x), adapted) and not torch.equal(adapted, torch.nn.functional.linear(x, fc1.weight))
        tokens = torch.randint(0, 32, (2, 16), generator=torch.Generator().manual_seed(1))
        with adapters_disabled(trainer.model):
            base_logits = trainer.model(tokens)
    plain = _trainer(PLAIN)  # the same base weights (same seed), no adapters
    with torch.no_grad():
        assert torch.equal(base_logits, plain.model(tokens))


def test_dpo_with_lora_uses_the_base_as_reference_without_a_copy(tmp_path: Path, monkeypatch) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    extra = ["--optimizer", "adam", "--lr", "0.01", "--train-iters", "4"]
    base = _pairwise_trainer("dpo", prefix, *extra)  # no LoRA: the same base weights (same seed)
    base.args.save = str(tmp_path / "base")
    base.save()
    against_checkpoint = [s.stats for s in _steps_of(_pairwise_trainer(
        "dpo", prefix, *extra, *LORA, "--ref-model", str(tmp_path / "base")), 4)]
    monkeypatch.setattr(pairwise, "build_reference", _no_copy)
    for flags in ([], ["--precompute-ref-log-probs"], ["--qlora"]):
        trainer = _pairwise_trainer("dpo", prefix, *extra, *LORA, *flags)
        if not flags:
            assert all(trainer.task.references[id(model)] is model for model in trainer.models)
        stats = [s.stats for s in _steps_of(trainer, 4)]
        assert abs(stats[0]["lm loss"] - math.log(2)) < 1e-6, flags
        if flags == ["--qlora"]:
            assert stats[3]["rewards/margins"] != 0
            continue
        for a, b in zip(stats, against_checkpoint):
            assert all(abs(a[name] - b[name]) <= 1e-5 * max(1.0, abs(b[name])) for name in b), (flags, a, b)
    assert against_checkpoint[3]["rewards/margins"] > against_checkpoint[0]["rewards/margins"]


def _no_copy(*args, **kwargs):
    raise AssertionError("DPO with LoRA built a reference copy")


def _steps_of(trainer, count: int) -> List:
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator) for _ in range(count)]


def test_dpo_with_lora_modules_to_save_needs_a_reference(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tests.unit.test_posttrain_preference import ARGV

    prefix, _ = pairwise_dataset(tmp_path)
    argv = ARGV + ["--stage", "dpo", "--data-path", prefix, *LORA, "--lora-modules-to-save", "word_embeddings"]
    from tests.unit.test_posttrain_sft import _error as posttrain_error

    assert "pass --ref-model DIR (the initial model) or --precompute-ref-log-probs" in posttrain_error(argv, capsys)

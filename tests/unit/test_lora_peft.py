"""LoRA adapters exchanged with PEFT: tools/convert_ckpt.py --lora-load [--save-lora-to-hf] and
--lora-load of a PEFT directory (mindspeed_llm/transforms/peft_format.py).

A tiny random HF Llama (GQA) is converted to mg at TP 1 as the base; a LoRA run on it gets random nonzero
adapters on every linear and saves them. Then, in fp32:

* the PEFT export (``--save-lora-to-hf``) loaded by ``peft`` onto the HF model gives our logits (1e-5);
* the merged export (``--lora-load`` alone), loaded by ``transformers``, gives our logits too, and merged into
  an mg checkpoint (``--save-model-type mg``) it loads as a plain base with the same logits;
* a PEFT adapter made by ``peft`` (random nonzero B, q/k/v and gate/up sharing A) loads through ``--lora-load``
  and gives PEFT's logits; the exported adapter loads back to the very same tensors;
* PEFT's usual adapter (its own A per projection) loads in the block form (rank 3r on linear_qkv, 2r on
  linear_fc1) with PEFT's logits, and its checkpoint merges, exports (rank_pattern) and resumes exactly;
* at TP 2 (one key/value group per rank) PEFT's adapter loads with PEFT's logits, and the TP-2 adapter
  checkpoint merges into the TP-1 base and exports to PEFT exactly; at PP 2 each stage loads its layers'
  adapters and the two stages' files merge exactly; under FSDP2 (DP 2) it loads into the shards and its
  checkpoint merges exactly; Qwen2 (q/k/v biases) exchanges too;
* a PEFT adapter of another rank / alpha / targets, or a rank_pattern changing the scaling, is refused in
  one line.

    python -m pytest -q tests/unit/test_lora_peft.py
"""
from __future__ import annotations

import json
import os
from typing import Dict, List

import pytest
import torch
import transformers

from core.tensor_parallel.lora import is_adapter
from tools.convert_ckpt import main as convert_main

peft = pytest.importorskip("peft")

HF = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          vocab_size=64, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0)
HF_TARGETS = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
LORA = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "4",
        "--lora-alpha", "8"]
TRAINING = ["--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "1",
            "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu",
            "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
            "--finetune", "--use-checkpoint-args"]
TOKENS = torch.tensor([[1, 5, 9, 33, 2, 60, 7, 7, 12, 40], [3, 3, 8, 61, 0, 17, 22, 5, 9, 1]])


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> Dict[str, str]:
    root = tmp_path_factory.mktemp("lora_peft")
    hf_dir, mg_dir = str(root / "hf"), str(root / "mg")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF, dtype="float32")).save_pretrained(hf_dir)
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", mg_dir]) == 0
    return {"root": str(root), "hf": hf_dir, "mg": mg_dir}


def _trainer(dirs: Dict[str, str], *extra: str):
    from mindspeed_llm.training.training import setup

    return setup(TRAINING + ["--load", dirs["mg"]] + LORA + list(extra))


def _our_logits(trainer) -> torch.Tensor:
    model = trainer.model.eval()
    with torch.no_grad():
        return model(TOKENS).float()  # [b, s, v]


def _hf_logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(input_ids=TOKENS).logits.float()


def _hf_model(path: str) -> torch.nn.Module:
    return transformers.LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)


def _convert(dirs: Dict[str, str], adapters: str, out: str, *extra: str) -> int:
    return convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", dirs["mg"],
                         "--lora-load", adapters, "--save-dir", out, *extra])


@pytest.fixture(scope="module")
def trained(dirs: Dict[str, str]) -> Dict[str, object]:
    """A LoRA run whose adapters are random and nonzero (B too), saved; its logits."""
    save = os.path.join(dirs["root"], "adapters")
    trainer = _trainer(dirs, "--save", save)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in trainer.model.named_parameters():
            if is_adapter(name):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    trainer.save()
    return {"dir": save, "logits": _our_logits(trainer),
            "adapters": {n: p.detach().clone() for n, p in trainer.model.named_parameters() if is_adapter(n)}}


def test_exported_peft_adapter_gives_our_logits_in_peft(dirs, trained) -> None:
    out = os.path.join(dirs["root"], "peft_export")
    assert _convert(dirs, trained["dir"], out, "--save-lora-to-hf") == 0
    config = json.load(open(os.path.join(out, "adapter_config.json")))
    assert (config["r"], config["lora_alpha"], sorted(config["target_modules"])) == (4, 8.0, HF_TARGETS)
    model = peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), out)
    loaded = {n for n, _ in model.named_parameters() if "lora_" in n}
    assert len(loaded) == 2 * 7 * HF["num_hidden_layers"]  # every projection's A and B
    base = _hf_logits(_hf_model(dirs["hf"]))
    theirs, ours = _hf_logits(model), trained["logits"]
    assert (theirs - base).abs().max() > 1e-2  # the adapters change the logits
    assert (theirs - ours).abs().max() <= 1e-5


def test_merged_export_equals_base_plus_adapters(dirs, trained) -> None:
    out = os.path.join(dirs["root"], "merged")
    assert _convert(dirs, trained["dir"], out) == 0
    assert not os.path.exists(os.path.join(out, "adapter_config.json"))
    merged = _hf_logits(_hf_model(out))
    assert (merged - trained["logits"]).abs().max() <= 1e-5


def test_merged_into_an_mg_checkpoint_trains_on_as_a_plain_base(dirs, trained, capsys) -> None:
    """--save-model-type mg merges the adapters into a sharded checkpoint: the next stage's base (no adapters)."""
    from mindspeed_llm.training.training import setup

    out = os.path.join(dirs["root"], "merged_mg")
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "mg", "--load-dir", dirs["mg"],
                         "--lora-load", trained["dir"], "--save-dir", out]) == 0
    merged = setup(TRAINING + ["--load", out])
    assert not any(is_adapter(name) for name, _ in merged.model.named_parameters())
    assert (_our_logits(merged) - trained["logits"]).abs().max() <= 1e-5
    capsys.readouterr()
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "mg", "--load-dir", dirs["mg"],
                         "--lora-load", trained["dir"], "--save-dir", out + "_peft", "--save-lora-to-hf"]) == 2
    assert "--save-lora-to-hf writes PEFT's adapter files; pass --save-model-type hf" in capsys.readouterr().err


def test_merged_export_takes_the_modules_to_save_and_peft_export_refuses_them(dirs, capsys) -> None:
    save = os.path.join(dirs["root"], "adapters_embeddings")
    trainer = _trainer(dirs, "--save", save, "--lora-modules-to-save", "word_embeddings")
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, param in trainer.model.named_parameters():
            if param.requires_grad:
                param.add_(torch.randn(param.shape, generator=generator) * 0.2)
    trainer.save()
    merged = os.path.join(dirs["root"], "merged_embeddings")
    assert _convert(dirs, save, merged) == 0
    assert (_hf_logits(_hf_model(merged)) - _our_logits(trainer)).abs().max() <= 1e-5
    capsys.readouterr()
    assert _convert(dirs, save, os.path.join(dirs["root"], "never_peft"), "--save-lora-to-hf") == 2
    assert "also trained word_embeddings (--lora-modules-to-save)" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(dirs["root"], "never_peft"))


def _peft_made(dirs: Dict[str, str], name: str, r: int = 4, alpha: int = 8, targets: List[str] = HF_TARGETS,
               share_a: bool = True, **extra) -> str:
    """A PEFT adapter made by peft on the HF model: random nonzero B (and, if asked, q/k/v and gate/up
    sharing one A, as our fused layers do)."""
    torch.manual_seed(5)
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, **extra)
    model = peft.get_peft_model(_hf_model(dirs["hf"]), config)
    layers = model.base_model.model.model.layers
    with torch.no_grad():
        for layer in layers:
            for projection in [*layer.self_attn.children(), *layer.mlp.children()]:
                if hasattr(projection, "lora_B"):
                    projection.lora_B["default"].weight.normal_(0.0, 0.2)
            if share_a:
                attention, mlp = layer.self_attn, layer.mlp
                for fused in ((attention.q_proj, attention.k_proj, attention.v_proj), (mlp.gate_proj, mlp.up_proj)):
                    for other in fused[1:] if hasattr(fused[0], "lora_A") else ():
                        other.lora_A["default"].weight.copy_(fused[0].lora_A["default"].weight)
    path = os.path.join(dirs["root"], name)
    model.save_pretrained(path)
    return path


def test_peft_adapter_loads_through_lora_load_with_peft_logits(dirs, trained) -> None:
    path = _peft_made(dirs, "peft_made")
    expected = _hf_logits(peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), path))
    trainer = _trainer(dirs, "--lora-load", path)
    assert trainer.iteration == 0
    assert (_our_logits(trainer) - expected).abs().max() <= 1e-5
    # our own export loads back to the very same adapters
    exported = os.path.join(dirs["root"], "peft_export_again")
    assert _convert(dirs, trained["dir"], exported, "--save-lora-to-hf") == 0
    again = _trainer(dirs, "--lora-load", exported)
    for name, param in again.model.named_parameters():
        if is_adapter(name):
            assert torch.equal(param, trained["adapters"][name]), name


def test_peft_adapter_with_own_a_per_projection_loads_in_block_form(dirs) -> None:
    """PEFT's usual adapter (each of q/k/v, gate/up its own A) fuses exactly as A = [A_q; A_k; A_v] (rank 3r)
    and a block-diagonal B; saved, it merges and exports back (rank_pattern) with PEFT's logits."""
    path = _peft_made(dirs, "peft_own_a", share_a=False)
    expected = _hf_logits(peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), path))
    save = os.path.join(dirs["root"], "block_adapters")
    trainer = _trainer(dirs, "--lora-load", path, "--save", save)
    assert trainer.transforms[0].config.module_ranks == (("linear_fc1", 8), ("linear_qkv", 12))
    shapes = {n: tuple(p.shape) for n, p in trainer.model.named_parameters() if is_adapter(n)}
    assert shapes["decoder.layers.0.self_attention.linear_qkv.lora_A.weight"] == (12, 32)
    assert shapes["decoder.layers.0.self_attention.linear_proj.lora_A.weight"] == (4, 32)
    assert (_our_logits(trainer) - expected).abs().max() <= 1e-5
    trainer.save()
    merged, exported = os.path.join(dirs["root"], "block_merged"), os.path.join(dirs["root"], "block_peft")
    assert _convert(dirs, save, merged) == 0 and _convert(dirs, save, exported, "--save-lora-to-hf") == 0
    assert (_hf_logits(_hf_model(merged)) - expected).abs().max() <= 1e-5
    assert json.load(open(os.path.join(exported, "adapter_config.json")))["rank_pattern"] == {
        "q_proj": 12, "k_proj": 12, "v_proj": 12, "gate_proj": 8, "up_proj": 8}
    again = _hf_logits(peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), exported))
    assert (again - expected).abs().max() <= 1e-5
    resumed = _trainer(dirs, "--lora-load", save)  # our own checkpoint of the block form resumes
    assert (_our_logits(resumed) - expected).abs().max() <= 1e-5


def parallel_worker(rank: int, world_size: int, root: str, peft_dir: str) -> Dict[str, torch.Tensor]:
    """TP 2 (logits, then its adapters saved), PP 2 (its two stages' adapters saved) and FSDP2 at DP 2 on the
    TP-1 base (logits, adapters saved), one launch."""
    from core.models.gpt_model import gather_logits
    from mindspeed_llm.training.training import setup

    layouts = {"tp2": ["--tensor-model-parallel-size", "2"], "pp2": ["--pipeline-model-parallel-size", "2"],
               "fsdp2": ["--use-torch-fsdp2", "--micro-batch-size", "1"]}  # DP 2: one sample per rank
    logits = {}
    for name, layout in layouts.items():
        base = os.path.join(root, "mg" if name == "fsdp2" else f"mg_{name}")
        trainer = setup(TRAINING + ["--load", base, "--lora-load", peft_dir,
                                    "--save", os.path.join(root, f"adapters_{name}")] + LORA + layout)
        trainer.save()
        if name != "pp2":
            model = trainer.model.eval()
            with torch.no_grad():
                logits[name] = gather_logits(model(TOKENS), model).float()
    return logits


def test_tp2_and_pp2_load_peft_and_their_checkpoints_export_exactly(dirs) -> None:
    """At TP 2 (GQA: one key/value group per rank) a PEFT adapter with its own A per projection loads with
    PEFT's logits; at PP 2 each stage takes its layers' adapters; under FSDP2 at DP 2 the adapters load into the
    shards with PEFT's logits. Each adapter checkpoint (two TP files, two stage files, FSDP2's one) merges into the
    TP-1 base with PEFT's logits; the TP-2 one exports to PEFT exactly."""
    from core.launcher import run_distributed

    path = _peft_made(dirs, "peft_own_a_parallel", share_a=False)
    expected = _hf_logits(peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), path))
    for name, flag in (("tp2", "--target-tensor-parallel-size"), ("pp2", "--target-pipeline-parallel-size")):
        assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", dirs["hf"],
                             "--save-dir", os.path.join(dirs["root"], f"mg_{name}"), flag, "2"]) == 0
    logits = run_distributed(2, parallel_worker, dirs["root"], path)
    assert all((rank[name] - expected).abs().max() <= 1e-5 for rank in logits for name in ("tp2", "fsdp2"))
    for name in ("tp2", "pp2", "fsdp2"):
        merged = os.path.join(dirs["root"], f"{name}_merged")
        assert _convert(dirs, os.path.join(dirs["root"], f"adapters_{name}"), merged) == 0
        assert (_hf_logits(_hf_model(merged)) - expected).abs().max() <= 1e-5, name
    exported = os.path.join(dirs["root"], "tp2_peft")
    assert _convert(dirs, os.path.join(dirs["root"], "adapters_tp2"), exported, "--save-lora-to-hf") == 0
    assert (_hf_logits(peft.PeftModel.from_pretrained(_hf_model(dirs["hf"]), exported)) - expected).abs().max() <= 1e-5


def test_qwen2_with_qkv_bias_exchanges_adapters_with_peft(tmp_path) -> None:
    """Qwen2 (q/k/v biases, which the adapters leave alone): PEFT's adapter loads with PEFT's logits and our
    export of it gives them again in PEFT."""
    hf_dir, mg_dir = str(tmp_path / "hf"), str(tmp_path / "mg")
    torch.manual_seed(0)
    config = transformers.Qwen2Config(**HF, dtype="float32")
    transformers.Qwen2ForCausalLM(config).save_pretrained(hf_dir)
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", mg_dir]) == 0
    qwen = {"root": str(tmp_path), "hf": hf_dir, "mg": mg_dir}
    base = lambda: transformers.Qwen2ForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)  # noqa: E731
    torch.manual_seed(5)
    model = peft.get_peft_model(base(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=HF_TARGETS))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.2)
    path = str(tmp_path / "peft")
    model.save_pretrained(path)
    expected = _hf_logits(peft.PeftModel.from_pretrained(base(), path))
    save = str(tmp_path / "adapters")
    trainer = _trainer(qwen, "--lora-load", path, "--save", save)
    assert "decoder.layers.0.self_attention.linear_qkv.bias" in dict(trainer.model.named_parameters())
    assert (_our_logits(trainer) - expected).abs().max() <= 1e-5
    trainer.save()
    exported = str(tmp_path / "exported")
    assert _convert(qwen, save, exported, "--save-lora-to-hf") == 0
    assert (_hf_logits(peft.PeftModel.from_pretrained(base(), exported)) - expected).abs().max() <= 1e-5


def _error(argv: List[str], capsys: pytest.CaptureFixture) -> str:
    from mindspeed_llm.training.training import pretrain

    capsys.readouterr()  # drop what building the adapters printed
    with pytest.raises(SystemExit) as info:
        pretrain(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_mismatched_peft_adapters_are_refused_in_one_line(dirs, capsys) -> None:
    base = TRAINING + ["--load", dirs["mg"]] + LORA + ["--lora-load"]
    scaled = _peft_made(dirs, "peft_rank_pattern", share_a=False, rank_pattern={"q_proj": 8})
    assert "q_proj has scaling 8/8 by rank_pattern / alpha_pattern, the others 8/4" in _error(base + [scaled], capsys)
    rank8 = _peft_made(dirs, "peft_r8", r=8, alpha=16)
    assert "is a PEFT adapter with r 8, this run has --lora-r 4; pass the adapter's value" in _error(base + [rank8],
                                                                                                     capsys)
    attention = _peft_made(dirs, "peft_attention", targets=["q_proj", "k_proj", "v_proj", "o_proj"])
    message = _error(base + [attention], capsys)
    assert "target_modules k_proj o_proj q_proj v_proj, this run has --lora-target-modules linear_qkv" in message
    alpha = _peft_made(dirs, "peft_alpha", alpha=16)
    assert "lora_alpha 16, this run has --lora-alpha 8.0" in _error(base + [alpha], capsys)


def test_converter_lora_flags_are_checked_in_one_line(dirs, trained, capsys) -> None:
    def error(argv: List[str]) -> str:
        assert convert_main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    out = os.path.join(dirs["root"], "never")
    assert "--save-lora-to-hf writes the adapters of --lora-load" in error(
        ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", dirs["mg"], "--save-dir", out,
         "--save-lora-to-hf"])
    assert "--lora-load merges adapters into an mg base; pass --load-model-type mg" in error(
        ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", dirs["hf"], "--save-dir", out,
         "--lora-load", trained["dir"]])
    assert "holds no LoRA adapters" in error(
        ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", dirs["mg"], "--save-dir", out,
         "--lora-load", dirs["mg"]])
    assert not os.path.exists(out)


def test_non_finite_adapters_are_refused(dirs, trained, capsys) -> None:
    """Adapters holding NaN (a diverged LoRA run) are not exported, merged or as PEFT files."""
    import glob
    import shutil

    adapters = shutil.copytree(trained["dir"], os.path.join(dirs["root"], "adapters_nan"))
    (file,) = glob.glob(os.path.join(adapters, "iter_*", "mp_rank_00", "model_optim_rng.pt"))
    state = torch.load(file, weights_only=False)
    name = next(n for n in state["model"] if n.endswith("linear_fc2.lora_B.weight"))
    state["model"][name][0, 0] = float("nan")
    torch.save(state, file)
    for extra, fragment in (((), "merged with its --lora-load adapters"),
                            (("--save-lora-to-hf",), f"of --lora-load {adapters} holds 1 NaN/Inf")):
        out = os.path.join(dirs["root"], "nan_out")
        assert _convert(dirs, adapters, out, *extra) == 2
        line = next(line for line in capsys.readouterr().err.splitlines() if "convert_ckpt: error" in line)
        assert fragment in line and "--allow-non-finite" in line, line
        assert not os.path.exists(out)

"""Checkpoints of Megatron-LM and MindSpeed-LLM (``--load-model-type megatron`` / ``--save-model-type megatron``).

The Megatron checkpoints here are written by this test's own writer, as Megatron
writes them: ``iter_0000010/mp_rank_TT_PPP/model_optim_rng.pt`` with ``model``
(layers numbered within the stage, ``linear_qkv`` rows interleaved per query
group by an explicit loop over groups and heads, each TP rank a contiguous run of
groups; norms fused into ``linear_qkv`` / ``linear_fc1`` as ``layer_norm_weight``
with Transformer Engine, plus ``_extra_state``), ``args`` in Megatron's names,
``rng_state`` with numpy states, an enum in ``args``, padded vocabulary rows.

* the permutation pair of ``mindspeed_llm/models/qkv_layout.py`` equals the loop;
* Megatron TP2 PP2 -> HF gives the original HF tensors and transformers' logits;
* Megatron -> mg -> Megatron reproduces the files; HF -> Megatron equals the writer's
  files and -> HF is exact; a model trained from Megatron -> mg gives the loss of
  the same model converted from HF;
* a checkpoint without ``args`` or with MoE / MLA settings, and a target Megatron
  cannot hold, are one-line errors naming the key.

    python -m pytest tests/unit/test_convert_megatron.py -q
"""
from __future__ import annotations

import argparse
import enum
import os
import random
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch
import transformers

from core.checkpointing import CHECKPOINT_FILENAME, TRACKER_FILENAME, checkpoint_file, load_file, map_foreign_file
from mindspeed_llm.models.qkv_layout import interleaved_to_ours, ours_to_interleaved
from tests.models.test_zoo_training import TRAINING, one_step
from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_errors import expect_error
from tools.convert_ckpt import main as convert_main

BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
            max_position_embeddings=256)
CASES = {  # name -> (config class, model class, overrides, --model-type-hf: Megatron records no family)
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(vocab_size=101), "llama2"),
    "qwen2_tied": ("Qwen2Config", "Qwen2ForCausalLM", dict(vocab_size=100, tie_word_embeddings=True), "qwen"),
}
# Megatron pads the vocabulary to a multiple of 16 x TP. Each TP rank holds two query groups: with one group
# a rank the interleaved rows of a rank would equal ours ([its Q; its K; its V]) and prove nothing.
DIVISIBLE_BY, TP, PP = 16, 2, 2


class AttnBackend(enum.Enum):
    """Stands for the enums recent Megatron-LM keeps in ``args`` (a class the converter cannot import)."""

    auto = 5


def convert(load: str, save: str, load_dir: str, save_dir: str, *flags: str) -> None:
    assert convert_main(["--load-model-type", load, "--save-model-type", save, "--load-dir", load_dir,
                         "--save-dir", save_dir, *flags]) == 0


# --------------------------------------------------------------------------- an independent Megatron writer


def interleave_by_loop(full: torch.Tensor, heads: int, groups: int, head_dim: int) -> torch.Tensor:
    """[Q; K; V] rows -> Megatron's rows: per group, its query heads, its key head, its value head."""
    def head(block_start: int, index: int) -> torch.Tensor:
        return full[block_start + index * head_dim: block_start + (index + 1) * head_dim]

    rows = []
    for group in range(groups):
        for j in range(heads // groups):
            rows.append(head(0, group * (heads // groups) + j))
        rows.append(head(heads * head_dim, group))
        rows.append(head((heads + groups) * head_dim, group))
    return torch.cat(rows)


def megatron_pieces(name: str, full: torch.Tensor, config: Dict[str, Any], tp: int) -> List[torch.Tensor]:
    """Each TP rank's tensor, as Megatron's layers split it."""
    if name.endswith(("linear_qkv.weight", "linear_qkv.bias")):
        rows = interleave_by_loop(full, config["num_attention_heads"], config["num_query_groups"],
                                  config["kv_channels"])
        return [piece.clone() for piece in rows.chunk(tp)]
    if name.endswith(("linear_fc1.weight", "linear_fc1.bias")):  # gated: each rank [its gate rows; its up rows]
        gate, up = full.chunk(2)
        return [torch.cat([g, u]) for g, u in zip(gate.chunk(tp), up.chunk(tp))]
    if name.endswith(("word_embeddings.weight", "output_layer.weight")):
        return [piece.clone() for piece in full.chunk(tp)]
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return [piece.clone() for piece in full.chunk(tp, dim=1)]
    return [full.clone() for _ in range(tp)]


def megatron_name(name: str, first_layer: int, te: bool) -> str:
    if not name.startswith("decoder.layers."):
        return name
    _, _, layer, rest = name.split(".", 3)
    if te:
        rest = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
                "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight"}.get(rest, rest)
    return f"decoder.layers.{int(layer) - first_layer}.{rest}"


def megatron_args(config: Dict[str, Any], padded_vocab: int, **overrides: Any) -> argparse.Namespace:
    """``args`` as Megatron-LM stores them (its defaults where the model does not care)."""
    values = dict(
        num_layers=config["num_layers"], hidden_size=config["hidden_size"], ffn_hidden_size=config["ffn_hidden_size"],
        num_attention_heads=config["num_attention_heads"], group_query_attention=True,
        num_query_groups=config["num_query_groups"], kv_channels=config["kv_channels"],
        max_position_embeddings=config["max_position_embeddings"], seq_length=128,
        tensor_model_parallel_size=TP, pipeline_model_parallel_size=PP, virtual_pipeline_model_parallel_size=None,
        padded_vocab_size=padded_vocab, vocab_size=None, make_vocab_size_divisible_by=DIVISIBLE_BY,
        normalization="RMSNorm", norm_epsilon=config["norm_epsilon"], swiglu=True, add_bias_linear=False,
        add_qkv_bias=config["add_qkv_bias"], position_embedding_type="rope", rotary_base=config["rotary_base"],
        rotary_percent=1.0, rotary_interleaved=False, use_rope_scaling=False, rope_scaling_factor=8.0,
        untie_embeddings_and_output_weights=config["untie_embeddings_and_output_weights"], apply_layernorm_1p=False,
        qk_layernorm=False, num_experts=None, multi_latent_attention=False, params_dtype=torch.float32, bf16=False,
        fp16=False, hidden_dropout=0.1, attention_dropout=0.1, init_method_std=0.02, transformer_impl="local",
        attention_backend=AttnBackend.auto, iteration=10)
    values.update(overrides)
    return argparse.Namespace(**values)


def write_megatron(root: str, state: Dict[str, torch.Tensor], config: Dict[str, Any], te: bool = False,
                   pad_rows: str = "random", **arg_overrides: Any) -> str:
    """A Megatron-LM TP2 PP2 checkpoint of our full (TP 1) state dict ``state``; returns ``root``."""
    vocab = config["vocab_size"]
    padded = -(-vocab // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    generator = torch.Generator().manual_seed(7)
    full = dict(state)
    for name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        if name in full:  # Megatron's padded rows hold whatever training left there
            extra = full[name].new_zeros(padded - vocab, config["hidden_size"])
            if pad_rows == "random":
                extra = torch.randn(extra.shape, generator=generator)
            full[name] = torch.cat([full[name][:vocab], extra])
    tied = not config["untie_embeddings_and_output_weights"]
    if tied:  # the last stage keeps its own copy of the word embeddings
        full["output_layer.weight"] = full["embedding.word_embeddings.weight"]
    per_stage = config["num_layers"] // PP
    args = megatron_args(config, padded, **arg_overrides)
    for stage in range(PP):
        layers = range(stage * per_stage, (stage + 1) * per_stage)
        names = [n for n in full if (n.startswith("embedding.") and stage == 0)
                 or (n.startswith(("decoder.final_layernorm", "output_layer")) and stage == PP - 1)
                 or (n.startswith("decoder.layers.") and int(n.split(".")[2]) in layers)]
        pieces = {n: megatron_pieces(n, full[n], config, TP) for n in names}
        for rank in range(TP):
            model = {megatron_name(n, layers[0], te): pieces[n][rank] for n in names}
            if te:
                model.update({f"decoder.layers.{i}.{module}._extra_state": torch.zeros(0, dtype=torch.uint8)
                              for i in range(per_stage) for module in ("self_attention.linear_qkv",
                              "self_attention.core_attention", "self_attention.linear_proj", "mlp.linear_fc1",
                              "mlp.linear_fc2")})
            checkpoint = {"model": model, "args": args, "checkpoint_version": 3.0, "iteration": 10,
                          "rng_state": [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                                         "torch_rng_state": torch.get_rng_state()}],
                          "num_floating_point_operations_so_far": 0}
            path = checkpoint_file(root, 10, rank, stage, PP)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save(checkpoint, path)
    with open(os.path.join(root, TRACKER_FILENAME), "w") as tracker:
        tracker.write("10")
    return root


def megatron_files(root: str) -> Dict[Tuple[int, int], Dict[str, Any]]:
    """(tp rank, stage) -> checkpoint, for a Megatron TP2 PP2 checkpoint (release or iteration)."""
    iteration = open(os.path.join(root, TRACKER_FILENAME)).read().strip()
    release = iteration == "release"
    return {(rank, stage): map_foreign_file(checkpoint_file(root, None if release else int(iteration), rank, stage,
                                                            PP, release=release))
            for rank in range(TP) for stage in range(PP)}


# --------------------------------------------------------------------------- fixtures


def make_hf(name: str) -> transformers.PreTrainedModel:
    config_cls, model_cls, overrides, _ = CASES[name]
    config = getattr(transformers, config_cls)(**{**BASE, **overrides}, dtype="float32", attn_implementation="eager")
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Per case: the HF model and directory, our TP1 state dict and config, Megatron checkpoints (local, TE)."""
    root = str(tmp_path_factory.mktemp("megatron"))
    out = {}
    for name in CASES:
        model = make_hf(name)
        hf_dir, mg_dir = os.path.join(root, f"{name}_hf"), os.path.join(root, f"{name}_mg")
        model.save_pretrained(hf_dir)
        convert("hf", "mg", hf_dir, mg_dir)
        ours = load_file(checkpoint_file(mg_dir, None, 0, 0, 1, release=True))
        config = ours["transformer_config"]
        out[name] = dict(model=model, hf_dir=hf_dir, state=ours["model"], config=config, root=root,
                         local=write_megatron(os.path.join(root, f"{name}_megatron"), ours["model"], config),
                         te=write_megatron(os.path.join(root, f"{name}_megatron_te"), ours["model"], config, te=True))
    return out


# --------------------------------------------------------------------------- the permutation


@pytest.mark.parametrize("heads, groups, head_dim", [(4, 2, 3), (4, 4, 2), (6, 1, 2), (8, 4, 5)])
def test_qkv_permutation_equals_the_loop_both_ways(heads: int, groups: int, head_dim: int) -> None:
    rows = (heads + 2 * groups) * head_dim
    for ours in (torch.randn(rows, 7), torch.randn(rows)):  # a weight and a bias
        interleaved = ours_to_interleaved(ours, heads, groups, head_dim)
        assert torch.equal(interleaved, interleave_by_loop(ours, heads, groups, head_dim))
        assert torch.equal(interleaved_to_ours(interleaved, heads, groups, head_dim), ours)
    with pytest.raises(ValueError, match="rows"):
        interleaved_to_ours(torch.randn(rows + 1, 2), heads, groups, head_dim)
    with pytest.raises(ValueError, match="groups"):
        ours_to_interleaved(torch.randn(rows, 2), heads, groups + 1 if heads % (groups + 1) else 5, head_dim)


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("style", ["local", "te"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_megatron_to_hf_matches_transformers(cases, tmp_path, name: str, style: str) -> None:
    case = cases[name]
    out = str(tmp_path / "hf")
    convert("megatron", "hf", case[style], out, "--vocab-size", str(case["config"]["vocab_size"]),
            "--model-type-hf", CASES[name][3])
    original, result = read_safetensors(case["hf_dir"]), read_safetensors(out)
    assert sorted(original) == sorted(result)
    for tensor_name, tensor in original.items():
        assert torch.equal(tensor, result[tensor_name]), tensor_name
    converted = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                                  attn_implementation="eager").eval()
    input_ids = torch.randint(0, case["config"]["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, logits = case["model"](input_ids).logits, converted(input_ids).logits
    assert (logits - expected).abs().max().item() <= 1e-4


@pytest.mark.parametrize("style", ["local", "te"])
def test_megatron_to_mg_to_megatron_reproduces_the_files(cases, tmp_path, style: str) -> None:
    case = cases["qwen2_tied"] if style == "te" else cases["llama"]
    mg, back = str(tmp_path / "mg"), str(tmp_path / "megatron")
    convert("megatron", "mg", case[style], mg, "--target-pipeline-parallel-size", "2")
    impl = ["--transformer-impl", "transformer_engine"] if style == "te" else []
    convert("mg", "megatron", mg, back, "--target-tensor-parallel-size", str(TP), "--target-pipeline-parallel-size",
            str(PP), *impl)
    written, original = megatron_files(back), megatron_files(case[style])
    for key, checkpoint in original.items():
        model, ours = checkpoint["model"], written[key]["model"]
        assert sorted(model) == sorted(ours), key
        for tensor_name, tensor in model.items():
            if not tensor_name.endswith("_extra_state"):
                assert torch.equal(tensor, ours[tensor_name]), (key, tensor_name)
        args = written[key]["args"]
        for field in ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "group_query_attention",
                      "kv_channels", "ffn_hidden_size", "padded_vocab_size", "make_vocab_size_divisible_by",
                      "tensor_model_parallel_size", "pipeline_model_parallel_size", "normalization", "swiglu",
                      "add_bias_linear", "add_qkv_bias", "untie_embeddings_and_output_weights", "position_embedding_type"):
            assert getattr(args, field) == getattr(checkpoint["args"], field), field
        assert args.transformer_impl == ("transformer_engine" if style == "te" else "local")
        assert written[key]["checkpoint_version"] == 3.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_hf_to_megatron_is_megatrons_layout_and_back_is_exact(cases, tmp_path, name: str) -> None:
    case = cases[name]
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    convert("hf", "megatron", case["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--make-vocab-size-divisible-by", str(DIVISIBLE_BY))
    reference = write_megatron(str(tmp_path / "reference"), case["state"], case["config"], pad_rows="zeros")
    written, expected = megatron_files(megatron), megatron_files(reference)
    for key, checkpoint in expected.items():
        assert sorted(written[key]["model"]) == sorted(checkpoint["model"]), key
        for tensor_name, tensor in checkpoint["model"].items():
            assert torch.equal(tensor, written[key]["model"][tensor_name]), (key, tensor_name)
    convert("megatron", "hf", megatron, back)  # the real vocabulary is in the args we wrote
    original, result = read_safetensors(case["hf_dir"]), read_safetensors(back)
    assert sorted(original) == sorted(result)
    for tensor_name, tensor in original.items():
        assert torch.equal(tensor, result[tensor_name]), tensor_name


def test_training_from_a_converted_megatron_checkpoint(cases, tmp_path) -> None:
    """One step of pretraining (``--load --use-checkpoint-args``) from Megatron -> mg gives the loss and
    gradients of the same model converted from HF."""
    case = cases["llama"]
    from_megatron, from_hf = str(tmp_path / "from_megatron"), str(tmp_path / "from_hf")
    convert("megatron", "mg", case["te"], from_megatron, "--vocab-size", str(case["config"]["vocab_size"]))
    convert("hf", "mg", case["hf_dir"], from_hf, "--make-vocab-size-divisible-by", str(DIVISIBLE_BY))
    result, reference = one_step(TRAINING + ["--load", from_megatron]), one_step(TRAINING + ["--load", from_hf])
    assert result["loss"] == pytest.approx(reference["loss"], rel=1e-6)
    for name, grad in reference["grads"].items():
        torch.testing.assert_close(result["grads"][name], grad, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------- errors


def test_error_checkpoint_without_args(capsys, cases, tmp_path) -> None:
    case = cases["llama"]
    root = str(tmp_path / "no_args")
    write_megatron(root, case["state"], case["config"])
    for rank in range(TP):
        for stage in range(PP):
            path = checkpoint_file(root, 10, rank, stage, PP)
            checkpoint = torch.load(path, weights_only=False)
            del checkpoint["args"]
            torch.save(checkpoint, path)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out")], CHECKPOINT_FILENAME, "no 'args'")


@pytest.mark.parametrize("setting, key", [(dict(num_experts=8), "args.num_experts"),
                                          (dict(multi_latent_attention=True), "args.multi_latent_attention"),
                                          (dict(position_embedding_type="learned_absolute"),
                                           "args.position_embedding_type")])
def test_error_unsupported_megatron_setting(capsys, cases, tmp_path, setting: Dict[str, Any], key: str) -> None:
    case = cases["llama"]
    root = write_megatron(str(tmp_path / "unsupported"), case["state"], case["config"], **setting)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "mg", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out")], key, "not supported")


def test_error_vocab_size_that_does_not_pad_to_the_checkpoints(capsys, cases, tmp_path) -> None:
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir",
                          cases["llama"]["local"], "--save-dir", str(tmp_path / "out"), "--vocab-size", "20"],
                 "--vocab-size 20", "padded_vocab_size")


def test_error_target_megatron_cannot_hold(capsys, cases, tmp_path) -> None:
    hf_dir = cases["llama"]["hf_dir"]
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir", hf_dir,
                          "--save-dir", str(tmp_path / "out"), "--target-tensor-parallel-size", "8"],
                 "--target-tensor-parallel-size 8", "key/value groups")
    gemma2 = transformers.Gemma2ForCausalLM(transformers.Gemma2Config(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16, vocab_size=64, dtype="float32"))
    gemma2_dir = str(tmp_path / "gemma2")
    gemma2.save_pretrained(gemma2_dir)
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir", gemma2_dir,
                          "--save-dir", str(tmp_path / "out")], "post_norm", "cannot express")
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                          "--save-dir", str(tmp_path / "out"), "--transformer-impl", "local"], "--transformer-impl")


def test_error_format_mixed_up(capsys, cases, tmp_path) -> None:
    """Their checkpoint read as ours, or ours as theirs, would permute linear_qkv wrongly: refused."""
    case = cases["llama"]
    expect_error(capsys, ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", case["local"],
                          "--save-dir", str(tmp_path / "out")], "no transformer_config", "--load-model-type megatron")
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir",
                          os.path.join(case["root"], "llama_mg"), "--save-dir", str(tmp_path / "out")],
                 "transformer_config", "--load-model-type mg")


def test_error_distributed_checkpoint_format(capsys, tmp_path) -> None:
    root = tmp_path / "torch_dist"
    (root / "iter_0000010").mkdir(parents=True)
    for name in ("__0_0.distcp", "__1_0.distcp", "common.pt", "metadata.json"):
        (root / "iter_0000010" / name).write_bytes(b"")
    (root / TRACKER_FILENAME).write_text("10")
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", str(root),
                          "--save-dir", str(tmp_path / "out")], "torch_dist", "--ckpt-format torch")


def test_training_refuses_an_unconverted_megatron_checkpoint(cases) -> None:
    """At PP 1 their names and shapes are ours: loading one unconverted would scramble linear_qkv silently."""
    from core.checkpointing import CheckpointError
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.runtime import check_saved_settings

    config = TransformerConfig.from_dict(cases["llama"]["config"])
    with pytest.raises(CheckpointError, match="--load-model-type megatron"):
        check_saved_settings(None, config, "iter_0000010/mp_rank_00/model_optim_rng.pt")


def test_error_legacy_model(capsys, tmp_path) -> None:
    """A legacy (non-mcore) Megatron model nests its weights under language_model: refused, named."""
    root = str(tmp_path / "legacy")
    path = checkpoint_file(root, 10, 0, 0, 1)
    os.makedirs(os.path.dirname(path))
    args = argparse.Namespace(num_layers=2, hidden_size=32, num_attention_heads=4, padded_vocab_size=64,
                              ffn_hidden_size=64, tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              position_embedding_type="rope", normalization="RMSNorm", swiglu=True)
    torch.save({"model": {"language_model": {"embedding": {"word_embeddings": {"weight": torch.zeros(64, 32)}}}},
                "args": args, "checkpoint_version": 3.0, "iteration": 10}, path)
    with open(os.path.join(root, TRACKER_FILENAME), "w") as tracker:
        tracker.write("10")
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out")], "legacy (non-mcore)", "language_model")

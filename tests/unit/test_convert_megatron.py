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
  cannot hold, are one-line errors naming the key;
* hybrid models (a tiny Nemotron-H: Mamba2, attention and squared-ReLU MLP layers): HF -> ours ->
  Megatron TP2 PP2 (TE and local) gives the files Megatron's rules give, written here from the HF names
  (layer names of Megatron-core's hybrid specs, ``in_proj`` rows ``[z; x; B; C; dt]`` per TP rank,
  ``decoder.final_norm``, TE ``_extra_state`` per layer kind, ``|`` stage segments) and -> ours -> HF
  is exact; Megatron-core 0.19's ``conv1d_weight`` names read; the args round trip, older patterns
  (ratios) and refusals (Kimi Delta Attention, MTP, Mamba biases, Mamba1, groups below TP);
* gated DeltaNet models: ``tests/unit/test_convert_megatron_gdn.py``.

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


@pytest.mark.parametrize("setting, key", [(dict(post_norm=True), "args.post_norm"),
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


# --------------------------------------------------------------------------- hybrid (Mamba) models: Nemotron-H

# Every stage of the TP2 PP2 split holds one layer of each kind: 'M*-' and 'M-*'. Mamba2: 8 heads of 16 (d_inner
# 128 = 2 x hidden, Megatron's default width) in 2 groups of state 8, so each TP rank holds 4 heads and 1 group;
# attention: 8 heads in 4 groups (two groups a rank, see TP above); squared-ReLU MLP without a gate.
HYBRID_PATTERN = "M*-M-*"
HYBRID_HF = dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4, head_dim=8,
                 mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=8, chunk_size=5, conv_kernel=4,
                 vocab_size=101, max_position_embeddings=256, time_step_limit=(0.001, float("inf")),
                 layers_block_type=[{"M": "mamba", "*": "attention", "-": "mlp"}[c] for c in HYBRID_PATTERN])
D_INNER, GROUP_STATE, MAMBA_HEADS = 128, 2 * 8, 8
# One layer of each kind as Megatron-core's layer specs name it (megatron/core/models/hybrid/hybrid_layer_specs.py:
# TE's hybrid_stack_spec; the local names of post_training/modelopt/hybrid/model_specs.py), chunk-local layer i.
MAMBA_MIXER_NAMES = ["mixer.in_proj.weight", "mixer.conv1d.weight", "mixer.conv1d.bias", "mixer.dt_bias",
                     "mixer.A_log", "mixer.D", "mixer.norm.weight", "mixer.out_proj.weight"]
MEGATRON_LAYER_NAMES = {
    ("M", "local"): ["norm.weight", *MAMBA_MIXER_NAMES],
    ("M", "te"): ["mixer.in_proj.layer_norm_weight", *MAMBA_MIXER_NAMES, "mixer.in_proj._extra_state",
                  "mixer.out_proj._extra_state"],
    ("*", "local"): ["input_layernorm.weight", "self_attention.linear_qkv.weight", "self_attention.linear_proj.weight"],
    ("*", "te"): ["self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.weight",
                  "self_attention.linear_proj.weight", "self_attention.linear_qkv._extra_state",
                  "self_attention.core_attention._extra_state", "self_attention.linear_proj._extra_state"],
    ("-", "local"): ["pre_mlp_layernorm.weight", "mlp.linear_fc1.weight", "mlp.linear_fc2.weight"],
    ("-", "te"): ["mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.weight", "mlp.linear_fc2.weight",
                  "mlp.linear_fc1._extra_state", "mlp.linear_fc2._extra_state"],
}


def split_rows(full: torch.Tensor, sizes: List[int], tp: int) -> List[torch.Tensor]:
    """Megatron's MambaMixer split of a fused tensor: each part chunked over TP, rank t = [part_0 t; part_1 t; ...]."""
    parts = [part.chunk(tp) for part in full.split(sizes)]
    return [torch.cat([chunks[rank] for chunks in parts]) for rank in range(tp)]


def hybrid_megatron_model(hf: Dict[str, torch.Tensor], style: str, padded: int,
                          conv_names: str = "conv1d.weight") -> Dict[Tuple[int, int], Dict[str, Any]]:
    """(tp rank, stage) -> Megatron's state dict of the HF Nemotron-H tensors ``hf``, built from HF's names
    with Megatron's rules written out (not the converter's); ``conv_names``: Megatron-core 0.19's
    ``conv1d_weight`` or earlier ``conv1d.weight``."""
    te, per_stage = style == "te", len(HYBRID_PATTERN) // PP
    norm_name = {"M": "mixer.in_proj.layer_norm_weight" if te else "norm.weight",
                 "*": "self_attention.linear_qkv.layer_norm_weight" if te else "input_layernorm.weight",
                 "-": "mlp.linear_fc1.layer_norm_weight" if te else "pre_mlp_layernorm.weight"}
    conv = {"conv1d.weight": ("conv1d.weight", "conv1d.bias"), "conv1d_weight": ("conv1d_weight", "conv1d_bias")}
    models = {(rank, stage): {} for rank in range(TP) for stage in range(PP)}

    def put(stage: int, name: str, pieces: List[torch.Tensor]) -> None:
        for rank in range(TP):
            models[(rank, stage)][name] = pieces[rank].clone()

    def vocab(tensor: torch.Tensor) -> List[torch.Tensor]:
        return list(torch.cat([tensor, tensor.new_zeros(padded - tensor.size(0), tensor.size(1))]).chunk(TP))

    put(0, "embedding.word_embeddings.weight", vocab(hf["backbone.embeddings.weight"]))
    for layer, kind in enumerate(HYBRID_PATTERN):
        stage, local = divmod(layer, per_stage)
        prefix, theirs = f"backbone.layers.{layer}.", f"decoder.layers.{local}."
        put(stage, theirs + norm_name[kind], [hf[prefix + "norm.weight"]] * TP)
        if kind == "M":
            put(stage, theirs + "mixer.in_proj.weight", split_rows(
                hf[prefix + "mixer.in_proj.weight"], [D_INNER, D_INNER, GROUP_STATE, GROUP_STATE, MAMBA_HEADS], TP))
            for hf_name, name in zip(("conv1d.weight", "conv1d.bias"), conv[conv_names]):
                put(stage, theirs + "mixer." + name,
                    split_rows(hf[prefix + "mixer." + hf_name], [D_INNER, GROUP_STATE, GROUP_STATE], TP))
            for name in ("dt_bias", "A_log", "D", "norm.weight"):
                put(stage, theirs + "mixer." + name, list(hf[prefix + "mixer." + name].chunk(TP)))
            put(stage, theirs + "mixer.out_proj.weight", list(hf[prefix + "mixer.out_proj.weight"].chunk(TP, dim=1)))
        elif kind == "*":
            qkv = torch.cat([hf[prefix + f"mixer.{p}_proj.weight"] for p in "qkv"])
            put(stage, theirs + "self_attention.linear_qkv.weight", list(interleave_by_loop(qkv, 8, 4, 8).chunk(TP)))
            put(stage, theirs + "self_attention.linear_proj.weight",
                list(hf[prefix + "mixer.o_proj.weight"].chunk(TP, dim=1)))
        else:
            put(stage, theirs + "mlp.linear_fc1.weight", list(hf[prefix + "mixer.up_proj.weight"].chunk(TP)))
            put(stage, theirs + "mlp.linear_fc2.weight", list(hf[prefix + "mixer.down_proj.weight"].chunk(TP, dim=1)))
        if te:
            for name in MEGATRON_LAYER_NAMES[(kind, "te")]:
                if name.endswith("_extra_state"):
                    put(stage, theirs + name, [torch.zeros(0, dtype=torch.uint8)] * TP)
    put(PP - 1, "decoder.final_norm.weight", [hf["backbone.norm_f.weight"]] * TP)
    put(PP - 1, "output_layer.weight", vocab(hf["lm_head.weight"]))
    return models


def hybrid_args(padded: int, **overrides: Any) -> argparse.Namespace:
    """``args`` of Megatron-LM's pretrain_hybrid.py for the tiny Nemotron-H (its names and defaults)."""
    config = dict(num_layers=len(HYBRID_PATTERN), hidden_size=64, ffn_hidden_size=96, num_attention_heads=8,
                  num_query_groups=4, kv_channels=8, max_position_embeddings=256, norm_epsilon=1e-5,
                  add_qkv_bias=False, rotary_base=10000, untie_embeddings_and_output_weights=True)
    values = dict(swiglu=False, squared_relu=True, position_embedding_type="none", hybrid_layer_pattern="M*-|M-*",
                  hybrid_override_pattern=None, mamba_state_dim=8, mamba_head_dim=16, mamba_num_groups=2,
                  mamba_num_heads=None, spec=None, hidden_dropout=0.0, attention_dropout=0.0)
    return megatron_args(config, padded, **{**values, **overrides})


def write_hybrid_megatron(root: str, hf: Dict[str, torch.Tensor], style: str, conv_names: str = "conv1d.weight",
                          **arg_overrides: Any) -> str:
    padded = -(-HYBRID_HF["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    args = hybrid_args(padded, transformer_impl="transformer_engine" if style == "te" else "local", **arg_overrides)
    return save_megatron_files(root, hybrid_megatron_model(hf, style, padded, conv_names), args)


def save_megatron_files(root: str, models: Dict[Tuple[int, ...], Dict[str, Any]], args: argparse.Namespace,
                        ep: int = 1) -> str:
    """Megatron's iteration-10 rank files of ``models`` ((tp rank, stage[, ep rank]) -> state dict) and its
    tracker under ``root``; returns ``root``."""
    for key, model in models.items():
        rank, stage, ep_rank = (*key, 0)[:3]
        path = checkpoint_file(root, 10, rank, stage, PP, ep_rank=ep_rank, ep_size=ep)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save({"model": model, "args": args, "checkpoint_version": 3.0, "iteration": 10}, path)
    with open(os.path.join(root, TRACKER_FILENAME), "w") as tracker:
        tracker.write("10")
    return root


def hf_config_json(hf_dir: str) -> Dict[str, Any]:
    import json

    with open(os.path.join(hf_dir, "config.json")) as handle:
        return {k: v for k, v in json.load(handle).items() if k not in ("transformers_version", "architectures")}


@pytest.fixture(scope="module")
def nemotron_h(tmp_path_factory) -> Dict[str, Any]:
    """A tiny Nemotron-H with random weights, its HF directory and tensors, ours at TP 1 (mg) and the config.json
    ours exports."""
    root = tmp_path_factory.mktemp("nemotron_h")
    config = transformers.NemotronHConfig(**HYBRID_HF, dtype="float32")
    torch.manual_seed(0)
    model = transformers.NemotronHForCausalLM(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    hf_dir, mg_dir, exported = str(root / "hf"), str(root / "mg"), str(root / "hf_from_mg")
    model.save_pretrained(hf_dir)
    convert("hf", "mg", hf_dir, mg_dir)
    convert("mg", "hf", mg_dir, exported)  # config.json as the family writes it (its own spellings)
    return dict(hf_dir=hf_dir, mg_dir=mg_dir, hf=read_safetensors(hf_dir), config_json=hf_config_json(exported))


@pytest.mark.parametrize("style", ["local", "te"])
def test_hybrid_hf_to_megatron_and_back_is_exact(nemotron_h, tmp_path, style: str) -> None:
    """HF -> ours -> Megatron TP2 PP2 -> ours -> HF: the files are the ones Megatron's rules give (names, in_proj
    and conv rows per TP rank, per-stage numbering, final_norm, TE extra states) and HF gets its tensors back."""
    megatron, mg, back = str(tmp_path / "megatron"), str(tmp_path / "mg"), str(tmp_path / "hf")
    impl = ["--transformer-impl", "transformer_engine"] if style == "te" else []
    convert("mg", "megatron", nemotron_h["mg_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--make-vocab-size-divisible-by", str(DIVISIBLE_BY), *impl)
    written = megatron_files(megatron)
    padded = written[(0, 0)]["args"].padded_vocab_size
    for key, model in hybrid_megatron_model(nemotron_h["hf"], style, padded).items():
        assert sorted(written[key]["model"]) == sorted(model), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, written[key]["model"][name]), (key, name)
    args = written[(0, 0)]["args"]
    assert (args.hybrid_layer_pattern, args.hybrid_override_pattern, args.is_hybrid_model) == \
        ("M*-|M-*", HYBRID_PATTERN, True)
    assert (args.squared_relu, args.swiglu, args.mamba_state_dim, args.mamba_head_dim, args.mamba_num_groups,
            args.mamba_num_heads) == (True, False, 8, 16, 2, None)
    convert("megatron", "mg", megatron, mg)
    convert("mg", "hf", mg, back)
    original, result = nemotron_h["hf"], read_safetensors(back)
    assert sorted(original) == sorted(result)
    for name, tensor in original.items():
        assert torch.equal(tensor, result[name]), name
    # the config the family derives, with the dt floor (time_step_limit's low bound) and chunk kept in args
    # (Megatron's files carry no config.json: the keys HF keeps for itself are not there)
    derived, reference = hf_config_json(back), nemotron_h["config_json"]
    assert derived["time_step_limit"][0] == 0.001 and derived["chunk_size"] == 5
    assert derived == {key: reference[key] for key in derived}


@pytest.mark.parametrize("style", ["local", "te"])
def test_hybrid_layer_names_are_megatrons_specs(nemotron_h, tmp_path, style: str) -> None:
    """One layer of each kind, named as Megatron-core's hybrid layer specs name it; in_proj rows of TP rank t are
    [z_t; x_t; B_t; C_t; dt_t], conv channels [x_t; B_t; C_t]."""
    megatron = str(tmp_path / "megatron")
    impl = ["--transformer-impl", "transformer_engine"] if style == "te" else []
    convert("hf", "megatron", nemotron_h["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), *impl)
    files = megatron_files(megatron)
    first, last = files[(1, 0)]["model"], files[(1, 1)]["model"]
    for local, kind in enumerate("M*-"):
        ours = sorted(name.split(".", 3)[3] for name in first if name.startswith(f"decoder.layers.{local}."))
        assert ours == sorted(MEGATRON_LAYER_NAMES[(kind, style)]), kind
    assert "decoder.final_norm.weight" in last and not any("final_layernorm" in name for name in last)
    hf, rank = nemotron_h["hf"], 1
    z, x, b, c, dt = hf["backbone.layers.0.mixer.in_proj.weight"].split([D_INNER, D_INNER, 16, 16, 8])
    expected = torch.cat([z[64:], x[64:], b[8:], c[8:], dt[4:]])  # rank 1's halves of each part
    assert torch.equal(first["decoder.layers.0.mixer.in_proj.weight"], expected)
    x, b, c = hf["backbone.layers.0.mixer.conv1d.bias"].split([D_INNER, 16, 16])
    assert torch.equal(first["decoder.layers.0.mixer.conv1d.bias"], torch.cat([x[64:], b[8:], c[8:]]))
    assert torch.equal(files[(rank, 1)]["model"]["decoder.layers.0.mixer.A_log"],
                       hf["backbone.layers.3.mixer.A_log"][4:])  # stage 1's layer 0 is layer 3


@pytest.mark.parametrize("style, conv_names", [("local", "conv1d.weight"), ("te", "conv1d_weight")])
def test_hybrid_megatron_checkpoint_to_hf(nemotron_h, tmp_path, style: str, conv_names: str) -> None:
    """A checkpoint written by Megatron's rules (TE or local; Megatron-core 0.19's conv1d_weight names) -> HF
    gives the HF tensors; without our preserved args it reads as Megatron runs (no dt clamp, chunks of 128)."""
    root = write_hybrid_megatron(str(tmp_path / "megatron"), nemotron_h["hf"], style, conv_names)
    out = str(tmp_path / "hf")
    convert("megatron", "hf", root, out, "--vocab-size", str(HYBRID_HF["vocab_size"]), "--model-type-hf",
            "nemotron_h")
    original, result = nemotron_h["hf"], read_safetensors(out)
    assert sorted(original) == sorted(result)
    for name, tensor in original.items():
        assert torch.equal(tensor, result[name]), name
    config = hf_config_json(out)
    assert (config["layers_block_type"], config["chunk_size"], config["time_step_limit"][0]) == \
        (HYBRID_HF["layers_block_type"], 128, 0.0)


def test_hybrid_args_round_trip() -> None:
    """config -> Megatron args -> config keeps every hybrid and Mamba field; Megatron's own defaults read as its
    mixer builds them (mamba_num_heads None: d_inner = 2 x hidden)."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    base = dict(num_layers=4, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96, vocab_size=128,
                position_embedding_type="none", activation="squared_relu", add_bias_linear=False,
                mamba_state_dim=8, mamba_head_dim=16, mamba_num_groups=2, mamba_chunk_size=5,
                mamba_dt_limit_min=0.001)
    for extra in (dict(hybrid_override_pattern="M*-M"), dict(hybrid_override_pattern="MM-M", mamba_heads=6)):
        config = TransformerConfig(**base, **extra)
        args = argparse.Namespace(**megatron_format.args_from_config(config), tensor_model_parallel_size=1)
        assert args.mamba_num_heads == (6 if "mamba_heads" in extra else None)
        back = TransformerConfig(**megatron_format.config_from_args(args))
        for name in ("hybrid_override_pattern", "activation", "position_embedding_type", "mamba_version",
                     "mamba_state_dim", "mamba_head_dim", "mamba_num_groups", "mamba_d_inner", "mamba_num_heads",
                     "mamba_d_conv", "mamba_conv_bias", "mamba_chunk_size", "mamba_dt_limit_min", "ffn_hidden_size"):
            assert getattr(back, name) == getattr(config, name), (extra, name)
    megatron = argparse.Namespace(num_layers=3, hidden_size=64, num_attention_heads=4, padded_vocab_size=128,
                                  hybrid_layer_pattern="M|M-", squared_relu=True, position_embedding_type="rope",
                                  add_bias_linear=False, mamba_num_heads=None, mamba_head_dim=16)
    read = TransformerConfig(**megatron_format.config_from_args(megatron))
    assert (read.hybrid_override_pattern, read.mamba_d_inner, read.mamba_num_groups, read.mamba_state_dim) == \
        ("MM-", 128, 8, 128)
    assert (read.mamba_chunk_size, read.mamba_dt_limit_min, read.position_embedding_type) == (128, 0.0, "none")


def test_hybrid_pattern_from_older_args() -> None:
    """Older Megatron-core: hybrid_override_pattern, or the pattern its hybrid ratios allocate (the expected
    strings are what core_v0.12's mamba_hybrid_layer_allocation.allocate_layers returns), or an all-Mamba
    pretrain_mamba.py run."""
    from mindspeed_llm.models import megatron_format

    assert megatron_format.pattern_from_ratios(8, 0.25, 0.25) == "MM*-M*M-"
    assert megatron_format.pattern_from_ratios(10, 0.2, 0.0) == "MMM*MM*MMM"
    assert megatron_format.pattern_from_ratios(6, 0.0, 0.5) == "M-M-M-"
    for args, pattern in ((dict(hybrid_override_pattern="M*M-"), "M*M-"),
                          (dict(hybrid_attention_ratio=0.25, hybrid_mlp_ratio=0.25, num_layers=8), "MM*-M*M-"),
                          (dict(is_hybrid_model=True), "MMMM"),
                          (dict(spec=["megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"]), "MMMM"),
                          (dict(), None)):
        assert megatron_format.stored_pattern(argparse.Namespace(**{"num_layers": 4, **args})) == pattern


@pytest.mark.parametrize("setting, fragments", [
    (dict(hybrid_layer_pattern="MK*|M-*"), ("args.hybrid_layer_pattern", "'K' is a Kimi Delta Attention layer")),
    (dict(hybrid_layer_pattern="M*-|M-*/*"), ("args.hybrid_layer_pattern", "multi-token prediction")),
    (dict(add_bias_linear=True), ("args.add_bias_linear", "Mamba")),
    (dict(norm_epsilon=1e-6), ("args.norm_epsilon", "1e-05"))])
def test_error_unsupported_hybrid_megatron_setting(capsys, nemotron_h, tmp_path, setting, fragments) -> None:
    root = write_hybrid_megatron(str(tmp_path / "megatron"), nemotron_h["hf"], "local", **setting)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "mg", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out")], *fragments)


def test_error_hybrid_target_megatron_cannot_hold(capsys, nemotron_h, tmp_path) -> None:
    """A Kimi Delta Attention layer, Mamba1 and fewer Mamba groups than TP have no Megatron-LM checkpoint: one line
    each."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    kda = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128,
                            hybrid_override_pattern="K*", linear_num_key_heads=2, linear_num_value_heads=2)
    with pytest.raises(megatron_format.MegatronFormatError, match=r"'K' is a Kimi Delta Attention layer"):
        megatron_format.args_from_config(kda)
    mamba1 = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, vocab_size=128,
                               hybrid_override_pattern="M", position_embedding_type="none", mamba_version=1)
    with pytest.raises(megatron_format.MegatronFormatError, match="mamba_version = 1"):
        megatron_format.args_from_config(mamba1)
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir",
                          nemotron_h["hf_dir"], "--save-dir", str(tmp_path / "out"), "--target-tensor-parallel-size",
                          "4"], "--target-tensor-parallel-size 4", "Mamba groups")


def test_hybrid_uneven_stages_are_pattern_segments(nemotron_h, tmp_path) -> None:
    """--num-layer-list 2,4 is written as Megatron-core places it ('|' between the stages' segments), each stage
    numbered from 0, and read back from those segments."""
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    convert("hf", "megatron", nemotron_h["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--num-layer-list", "2,4")
    files = megatron_files(megatron)
    assert files[(0, 1)]["args"].hybrid_layer_pattern == "M*|-M-*"
    for stage, count in enumerate((2, 4)):
        assert sorted({int(n.split(".")[2]) for n in files[(0, stage)]["model"] if n.startswith("decoder.layers.")}) \
            == list(range(count))
    assert "decoder.layers.1.norm.weight" in files[(0, 1)]["model"]  # layer 3, the second of stage 1, is 'M'
    convert("megatron", "hf", megatron, back)
    result = read_safetensors(back)
    assert sorted(result) == sorted(nemotron_h["hf"])
    for name, tensor in nemotron_h["hf"].items():
        assert torch.equal(tensor, result[name]), name

"""Megatron-LM checkpoints of gated DeltaNet models (``--save-model-type megatron`` / ``--load-model-type megatron``).

Megatron-core builds Qwen3.5 / Qwen3-Next as a GPT model whose ``--experimental-attention-variant gated_delta_net``
(``gdn``) sits on the layers ``--linear-attention-freq`` marks 1, and its hybrid stacks have the same layer as the
pattern letter 'G'. The tiny Qwen3.5 text model here (4 key heads and 8 value heads, so that each of the two TP
ranks holds two key heads and the per-rank row order is not trivially ours; gated attention with 8 heads in 4
groups) is written by this file's own writer from the HF tensors, by Megatron-core's rules
(``megatron/core/ssm/gated_delta_net``: one ``in_proj`` whose rank t holds ``[q_t; k_t; v_t; z_t; b_t; a_t]``,
conv channels ``[q_t; k_t; v_t]``, ``out_norm`` zero-centred with the model's norms; ``linear_qkv`` per query group
``[queries; their gates; key; value]`` with ``attention_output_gate``; the TE spec's norm fused into ``in_proj``):

* HF -> Megatron TP2 PP2 (local and TE) gives exactly those files and args, and -> HF is exact;
* those files, with Megatron's own spelling ``gdn``, -> HF give the HF tensors and transformers' logits;
* the args round trip (GPT route and hybrid 'G'), and one-line refusals of what Megatron's layer lacks.

Those rules were read in megatron-core 0.16.1's ``GatedDeltaNet.forward`` and its module built on the CPU (its fla
import flag set, its CUDA-RNG init skipped): the names and shapes (``in_proj`` of 2 qk + 2 v + 2 heads rows,
``conv1d`` ``[2 qk + v, 1, k]``, ``A_log``, ``dt_bias``, ``out_norm``, ``out_proj``) are the ones written here.

    python -m pytest tests/unit/test_convert_megatron_gdn.py -q
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch
import transformers

from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_errors import expect_error
from tests.unit.test_convert_megatron import (DIVISIBLE_BY, PP, TP, convert, megatron_args, megatron_files,
                                             save_megatron_files)

LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "linear_attention"]
MARKS = [1, 0, 1, 1]  # Megatron's linear_attention_freq: 1 a gated DeltaNet layer
KEY_HEADS, VALUE_HEADS, KEY_DIM, VALUE_DIM = 4, 8, 16, 8
HEADS, GROUPS, HEAD_DIM = 8, 4, 16
HF_CONFIG = dict(hidden_size=64, intermediate_size=96, num_attention_heads=HEADS, num_key_value_heads=GROUPS,
                 head_dim=HEAD_DIM, linear_conv_kernel_dim=4, linear_key_head_dim=KEY_DIM,
                 linear_value_head_dim=VALUE_DIM, linear_num_key_heads=KEY_HEADS, linear_num_value_heads=VALUE_HEADS,
                 vocab_size=101, num_hidden_layers=len(LAYER_TYPES), layer_types=LAYER_TYPES,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                  "mrope_section": [1, 1, 0], "mrope_interleaved": True})
GDN_NAMES = ["self_attention.in_proj.weight", "self_attention.conv1d.weight", "self_attention.A_log",
             "self_attention.dt_bias", "self_attention.out_norm.weight", "self_attention.out_proj.weight"]


def saved_hf_model(root: str, config_class: str, model_class: str, hf_config: Dict[str, Any]) -> Dict[str, Any]:
    """A random fp32 ``transformers`` model (seed 0, weights moved off their init), saved under ``root/hf``: the
    model, its directory and its saved tensors."""
    config = getattr(transformers, config_class)(**hf_config, dtype="float32")
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    hf_dir = os.path.join(root, "hf")
    model.save_pretrained(hf_dir)
    return dict(model=model, hf_dir=hf_dir, hf=read_safetensors(hf_dir))


@pytest.fixture(scope="module")
def qwen3_5(tmp_path_factory) -> Dict[str, Any]:
    return saved_hf_model(str(tmp_path_factory.mktemp("qwen3_5")), "Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
                          HF_CONFIG)


# --------------------------------------------------------------------------- Megatron-core's rules, from HF names


def gdn_in_proj(hf: Dict[str, torch.Tensor], prefix: str, rank: int) -> torch.Tensor:
    """Rank ``rank``'s GatedDeltaNet ``in_proj``: [q_t; k_t; v_t; z_t; b_t; a_t], each part over its heads."""
    q, k, v = hf[prefix + "in_proj_qkv.weight"].split([KEY_HEADS * KEY_DIM, KEY_HEADS * KEY_DIM,
                                                        VALUE_HEADS * VALUE_DIM])
    parts = [q, k, v] + [hf[prefix + f"in_proj_{p}.weight"] for p in "zba"]
    return torch.cat([rows.chunk(TP)[rank] for rows in parts])  # each part's heads split evenly over TP


def gated_qkv(hf: Dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    """Megatron's ``linear_qkv`` with the output gate, by a loop: per group its query heads, their gates, its key
    head and its value head (HF's q_proj holds [query; gate] per head)."""
    per_head = hf[prefix + "q_proj.weight"].reshape(HEADS, 2, HEAD_DIM, -1)  # [heads, (q, gate), hd, hidden]
    keys, values = (hf[prefix + f"{p}_proj.weight"].reshape(GROUPS, HEAD_DIM, -1) for p in "kv")
    rows, per_group = [], HEADS // GROUPS
    for group in range(GROUPS):
        mine = range(group * per_group, (group + 1) * per_group)
        rows += [per_head[h, 0] for h in mine] + [per_head[h, 1] for h in mine] + [keys[group], values[group]]
    return torch.cat(rows)


Put = Callable[[int, str, List[torch.Tensor]], None]  # (stage, Megatron name, a piece per TP rank)


def put_mixer(put: Put, hf: Dict[str, torch.Tensor], layer: int, stage: int, theirs: str, kind: str, te: bool,
              in_proj: Callable[[Dict[str, torch.Tensor], str, int], torch.Tensor]) -> List[str]:
    """A Qwen3.5 / Qwen3-Next layer's norm and token mixer (a GatedDeltaNet, whose rank t ``in_proj`` rows
    ``in_proj`` gives, or gated attention) as Megatron holds them; returns its TE modules."""
    hf_prefix = f"model.layers.{layer}."
    if kind == "linear_attention":
        prefix = hf_prefix + "linear_attn."
        put(stage, theirs + ("self_attention.in_proj.layer_norm_weight" if te else "input_layernorm.weight"),
            [hf[hf_prefix + "input_layernorm.weight"]] * TP)
        put(stage, theirs + "self_attention.in_proj.weight", [in_proj(hf, prefix, r) for r in range(TP)])
        q, k, v = hf[prefix + "conv1d.weight"].split([KEY_HEADS * KEY_DIM, KEY_HEADS * KEY_DIM,
                                                      VALUE_HEADS * VALUE_DIM])
        put(stage, theirs + "self_attention.conv1d.weight",
            [torch.cat([q.chunk(TP)[r], k.chunk(TP)[r], v.chunk(TP)[r]]) for r in range(TP)])
        for name in ("A_log", "dt_bias"):
            put(stage, theirs + "self_attention." + name, list(hf[prefix + name].chunk(TP)))
        # the model's norms are (1 + w) and so Megatron's out_norm (TENorm, zero_centered_gamma); HF's gated
        # norm is a plain w
        put(stage, theirs + "self_attention.out_norm.weight", [hf[prefix + "norm.weight"] - 1] * TP)
        put(stage, theirs + "self_attention.out_proj.weight", list(hf[prefix + "out_proj.weight"].chunk(TP, 1)))
        return ["self_attention.in_proj", "self_attention.out_proj"]
    prefix = hf_prefix + "self_attn."
    put(stage, theirs + ("self_attention.linear_qkv.layer_norm_weight" if te else "input_layernorm.weight"),
        [hf[hf_prefix + "input_layernorm.weight"]] * TP)
    put(stage, theirs + "self_attention.linear_qkv.weight", list(gated_qkv(hf, prefix).chunk(TP)))
    put(stage, theirs + "self_attention.linear_proj.weight", list(hf[prefix + "o_proj.weight"].chunk(TP, 1)))
    put(stage, theirs + "self_attention.q_layernorm.weight", [hf[prefix + "q_norm.weight"]] * TP)
    put(stage, theirs + "self_attention.k_layernorm.weight", [hf[prefix + "k_norm.weight"]] * TP)
    return ["self_attention.linear_qkv", "self_attention.core_attention", "self_attention.linear_proj"]


def gated_fc1(gate: torch.Tensor, up: torch.Tensor) -> List[torch.Tensor]:
    """A gated MLP's fc1 per TP rank: ``[gate_t; up_t]``."""
    return [torch.cat([g, u]) for g, u in zip(gate.chunk(TP), up.chunk(TP))]


def padded_vocab(tensor: torch.Tensor, padded: int) -> List[torch.Tensor]:
    """An embedding or output layer padded with zero rows to ``padded`` and split over TP."""
    return list(torch.cat([tensor, tensor.new_zeros(padded - tensor.size(0), tensor.size(1))]).chunk(TP))


def megatron_model(hf: Dict[str, torch.Tensor], te: bool, padded: int) -> Dict[Tuple[int, int], Dict[str, Any]]:
    """(tp rank, stage) -> the state dict Megatron-core holds for the HF Qwen3.5 tensors ``hf`` (TP2 PP2)."""
    models = {(rank, stage): {} for rank in range(TP) for stage in range(PP)}
    per_stage = len(LAYER_TYPES) // PP

    def put(stage: int, name: str, pieces: List[torch.Tensor]) -> None:
        for rank in range(TP):
            models[(rank, stage)][name] = pieces[rank].clone()

    put(0, "embedding.word_embeddings.weight", padded_vocab(hf["model.embed_tokens.weight"], padded))
    for layer, kind in enumerate(LAYER_TYPES):
        stage, local = divmod(layer, per_stage)
        hf_prefix, theirs = f"model.layers.{layer}.", f"decoder.layers.{local}."
        modules = put_mixer(put, hf, layer, stage, theirs, kind, te, gdn_in_proj)
        put(stage, theirs + ("mlp.linear_fc1.layer_norm_weight" if te else "pre_mlp_layernorm.weight"),
            [hf[hf_prefix + "post_attention_layernorm.weight"]] * TP)
        put(stage, theirs + "mlp.linear_fc1.weight", gated_fc1(hf[hf_prefix + "mlp.gate_proj.weight"],
                                                                hf[hf_prefix + "mlp.up_proj.weight"]))
        put(stage, theirs + "mlp.linear_fc2.weight", list(hf[hf_prefix + "mlp.down_proj.weight"].chunk(TP, 1)))
        if te:
            for module in modules + ["mlp.linear_fc1", "mlp.linear_fc2"]:
                put(stage, theirs + module + "._extra_state", [torch.zeros(0, dtype=torch.uint8)] * TP)
    put(PP - 1, "decoder.final_layernorm.weight", [hf["model.norm.weight"]] * TP)
    put(PP - 1, "output_layer.weight", padded_vocab(hf["lm_head.weight"], padded))
    return models


def gdn_megatron_args(padded: int, **overrides: Any) -> argparse.Namespace:
    """``args`` of a Megatron-LM run of the tiny Qwen3.5 (its names; Megatron-core's spelling ``gdn``)."""
    config = dict(num_layers=len(LAYER_TYPES), hidden_size=64, ffn_hidden_size=96, num_attention_heads=HEADS,
                  num_query_groups=GROUPS, kv_channels=HEAD_DIM, max_position_embeddings=32768, norm_epsilon=1e-6,
                  add_qkv_bias=False, rotary_base=10000.0, untie_embeddings_and_output_weights=True)
    values = dict(apply_layernorm_1p=True, qk_layernorm=True, rotary_percent=0.25, attention_output_gate=True,
                  experimental_attention_variant="gdn", linear_attention_freq=MARKS, linear_conv_kernel_dim=4,
                  linear_key_head_dim=KEY_DIM, linear_value_head_dim=VALUE_DIM, linear_num_key_heads=KEY_HEADS,
                  linear_num_value_heads=VALUE_HEADS, hidden_dropout=0.0, attention_dropout=0.0)
    return megatron_args(config, padded, **{**values, **overrides})


def write_gdn_megatron(root: str, hf: Dict[str, torch.Tensor], te: bool, **arg_overrides: Any) -> str:
    padded = -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    args = gdn_megatron_args(padded, transformer_impl="transformer_engine" if te else "local", **arg_overrides)
    return save_megatron_files(root, megatron_model(hf, te, padded), args)


def assert_same_tensors(expected: Dict[str, torch.Tensor], result: Dict[str, torch.Tensor]) -> None:
    assert sorted(expected) == sorted(result)
    for name, tensor in expected.items():
        assert torch.equal(tensor, result[name]), name


def assert_converted_like(original: Dict[str, Any], out: str) -> None:
    """The HF directory ``out`` holds the ``original`` model's tensors, and transformers loads it with the same
    logits."""
    assert_same_tensors(original["hf"], read_safetensors(out))
    converted = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    vocab = converted.config.vocab_size
    input_ids = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, logits = original["model"](input_ids).logits, converted(input_ids).logits
    assert (logits - expected).abs().max().item() <= 1e-5


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("te", [False, True], ids=["local", "te"])
def test_hf_to_megatron_is_megatron_cores_layout_and_back_is_exact(qwen3_5, tmp_path, te: bool) -> None:
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    impl = ["--transformer-impl", "transformer_engine"] if te else []
    convert("hf", "megatron", qwen3_5["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--make-vocab-size-divisible-by", str(DIVISIBLE_BY), *impl)
    written = megatron_files(megatron)
    args = written[(0, 0)]["args"]
    for key, model in megatron_model(qwen3_5["hf"], te, args.padded_vocab_size).items():
        assert sorted(written[key]["model"]) == sorted(model), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, written[key]["model"][name]), (key, name)
    layer = sorted(name.split(".", 3)[3] for name in written[(0, 0)]["model"] if name.startswith("decoder.layers.0."))
    assert set(GDN_NAMES) <= set(layer)
    assert (args.experimental_attention_variant, args.linear_attention_freq, args.attention_output_gate) == \
        ("gated_delta_net", MARKS, True)
    assert (args.linear_num_key_heads, args.linear_num_value_heads, args.linear_key_head_dim,
            args.linear_value_head_dim, args.linear_conv_kernel_dim, args.apply_layernorm_1p) == \
        (KEY_HEADS, VALUE_HEADS, KEY_DIM, VALUE_DIM, 4, True)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(qwen3_5["hf"], read_safetensors(back))


@pytest.mark.parametrize("te", [False, True], ids=["local", "te"])
def test_megatron_checkpoint_to_hf_gives_transformers_logits(qwen3_5, tmp_path, te: bool) -> None:
    """Files written by Megatron-core's rules (its ``gdn`` spelling) -> HF: the HF tensors, and a model
    transformers loads with the original's logits."""
    root = write_gdn_megatron(str(tmp_path / "megatron"), qwen3_5["hf"], te)
    out = str(tmp_path / "hf")
    convert("megatron", "hf", root, out, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf",
            "qwen3_5_text")
    assert_converted_like(qwen3_5, out)


def test_megatron_to_mg_to_megatron_reproduces_the_files(qwen3_5, tmp_path) -> None:
    """Megatron TP2 PP2 -> ours at TP1 -> Megatron TP2 PP2 (TE): the same tensors under the same names."""
    root = write_gdn_megatron(str(tmp_path / "megatron"), qwen3_5["hf"], te=True)
    mg, back = str(tmp_path / "mg"), str(tmp_path / "back")
    convert("megatron", "mg", root, mg, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf",
            "qwen3_5_text")
    convert("mg", "megatron", mg, back, "--target-tensor-parallel-size", str(TP), "--target-pipeline-parallel-size",
            str(PP), "--transformer-impl", "transformer_engine")
    original, written = megatron_files(root), megatron_files(back)
    for key, checkpoint in original.items():
        model, ours = checkpoint["model"], written[key]["model"]
        assert sorted(model) == sorted(ours), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, ours[name]), (key, name)


# --------------------------------------------------------------------------- args and refusals


def test_gdn_args_round_trip() -> None:
    """config -> Megatron args -> config keeps every gated DeltaNet field, on the GPT route (an int
    linear_attention_freq as Megatron stores N) and in a hybrid pattern's 'G' layers."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    base = dict(num_layers=4, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96, vocab_size=128,
                linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8, linear_value_head_dim=12,
                linear_conv_kernel_dim=3, linear_chunk_size=16, add_bias_linear=False)
    for extra in (dict(experimental_attention_variant="gated_delta_net", linear_attention_freq="4",
                       attention_output_gate=True, apply_layernorm_1p=True),
                  dict(hybrid_override_pattern="G*-G", position_embedding_type="rope")):
        config = TransformerConfig(**base, **extra)
        args = argparse.Namespace(**megatron_format.args_from_config(config), tensor_model_parallel_size=1)
        back = TransformerConfig(**megatron_format.config_from_args(args))
        for name in ("hybrid_override_pattern", "experimental_attention_variant", "linear_attention_layers",
                     "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim", "linear_chunk_size", "attention_output_gate",
                     "apply_layernorm_1p"):
            assert getattr(back, name) == getattr(config, name), (extra, name)
        assert [back.layer_parts(i)[0] for i in range(4)] == [config.layer_parts(i)[0] for i in range(4)]
    assert args.experimental_attention_variant is None and args.linear_attention_freq is None  # hybrid: letters
    megatron = argparse.Namespace(num_layers=4, hidden_size=64, num_attention_heads=4, padded_vocab_size=128,
                                  experimental_attention_variant="gdn", linear_attention_freq=4,
                                  position_embedding_type="rope", swiglu=True, add_bias_linear=False)
    read = TransformerConfig(**megatron_format.config_from_args(megatron))  # Megatron's defaults for the sizes
    assert read.linear_attention_layers == (True, True, True, False)
    assert (read.linear_num_key_heads, read.linear_num_value_heads, read.linear_key_head_dim,
            read.linear_value_head_dim, read.linear_chunk_size) == (16, 32, 128, 128, 64)
    name = megatron_format.their_name("decoder.layers.3.input_layernorm.weight", 1, "transformer_engine",
                                      hybrid=True, mixer="gated_delta_net")
    assert name == "decoder.layers.1.self_attention.in_proj.layer_norm_weight"


@pytest.mark.parametrize("setting, fragments", [
    (dict(experimental_attention_variant="gdn2"), ("args.experimental_attention_variant = 'gdn2'",)),
    (dict(experimental_attention_variant="dsa"), ("args.experimental_attention_variant = 'dsa'",)),
    (dict(linear_attention_freq=None), ("without args.linear_attention_freq",)),
    (dict(add_bias_linear=True), ("args.add_bias_linear", "GatedDeltaNet"))])
def test_error_unsupported_gdn_megatron_setting(capsys, qwen3_5, tmp_path, setting, fragments) -> None:
    root = write_gdn_megatron(str(tmp_path / "megatron"), qwen3_5["hf"], te=False, **setting)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "mg", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out"), "--model-type-hf", "qwen3_5_text"], *fragments)


def test_error_gdn_target_megatron_cannot_hold() -> None:
    """Kimi Delta Attention layers, OLMo-Hybrid's negative eigenvalues and a per-head output gate have no
    Megatron-LM checkpoint: one line each, naming the field."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    base = dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128, linear_num_key_heads=2,
                linear_num_value_heads=2, linear_attention_freq="[1, 0]", add_bias_linear=False)
    for extra, fragment in ((dict(experimental_attention_variant="kda"), "experimental_attention_variant = 'kda'"),
                            (dict(experimental_attention_variant="gated_delta_net", linear_allow_neg_eigval=True),
                             "linear_allow_neg_eigval = True"),
                            (dict(experimental_attention_variant="gated_delta_net", attention_output_gate=True,
                                  attention_output_gate_per_head=True), "attention_output_gate_per_head = True")):
        with pytest.raises(megatron_format.MegatronFormatError, match=fragment):
            megatron_format.args_from_config(TransformerConfig(**base, **extra))


def test_error_megatron_flags_the_model_has_nothing_for(capsys, qwen3_5, tmp_path) -> None:
    """A dense model without MTP refuses --moe-grouped-gemm and --megatron-mtp-layer-name instead of ignoring them."""
    base = ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir", qwen3_5["hf_dir"],
            "--save-dir", str(tmp_path / "out")]
    expect_error(capsys, base + ["--moe-grouped-gemm"], "--moe-grouped-gemm", "has none")
    expect_error(capsys, base + ["--megatron-mtp-layer-name", "transformer_layer"],
                 "--megatron-mtp-layer-name transformer_layer", "has none")

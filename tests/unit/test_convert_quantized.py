"""Quantised Hugging Face checkpoints dequantised on import (``mindspeed_llm/convert/quantized.py``).

* A DeepSeek-V3-shaped checkpoint in DeepSeek's block FP8 (E4M3 values, fp32 ``weight_scale_inv`` per 16 x 16
  block here, partial blocks included) and a gpt-oss-shaped one with MXFP4 experts (``*_blocks`` / ``*_scales``)
  are made from tiny random transformers models. Each quantised tensor dequantises to what transformers'
  own dequantisation gives (``Fp8Dequantize._dequantize_one``, ``convert_moe_packed_tensors``), in fp32; a
  partial block (which transformers refuses) to DeepSeek's rule, written out here element by element.
* Converting the quantised checkpoint gives exactly the Megatron checkpoint that converting a plain one holding
  those dequantised weights gives (TP 2), and its HF export carries no ``quantization_config``.
* DeepSeek-V4's packed FP4 experts (int8, two codes per byte, E8M0 scales per 32) beside FP8 layers.
* ``--save-hf-fp8`` writes DeepSeek's block FP8, which transformers loads to the weights our import reads back,
  and which exports again to the same values.
* Bad input, one line each: an unsupported quantisation, an 8-bit tensor without its scale, an FP8 export to a
  non-HF target.

    python -m pytest tests/unit/test_convert_quantized.py -q
"""
from __future__ import annotations

import json
import math
import os
from typing import Dict

import pytest
import torch
import transformers
from safetensors.torch import save_file
from transformers.integrations.finegrained_fp8 import Fp8Dequantize
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

from core.quantization import formats
from mindspeed_llm.convert import quantized
from tests.unit.test_convert_ckpt import HF_MG, expect_error, hf_to_mg, mg_states, mg_to, read_json, read_safetensors

BLOCK = 16
KEPT_WHOLE = ("embed_tokens", "lm_head", "norm", "mlp.gate.weight")  # DeepSeek keeps these unquantised


def saved_model(root: str, config: transformers.PretrainedConfig, model_class: str) -> Dict[str, torch.Tensor]:
    """A tiny random fp32 model saved under ``root``; returns its tensors."""
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    model.save_pretrained(root)
    return read_safetensors(root)


def write_checkpoint(directory: str, tensors: Dict[str, torch.Tensor], config: Dict) -> str:
    os.makedirs(directory, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()},
              os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle)
    return directory


def fp8_blocks(weight: torch.Tensor) -> tuple:
    """DeepSeek's block FP8 of ``weight`` ``[..., rows, cols]``: E4M3 values and fp32 ``scale_inv`` per block."""
    rows, cols = weight.shape[-2:]
    grid = (math.ceil(rows / BLOCK), math.ceil(cols / BLOCK))
    padded = torch.zeros(*weight.shape[:-2], grid[0] * BLOCK, grid[1] * BLOCK)
    padded[..., :rows, :cols] = weight
    blocks = padded.unflatten(-1, (grid[1], BLOCK)).unflatten(-3, (grid[0], BLOCK))  # [..., gr, B, gc, B]
    scale = blocks.abs().amax(dim=(-3, -1)) / 448.0  # [..., gr, gc]
    scaled = blocks / scale[..., :, None, :, None]
    values = scaled.flatten(-2).flatten(-3, -2)[..., :rows, :cols].to(torch.float8_e4m3fn)
    return values, scale


def deepseek_rule(values: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """DeepSeek's weight_dequant, element by element: each element times its block's scale."""
    out = torch.empty(values.shape)
    for i in range(values.shape[-2]):
        for j in range(values.shape[-1]):
            out[..., i, j] = values[..., i, j].float() * scale[..., i // BLOCK, j // BLOCK]
    return out


@pytest.fixture(scope="module")
def deepseek_fp8(tmp_path_factory) -> Dict[str, str]:
    """A DeepSeek-V3 checkpoint in block FP8 and the plain one holding transformers' dequantised weights."""
    root = tmp_path_factory.mktemp("fp8")
    config = transformers.DeepseekV3Config(
        num_hidden_layers=2, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, n_routed_experts=4,
        num_experts_per_tok=2, n_group=1, topk_group=1, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, vocab_size=64,
        first_k_dense_replace=1, dtype="float32")
    tensors = saved_model(str(root / "source"), config, "DeepseekV3ForCausalLM")
    settings = read_json(str(root / "source" / "config.json"))
    stored, plain, partial = {}, {}, 0
    for name, tensor in tensors.items():
        if not name.endswith(".weight") or tensor.dim() < 2 or any(part in name for part in KEPT_WHOLE):
            stored[name] = plain[name] = tensor
            continue
        values, scale = fp8_blocks(tensor)
        stored[name], stored[name + "_scale_inv"] = values, scale
        if tensor.shape[-2] % BLOCK or tensor.shape[-1] % BLOCK:
            plain[name] = deepseek_rule(values, scale)
            partial += 1
        else:
            plain[name] = Fp8Dequantize(None)._dequantize_one(values, scale, output_dtype=torch.float32)
    assert partial and len(stored) > len(plain)  # some partial blocks, some scales
    quantization = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                    "weight_block_size": [BLOCK, BLOCK]}
    return {"fp8": write_checkpoint(str(root / "fp8"), stored, {**settings, "quantization_config": quantization}),
            "plain": write_checkpoint(str(root / "plain"), plain, settings)}


def test_fp8_blocks_dequantise_as_transformers_and_deepseek(deepseek_fp8) -> None:
    stored, plain = read_safetensors(deepseek_fp8["fp8"]), read_safetensors(deepseek_fp8["plain"])
    block = (BLOCK, BLOCK)
    for name, expected in plain.items():
        if name + "_scale_inv" in stored:
            got = quantized.dequantize_scaled_blocks(stored[name], stored[name + "_scale_inv"], block)
            assert torch.equal(got, expected), name


def test_fp8_checkpoint_converts_as_its_dequantised_weights(deepseek_fp8, tmp_path) -> None:
    hf_to_mg(deepseek_fp8["fp8"], str(tmp_path / "from_fp8"), 2)
    hf_to_mg(deepseek_fp8["plain"], str(tmp_path / "from_plain"), 2)
    for ours, theirs in zip(mg_states(str(tmp_path / "from_fp8"), 2), mg_states(str(tmp_path / "from_plain"), 2)):
        model, expected = ours["model"], theirs["model"]
        assert model.keys() == expected.keys()
        for key in expected:
            assert torch.equal(model[key], expected[key]), key
    mg_to("hf", str(tmp_path / "from_fp8"), str(tmp_path / "hf"))
    assert "quantization_config" not in read_json(str(tmp_path / "hf" / "config.json"))


def pack_mxfp4(weight: torch.Tensor) -> tuple:
    """gpt-oss's MXFP4 storage of an expert stack ``[E, X, Y]`` (X in blocks of 32): blocks ``[E, Y, X/32, 16]``
    (two codes per byte, low nibble first) and E8M0 scales ``[E, Y, X/32]``."""
    elements, scales = formats.mx_quantize(weight.transpose(1, 2).contiguous(), formats.E2M1)  # [E, Y, X]
    codes = formats.e2m1_encode(elements)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)  # [E, Y, X/2]
    return packed.reshape(*packed.shape[:2], -1, 16), scales


@pytest.fixture(scope="module")
def gpt_oss_mxfp4(tmp_path_factory) -> Dict[str, str]:
    root = tmp_path_factory.mktemp("mxfp4")
    config = transformers.GptOssConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=32, num_local_experts=4,
                                       num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2,
                                       head_dim=16, vocab_size=64, sliding_window=8, dtype="float32")
    tensors = saved_model(str(root / "source"), config, "GptOssForCausalLM")
    settings = read_json(str(root / "source" / "config.json"))
    stored, plain = {}, {}
    for name, tensor in tensors.items():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            blocks, scales = pack_mxfp4(tensor)
            stored[name + "_blocks"], stored[name + "_scales"] = blocks, scales
            plain[name] = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
        else:
            stored[name] = plain[name] = tensor
    quantization = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}
    return {"mxfp4": write_checkpoint(str(root / "mxfp4"), stored, {**settings, "quantization_config": quantization}),
            "plain": write_checkpoint(str(root / "plain"), plain, settings)}


def test_mxfp4_experts_dequantise_as_transformers(gpt_oss_mxfp4) -> None:
    stored, plain = read_safetensors(gpt_oss_mxfp4["mxfp4"]), read_safetensors(gpt_oss_mxfp4["plain"])
    checked = 0
    for name in plain:
        if name + "_blocks" in stored:
            got = quantized.dequantize_mxfp4_experts(stored[name + "_blocks"], stored[name + "_scales"])
            assert torch.equal(got, plain[name]), name
            checked += 1
    assert checked == 4


def test_mxfp4_checkpoint_converts_as_its_dequantised_weights(gpt_oss_mxfp4, tmp_path) -> None:
    hf_to_mg(gpt_oss_mxfp4["mxfp4"], str(tmp_path / "from_mxfp4"), 2)
    hf_to_mg(gpt_oss_mxfp4["plain"], str(tmp_path / "from_plain"), 2)
    for ours, theirs in zip(mg_states(str(tmp_path / "from_mxfp4"), 2), mg_states(str(tmp_path / "from_plain"), 2)):
        for key in theirs["model"]:
            assert torch.equal(ours["model"][key], theirs["model"][key]), key


def test_packed_fp4_experts_beside_fp8_layers() -> None:
    """DeepSeek-V4's layout: int8 packed FP4 ``[rows, cols / 2]`` with E8M0 scales ``[rows, cols / 32]`` (a grid
    finer than the configured 128 x 128) dequantises as transformers' ``Fp8Dequantize`` does."""
    weight = torch.randn(3, 24, 64)
    elements, scales = formats.mx_quantize(weight, formats.E2M1)  # [3, 24, 64], [3, 24, 2]
    codes = formats.e2m1_encode(elements)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).view(torch.int8)  # [3, 24, 32]
    e8m0 = scales.view(torch.float8_e8m0fnu)
    got = quantized.dequantize_scaled_blocks(packed, e8m0, (128, 128))
    assert torch.equal(got, Fp8Dequantize(None)._dequantize_one(packed, e8m0, output_dtype=torch.float32))
    assert torch.equal(got, formats.mx_dequantize(elements, scales))
    plan = quantized.plan_dequantization("fp8", {"w": (24, 32), "w_scale_inv": (24, 2)}, {"w": "I8",
                                                                                          "w_scale_inv": "F8_E8M0"})
    assert plan["w"].shape == (24, 64)


def test_an_unread_quantisation_is_one_line(deepseek_fp8, tmp_path, capsys) -> None:
    source = tmp_path / "awq"
    os.makedirs(source)
    os.link(os.path.join(deepseek_fp8["plain"], "model.safetensors"), source / "model.safetensors")
    settings = read_json(os.path.join(deepseek_fp8["plain"], "config.json"))
    settings["quantization_config"] = {"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]}
    json.dump(settings, open(source / "config.json", "w"))
    expect_error(capsys, str(tmp_path / "out"), [*HF_MG, "--load-dir", str(source)], "quant_method 'fp8'",
                 "does not dequantise", "bf16 copy")


def test_an_fp8_tensor_without_its_scale_is_one_line(deepseek_fp8, tmp_path, capsys) -> None:
    tensors = read_safetensors(deepseek_fp8["fp8"])
    dropped = next(name for name in tensors if name.endswith("_scale_inv"))
    del tensors[dropped]
    source = write_checkpoint(str(tmp_path / "no_scale"), tensors,
                              read_json(os.path.join(deepseek_fp8["fp8"], "config.json")))
    expect_error(capsys, str(tmp_path / "out"), [*HF_MG, "--load-dir", source], dropped[:-len("_scale_inv")],
                 "F8_E4M3 without the scales")


def test_an_fp8_export_reads_back_exactly(deepseek_fp8, tmp_path) -> None:
    """``--save-hf-fp8``: the linear weights as E4M3 with 128 x 128 ``weight_scale_inv`` (embeddings, norms, the
    router and ``lm_head`` as they were), within FP8's rounding of the weights; transformers loads the export
    (``FineGrainedFP8Config(dequantize=True)``) to the same weights our import gives, ``fp8 * scale_inv`` exactly,
    and exporting that again writes the same values."""
    hf_to_mg(deepseek_fp8["plain"], str(tmp_path / "mg"), 2)
    mg_to("hf", str(tmp_path / "mg"), str(tmp_path / "fp8"), "--save-hf-fp8")
    exported, plain = read_safetensors(str(tmp_path / "fp8")), read_safetensors(deepseek_fp8["plain"])
    assert read_json(str(tmp_path / "fp8" / "config.json"))["quantization_config"] == {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    quantised = sorted(name for name in exported if name + "_scale_inv" in exported)
    assert "model.layers.0.self_attn.kv_a_proj_with_mqa.weight" in quantised
    assert not [name for name in quantised if any(part in name for part in ("embed", "norm", "lm_head", "gate."))]
    assert "model.layers.1.mlp.gate.weight" in exported and exported["model.layers.1.mlp.gate.weight"].dtype == \
        torch.float32
    dequantised = {}
    for name in quantised:
        assert exported[name].dtype == torch.float8_e4m3fn
        assert exported[name].float().abs().max() == 448.0  # a block's amax maps to E4M3's largest value
        dequantised[name] = quantized.dequantize_scaled_blocks(exported[name], exported[name + "_scale_inv"],
                                                               (128, 128))
        assert (dequantised[name] - plain[name]).abs().max() <= plain[name].abs().max() * 2.0 ** -4, name
    loaded = transformers.AutoModelForCausalLM.from_pretrained(  # as transformers (and servers) read the export
        str(tmp_path / "fp8"), quantization_config=transformers.FineGrainedFP8Config(dequantize=True),
        dtype=torch.float32).state_dict()
    compared = [name for name in quantised if name in loaded]  # transformers fuses the experts under other names
    assert len(compared) >= 10
    for name in compared:
        assert torch.equal(loaded[name], dequantised[name]), name
    hf_to_mg(str(tmp_path / "fp8"), str(tmp_path / "mg2"), 1)
    mg_to("hf", str(tmp_path / "mg2"), str(tmp_path / "hf2"))
    again = read_safetensors(str(tmp_path / "hf2"))
    for name, value in dequantised.items():
        assert torch.equal(again[name], value), name
    mg_to("hf", str(tmp_path / "mg2"), str(tmp_path / "fp8_again"), "--save-hf-fp8")
    second = read_safetensors(str(tmp_path / "fp8_again"))
    for name in quantised:
        assert torch.equal(second[name].view(torch.uint8), exported[name].view(torch.uint8)), name
        torch.testing.assert_close(second[name + "_scale_inv"], exported[name + "_scale_inv"], rtol=1.2e-7, atol=0)


def test_fp8_export_needs_an_hf_target(deepseek_fp8, tmp_path, capsys) -> None:
    expect_error(capsys, str(tmp_path / "out"), [*HF_MG, "--load-dir", deepseek_fp8["plain"], "--save-hf-fp8"],
                 "--save-hf-fp8", "--save-model-type hf")

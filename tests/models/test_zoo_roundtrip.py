"""HF -> mg at TP 2 x PP 2 -> HF is exact for every registered family.

Per family of ``mindspeed_llm.models.registry.FAMILIES`` (parametrised over
the registry through ``test_zoo_training.case_for``, so a new family without
a tiny HF case fails here too): the family's tiny random HF model (every
weight perturbed) is saved as sharded safetensors, converted in-process with
the production converter (``tools/convert_ckpt.py``) to TP 2 x PP 2 (an odd
layer count is split over the two stages with ``--num-layer-list``), and
converted back to HF. Every tensor of the written safetensors must equal the
input's (``torch.equal``, same names), and the written ``config.json`` must
load in ``transformers`` and give the original model's logits (max abs diff
<= 1e-6). Single process: conversion needs no process groups.

Every mixture-of-experts family also goes HF -> mg at TP 2 x PP 2 x EP 2 (rank directories
``mp_rank_TT_PPP_EEE``, each holding half of every MoE layer's experts) -> mg with whole experts spread
over TP 2 (``--target-expert-tensor-parallel-size 1``) -> mg at EP 1 -> HF, exactly.

    python -m pytest tests/models/test_zoo_roundtrip.py -q
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
import transformers

from tests.models.test_hf_parity import hf_logits
from mindspeed_llm.models.registry import IGNORED_HF_TENSORS, config_from_hf, get_family
from tests.models.test_zoo_parity import BASE, build_hf_model
from tests.models.test_zoo_training import FAMILY_NAMES, case_for
from tests.unit.test_convert_ckpt import read_safetensors
from tools.convert_ckpt import main as convert_main

TP, PP = 2, 2
LOGIT_TOLERANCE = 1e-6
SEQ, BATCH = 12, 2


def layer_split(num_layers: int, stages: int) -> List[str]:
    """``--num-layer-list`` flags spreading ``num_layers`` over ``stages`` when they do not divide evenly."""
    if num_layers % stages == 0:
        return []
    counts = [num_layers // stages + (1 if stage < num_layers % stages else 0) for stage in range(stages)]
    return ["--num-layer-list", ",".join(str(count) for count in counts)]


def convert(load_type: str, save_type: str, load_dir: str, save_dir: str, *flags: str) -> None:
    code = convert_main(["--load-model-type", load_type, "--save-model-type", save_type, "--load-dir", load_dir,
                         "--save-dir", save_dir, *flags])
    assert code == 0, f"convert_ckpt {load_type} -> {save_type} exited with {code}"


def causal_lm_class(hf_dir: str) -> type:
    """``AutoModelForCausalLM``, or the architecture ``config.json`` names when transformers' auto map lacks
    its config class (Emu3's text-only ``Emu3ForCausalLM``)."""
    config = transformers.AutoConfig.from_pretrained(hf_dir)
    if type(config) in transformers.AutoModelForCausalLM._model_mapping:
        return transformers.AutoModelForCausalLM
    return getattr(transformers, config.architectures[0])


def our_layer_count(model: transformers.PreTrainedModel, case: Tuple[str, str, Dict[str, Any], str]) -> int:
    """Our decoder's layers for the HF model (Bamba's and Granite-4's HF layer is two of ours)."""
    return config_from_hf(model.config.to_dict(), case[3]).num_layers


def test_every_family_has_a_case() -> None:
    for family in FAMILY_NAMES:
        case_for(family)  # asserts, naming the family, when its case is missing


def saved_as_written(hf_dir: str, case: Tuple[str, str, Dict[str, Any], str]) -> Dict[str, torch.Tensor]:
    """The tensors transformers saved in ``hf_dir``, under the names the converter writes: the family's own
    spelling where transformers saves another one it also reads (``Family.hf_tensor_aliases``), without the
    buffers that carry no weights (``IGNORED_HF_TENSORS``: MiniMax's fixed decays, recomputed on load), laid out
    as the published checkpoints are where transformers saves another layout (``Family.published_layout``)."""
    family = get_family(case[3])
    saved = {family.canonical_hf_name(name): tensor for name, tensor in read_safetensors(hf_dir).items()
             if not any(pattern.match(name) for pattern in IGNORED_HF_TENSORS)}
    if family.published_layout is None:
        return saved
    with open(os.path.join(hf_dir, "config.json")) as handle:
        return family.published_layout(saved, json.load(handle))


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_hf_tp2_pp2_hf_round_trip_is_exact(family: str, tmp_path) -> None:
    case = case_for(family)
    model = build_hf_model(case)
    hf_dir, mg_dir, out_dir = (str(tmp_path / name) for name in ("hf", "mg", "hf_out"))
    model.save_pretrained(hf_dir, max_shard_size="60KB")
    split = layer_split(our_layer_count(model, case), PP)
    convert("hf", "mg", hf_dir, mg_dir, "--model-type-hf", case[3], "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), *split)
    assert sorted(os.listdir(os.path.join(mg_dir, "release"))) == \
        [f"mp_rank_{t:02d}_{p:03d}" for t in range(TP) for p in range(PP)]
    convert("mg", "hf", mg_dir, out_dir)

    expected, written = saved_as_written(hf_dir, case), read_safetensors(out_dir)
    assert sorted(written) == sorted(expected), f"{family}: tensor names differ"
    for name, tensor in expected.items():
        assert written[name].dtype == tensor.dtype and torch.equal(written[name], tensor), f"{family}: {name}"

    reloaded = causal_lm_class(out_dir).from_pretrained(out_dir, dtype=torch.float32,
                                                        attn_implementation="eager").eval()
    assert type(reloaded) is type(model)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=generator)  # [b, s]
    diff = (hf_logits(reloaded, input_ids) - hf_logits(model, input_ids)).abs().max().item()
    assert diff <= LOGIT_TOLERANCE, f"{family}: reloaded HF logits differ by {diff}"



# Families whose config lists layer numbers (a window pattern, NoPE layers, a per-layer bias): inserting
# noop layers renumbers them, and each layer's behaviour must follow its weights.
LAYERED = ["gemma2", "smollm3", "gpt_neox_japanese", "cohere2", "minimax", "lfm3", "olmo_hybrid", "recurrent_gemma",
           "xlstm"]


@pytest.mark.parametrize("family", LAYERED)
def test_noop_layers_carry_per_layer_settings(family: str, tmp_path) -> None:
    from core.models.gpt_model import layout_state
    from tests.models.test_hf_parity import our_logits
    from tests.models.test_zoo_parity import load_ours

    case = case_for(family)
    model = build_hf_model(case)
    hf_dir, mg_dir, out_dir = (str(tmp_path / name) for name in ("hf", "mg", "hf_out"))
    model.save_pretrained(hf_dir)
    layers = model.config.num_hidden_layers
    convert("hf", "mg", hf_dir, mg_dir, "--model-type-hf", case[3], "--noop-layers", "0", "--num-layers",
            str(layers + 1))
    input_ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    expected = hf_logits(model, input_ids)
    ours = our_logits(load_ours(mg_dir, layout_state(1)), input_ids)
    diff = (ours - expected).abs().max().item()
    assert diff <= 1e-4, f"{family}: logits with a noop layer in front differ from transformers by {diff}"
    convert("mg", "hf", mg_dir, out_dir)
    reference, written = saved_as_written(hf_dir, case), read_safetensors(out_dir)
    assert sorted(written) == sorted(reference)
    assert all(torch.equal(written[name], tensor) for name, tensor in reference.items())
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
    diff = (hf_logits(reloaded, input_ids) - expected).abs().max().item()
    assert diff <= LOGIT_TOLERANCE, f"{family}: logits after the noop round trip differ by {diff}"


def _num_experts(family: str) -> int:
    """The experts of the family's tiny case (0: dense), from its config alone."""
    config_cls, _, overrides, name = case_for(family)
    hf = getattr(transformers, config_cls)(**{**BASE, **overrides}).to_dict()
    return config_from_hf(hf, name).num_experts or 0


MOE_FAMILY_NAMES = [family for family in FAMILY_NAMES if _num_experts(family) % 2 == 0 and _num_experts(family)]


def test_moe_families_exist() -> None:
    assert {"mixtral", "qwen3_moe"} <= set(MOE_FAMILY_NAMES)


@pytest.mark.parametrize("family", MOE_FAMILY_NAMES)
def test_hf_tp2_pp2_ep2_mg_ep1_hf_round_trip_is_exact(family: str, tmp_path) -> None:
    case = case_for(family)
    model = build_hf_model(case)
    hf_dir, ep2_dir, ep1_dir, out_dir = (str(tmp_path / name) for name in ("hf", "ep2", "ep1", "hf_out"))
    model.save_pretrained(hf_dir)
    convert("hf", "mg", hf_dir, ep2_dir, "--model-type-hf", case[3], "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--target-expert-parallel-size", "2",
            *layer_split(our_layer_count(model, case), PP))
    assert sorted(os.listdir(os.path.join(ep2_dir, "release"))) == \
        [f"mp_rank_{t:02d}_{p:03d}_{e:03d}" for t in range(TP) for p in range(PP) for e in range(2)]
    experts = _num_experts(family)
    stage = torch.load(os.path.join(ep2_dir, "release", "mp_rank_00_001_001", "model_optim_rng.pt"),
                       weights_only=True)
    fc1 = [v for k, v in stage["model"].items() if k.endswith("mlp.experts.linear_fc1.weight")]
    assert fc1 and all(t.shape[0] == experts // 2 for t in fc1)
    assert stage["args"].expert_model_parallel_size == 2
    whole_dir = str(tmp_path / "etp1")  # whole experts spread over TP 2 (EP 2 = TP 2 x 1)
    convert("mg", "mg", ep2_dir, whole_dir, "--target-tensor-parallel-size", "2", "--target-expert-parallel-size", "2",
            "--target-expert-tensor-parallel-size", "1")
    assert sorted(os.listdir(os.path.join(whole_dir, "release"))) == ["mp_rank_00", "mp_rank_01"]
    whole = torch.load(os.path.join(whole_dir, "release", "mp_rank_01", "model_optim_rng.pt"), weights_only=True)
    split_width = fc1[0].shape[1]  # the TP 2 shard of each expert's fc1 rows (EP 2 files above)
    fc1 = [v for k, v in whole["model"].items() if k.endswith("mlp.experts.linear_fc1.weight")]
    assert fc1 and all(t.shape[0] == experts // 2 and t.shape[1] == 2 * split_width for t in fc1)
    assert whole["args"].expert_tensor_parallel_size == 1
    convert("mg", "mg", whole_dir, ep1_dir)
    convert("mg", "hf", ep1_dir, out_dir)
    expected, written = saved_as_written(hf_dir, case), read_safetensors(out_dir)
    assert sorted(written) == sorted(expected), f"{family}: tensor names differ"
    for name, tensor in expected.items():
        assert torch.equal(written[name], tensor), f"{family}: {name}"

"""Megatron-LM checkpoints of DeepSeek Sparse Attention models (DeepSeek-V3.2: MoE + MLA + MTP + DSA).

A tiny DeepSeek-V3.2 (the DeepSeek-V3 of ``test_convert_megatron_mla.py`` with a lightning indexer in every layer,
its MTP module added the same way) is written by this file's own writer from the HF tensors, by megatron-core's DSA
layer spec (``get_dsa_module_spec_for_backend``: AbsorbedMLASelfAttention built from Transformer Engine's layers,
whose latent norms ``q_layernorm`` / ``kv_layernorm`` and input norm stay apart, the down projections whole on
every TP rank, and the indexer inside the core attention:
``self_attention.core_attention.indexer.{linear_wq_b, linear_wk, k_norm, linear_weights_proj}``, whole on every TP
rank), at TP2 PP2 EP2. HF -> Megatron gives exactly those files (the args name the variant and its indexer) and
-> HF is exact; those files -> HF give transformers' logits; the local layers are refused in one line (megatron-core
builds DSA from TE's layers only). The indexer's module names and shapes were checked against megatron-core 0.16.1's
DSAIndexer (built on the CPU with a stand-in for TE's Linear); its files, whose args lack
``dsa_indexer_rope_interleaved`` (0.16 rotates the indexer's last rope channels as its MLA does), are refused. The
files follow the current megatron-core's indexer (``dsa_indexer_rope_interleaved``, the rope channels first).

    python -m pytest tests/unit/test_convert_megatron_dsa.py -q
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import pytest
import torch

from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_errors import expect_error
from tests.unit.test_convert_megatron import DIVISIBLE_BY, PP, TP, convert, save_megatron_files
from tests.unit.test_convert_megatron_gdn import assert_converted_like, assert_same_tensors, saved_hf_model
from tests.unit.test_convert_megatron_mla import (HF_CONFIG, LAYERS, megatron_model, mla_megatron_args,
                                                  with_mtp_module)
from tests.unit.test_convert_megatron_moe import EP, ep_files

INDEX_HEADS, INDEX_DIM, INDEX_TOPK = 2, 12, 5
DSA_CONFIG = dict(HF_CONFIG, index_n_heads=INDEX_HEADS, index_head_dim=INDEX_DIM, index_topk=INDEX_TOPK)
INDEXER = {"wq_b": "linear_wq_b", "wk": "linear_wk", "k_norm": "k_norm", "weights_proj": "linear_weights_proj"}


@pytest.fixture(scope="module")
def deepseek32(tmp_path_factory) -> Dict[str, Any]:
    """The HF model, directory and tensors, its MTP module added as DeepSeek publishes it (transformers saves none)."""
    return with_mtp_module(saved_hf_model(str(tmp_path_factory.mktemp("deepseek_v32")), "DeepseekV32Config",
                                          "DeepseekV32ForCausalLM", DSA_CONFIG))


def to_megatron(hf_dir: str, out: str) -> None:
    """HF -> Megatron at TP2 PP2 EP2 with Transformer Engine's layers and grouped experts (DSA's spec)."""
    convert("hf", "megatron", hf_dir, out, "--target-tensor-parallel-size", str(TP), "--target-pipeline-parallel-size",
            str(PP), "--target-expert-parallel-size", str(EP), "--make-vocab-size-divisible-by", str(DIVISIBLE_BY),
            "--transformer-impl", "transformer_engine", "--moe-grouped-gemm")


def dsa_megatron_model(hf: Dict[str, torch.Tensor], padded: int) -> Dict[Tuple[int, int, int], Dict]:
    """(tp rank, stage, ep rank) -> Megatron's state dict by the DSA spec: the TE MLA layout of DeepSeek-V3's test
    with its latent norms unfused, no TE state for the core attention, and each layer's indexer (whole on every
    rank, with TE state for its three linears)."""
    models = megatron_model(hf, "te", padded)
    per_stage = LAYERS // PP
    for (_, stage, _), model in models.items():
        for name in list(model):
            for which in ("q", "kv"):
                if name.endswith(f"self_attention.linear_{which}_up_proj.layer_norm_weight"):
                    model[name.replace(f"linear_{which}_up_proj.layer_norm_weight", f"{which}_layernorm.weight")] = \
                        model.pop(name)
            if name.endswith("self_attention.core_attention._extra_state"):
                model.pop(name)
        prefixes = {f"decoder.layers.{local}.": stage * per_stage + local for local in range(per_stage)}
        if stage == PP - 1:
            prefixes["mtp.layers.0.mtp_model_layer."] = LAYERS
        for prefix, hf_layer in prefixes.items():
            for ours, theirs in INDEXER.items():
                for field in ("weight", "bias"):
                    key = f"model.layers.{hf_layer}.self_attn.indexer.{ours}.{field}"
                    if key in hf:
                        model[f"{prefix}self_attention.core_attention.indexer.{theirs}.{field}"] = hf[key].clone()
                if theirs != "k_norm":
                    model[f"{prefix}self_attention.core_attention.indexer.{theirs}._extra_state"] = \
                        torch.zeros(0, dtype=torch.uint8)
    return models


def padded_size() -> int:
    return -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP


def dsa_args(padded: int, **overrides: Any):
    return mla_megatron_args(padded, transformer_impl="transformer_engine", moe_grouped_gemm=True,
                             experimental_attention_variant="dsa",
                             dsa_indexer_n_heads=INDEX_HEADS, dsa_indexer_head_dim=INDEX_DIM,
                             dsa_indexer_topk=INDEX_TOPK, dsa_indexer_k_norm_epsilon=1e-6,
                             **{"dsa_indexer_rope_interleaved": False, **overrides})


def test_hf_to_megatron_is_megatron_cores_dsa_layout_and_back_is_exact(deepseek32, tmp_path) -> None:
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    to_megatron(deepseek32["hf_dir"], megatron)
    written = ep_files(megatron)
    args = written[(0, 0, 0)]["args"]
    for key, model in dsa_megatron_model(deepseek32["hf"], args.padded_vocab_size).items():
        assert sorted(written[key]["model"]) == sorted(model), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, written[key]["model"][name]), (key, name)
    assert (args.experimental_attention_variant, args.dsa_indexer_n_heads, args.dsa_indexer_head_dim,
            args.dsa_indexer_topk, args.dsa_indexer_topk_freq, args.dsa_indexer_rope_interleaved,
            args.dsa_indexer_k_norm_epsilon, args.dsa_indexer_scoring_relu) == \
        ("dsa", INDEX_HEADS, INDEX_DIM, INDEX_TOPK, 1, False, None, True)  # the k norm eps: norm_epsilon (1e-6)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(deepseek32["hf"], read_safetensors(back))


def test_megatron_dsa_checkpoint_to_hf_gives_transformers_logits(deepseek32, tmp_path) -> None:
    """Files written by megatron-core's DSA spec -> HF: every tensor, the indexers' and MTP's included, and
    transformers' logits (whose top-5 of the inputs drops keys)."""
    padded = padded_size()
    root = save_megatron_files(str(tmp_path / "megatron"), dsa_megatron_model(deepseek32["hf"], padded),
                               dsa_args(padded), ep=EP)
    out = str(tmp_path / "hf")
    convert("megatron", "hf", root, out, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf",
            "deepseek_v32")
    assert_converted_like(deepseek32, out)


def test_error_dsa_megatron(capsys, deepseek32, tmp_path) -> None:
    """Megatron-core builds DSA from Transformer Engine's layers only: the local layers are refused; an indexer
    without ReLU scoring is refused."""
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir",
                          deepseek32["hf_dir"], "--save-dir", str(tmp_path / "out"), "--transformer-impl", "local"],
                 "DeepSeek Sparse Attention", "--transformer-impl transformer_engine")
    padded = padded_size()
    root = save_megatron_files(str(tmp_path / "megatron"), dsa_megatron_model(deepseek32["hf"], padded),
                               dsa_args(padded, dsa_indexer_scoring_relu=False), ep=EP)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out2"), "--model-type-hf", "deepseek_v32"],
                 "args.dsa_indexer_scoring_relu = False")
    # megatron-core 0.16's indexer rotates its last rope channels as its MLA does (checked in its dsa.py): its files,
    # whose args do not name the indexer's RoPE, are refused rather than read with another rotation
    old = save_megatron_files(str(tmp_path / "megatron_016"), dsa_megatron_model(deepseek32["hf"], padded),
                              dsa_args(padded, dsa_indexer_rope_interleaved=None), ep=EP)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", old,
                          "--save-dir", str(tmp_path / "out3"), "--model-type-hf", "deepseek_v32"],
                 "args.dsa_indexer_rope_interleaved is missing")


def test_glm5_shared_top_k_layers_convert_without_indexers(tmp_path_factory, tmp_path) -> None:
    """GLM-5's cross-layer sharing (indexer_types full, shared, full, shared: Megatron-core's topk_freq 2): the
    sharing layers have no indexer tensors and no indexer TE state in the Megatron files, the args carry the
    pattern, and HF -> Megatron (TP2 PP2 EP2, each stage starting on a computing layer) -> HF is exact."""
    config = {key: value for key, value in DSA_CONFIG.items() if key != "num_nextn_predict_layers"}
    case = saved_hf_model(str(tmp_path_factory.mktemp("glm_moe_dsa")), "GlmMoeDsaConfig", "GlmMoeDsaForCausalLM",
                          dict(config, rms_norm_eps=1e-6, indexer_types=["full", "shared", "full", "shared"]))
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    to_megatron(case["hf_dir"], megatron)
    written = ep_files(megatron)
    args = written[(0, 0, 0)]["args"]
    assert (args.dsa_indexer_topk_freq, args.dsa_indexer_rope_interleaved) == (2, True)
    for (_, stage, _), files in written.items():
        names = files["model"]
        assert any(name.startswith("decoder.layers.0.self_attention.core_attention.indexer.") for name in names)
        assert not any(name.startswith("decoder.layers.1.self_attention.core_attention.indexer") for name in names)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(case["hf"], read_safetensors(back))

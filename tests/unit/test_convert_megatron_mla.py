"""Megatron-LM checkpoints of multi-latent attention models with multi-token prediction (DeepSeek-V3).

A tiny DeepSeek-V3 (MLA with q and kv latents and YaRN; a dense layer, then MoE layers of 8 experts behind a sigmoid
router with the expert bias, 4 groups and a scaling factor, and a shared expert; one MTP module, whose tensors this
file adds to the HF directory as DeepSeek-V3 publishes them since transformers saves none) is written by this file's
own writer from the HF tensors, by megatron-core's rules, at TP2 PP2 EP2: ``linear_q_down_proj``, ``q_layernorm``,
``linear_q_up_proj``, ``linear_kv_down_proj``, ``kv_layernorm``, ``linear_kv_up_proj`` and ``linear_proj`` (the down
projections' rows split over TP by the local spec's ColumnParallelLinear, whole under Transformer Engine, which fuses
the latent norms into the up projections as ``layer_norm_weight`` and keeps the input norm apart), the MTP module's
``enorm``, ``hnorm``, ``eh_proj`` (split over TP), ``final_layernorm`` and its layer under ``mtp_model_layer`` or
megatron-core 0.16's ``transformer_layer``, on the last stage, which holds the word embeddings too. Then HF -> Megatron gives exactly those files and ->
HF is exact; those files -> HF give transformers' logits; the args round trip; refusals are one line.
``scripts/megatron_core_parity.py mla`` loads such files into megatron-core 0.16.1 itself.

    python -m pytest tests/unit/test_convert_megatron_mla.py -q
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
from safetensors.torch import save_file

from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_errors import expect_error
from tests.unit.test_convert_megatron import DIVISIBLE_BY, PP, TP, convert, megatron_args, save_megatron_files
from tests.unit.test_convert_megatron_gdn import (assert_converted_like, assert_same_tensors, gated_fc1,
                                                  padded_vocab, saved_hf_model)
from tests.unit.test_convert_megatron_moe import EP, ep_files

LAYERS, HIDDEN, EXPERTS, Q_LORA, KV_LORA, ROPE = 4, 64, 8, 18, 24, 8  # q latent rows: not a multiple of 4
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
        "mscale": 0.8, "mscale_all_dim": 0.9, "beta_fast": 32.0, "beta_slow": 1.0}
HF_CONFIG = dict(hidden_size=HIDDEN, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=LAYERS,
                 num_attention_heads=4, num_key_value_heads=4, n_routed_experts=EXPERTS, n_shared_experts=1,
                 num_experts_per_tok=4, n_group=4, topk_group=2, first_k_dense_replace=1, q_lora_rank=Q_LORA,
                 kv_lora_rank=KV_LORA, qk_nope_head_dim=12, qk_rope_head_dim=ROPE, v_head_dim=10, vocab_size=101,
                 routed_scaling_factor=2.5, max_position_embeddings=256, rope_parameters=YARN,
                 num_nextn_predict_layers=1)
MTP_OWN = {"enorm.weight": (HIDDEN,), "hnorm.weight": (HIDDEN,), "eh_proj.weight": (HIDDEN, 2 * HIDDEN),
           "shared_head.norm.weight": (HIDDEN,)}
STYLES = {"local": ("local", False, "transformer_layer"), "te": ("transformer_engine", True, "mtp_model_layer")}


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory) -> Dict[str, Any]:
    """The HF model, directory and tensors, its MTP module added."""
    return with_mtp_module(saved_hf_model(str(tmp_path_factory.mktemp("deepseek_v3")), "DeepseekV3Config",
                                          "DeepseekV3ForCausalLM", HF_CONFIG))


def with_mtp_module(case: Dict[str, Any]) -> Dict[str, Any]:
    """``case`` (a :func:`saved_hf_model`) with an MTP module in its tensors and its directory, as DeepSeek publishes
    it (transformers saves none): layer ``LAYERS``, its own tensors, a transformer layer like the last decoder
    layer's, copies of the embeddings and head."""
    tensors, mtp, generator = case["hf"], f"model.layers.{LAYERS}.", torch.Generator().manual_seed(3)
    last = f"model.layers.{LAYERS - 1}."
    for name, tensor in list(tensors.items()):
        if name.startswith(last):
            tensors[mtp + name[len(last):]] = tensor + 0.01 * torch.randn(tensor.shape, generator=generator)
    for name, shape in MTP_OWN.items():
        tensors[mtp + name] = torch.randn(shape, generator=generator) * (0.1 if "norm" not in name else 1.0)
    tensors[mtp + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
    tensors[mtp + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    for file in os.listdir(case["hf_dir"]):
        if file.endswith(".safetensors") or file.endswith(".index.json"):
            os.remove(os.path.join(case["hf_dir"], file))
    save_file(tensors, os.path.join(case["hf_dir"], "model.safetensors"), metadata={"format": "pt"})
    return case


# --------------------------------------------------------------------------- megatron-core's rules, from HF names


def megatron_layer(hf: Dict[str, torch.Tensor], hf_layer: int, te: bool, experts: str) -> Tuple[Dict, List[str]]:
    """HF layer ``hf_layer`` as Megatron's layer-local names -> pieces per (TP, EP) rank (``ep * TP + tp``), and
    its TE modules."""
    prefix, attention = f"model.layers.{hf_layer}.", f"model.layers.{hf_layer}.self_attn."
    out: Dict[str, List[torch.Tensor]] = {}

    def replicated(name: str, tensor: torch.Tensor) -> None:
        out[name] = [tensor] * (TP * EP)

    def by_tp(name: str, pieces: List[torch.Tensor]) -> None:
        out[name] = [pieces[rank % TP] for rank in range(TP * EP)]

    replicated("input_layernorm.weight", hf[prefix + "input_layernorm.weight"])
    for ours, theirs, norm in (("linear_q_down_proj", "q_a_proj", None), ("linear_kv_down_proj", "kv_a_proj_with_mqa",
                                                                          None)):
        weight = hf[attention + theirs + ".weight"]  # local: ColumnParallelLinear rows; TE: TELinear, duplicated
        replicated(f"self_attention.{ours}.weight", weight) if te else \
            by_tp(f"self_attention.{ours}.weight", list(weight.chunk(TP)))
    for ours, theirs, norm in (("q", "q_b_proj", "q_a_layernorm"), ("kv", "kv_b_proj", "kv_a_layernorm")):
        by_tp(f"self_attention.linear_{ours}_up_proj.weight", list(hf[attention + theirs + ".weight"].chunk(TP)))
        replicated(f"self_attention.linear_{ours}_up_proj.layer_norm_weight" if te else
                   f"self_attention.{ours}_layernorm.weight", hf[attention + norm + ".weight"])
    by_tp("self_attention.linear_proj.weight", list(hf[attention + "o_proj.weight"].chunk(TP, 1)))
    modules = [f"self_attention.{name}" for name in ("linear_q_down_proj", "linear_q_up_proj", "linear_kv_down_proj",
                                                     "linear_kv_up_proj", "core_attention", "linear_proj")]
    mlp = prefix + "mlp."
    if hf_layer == 0:  # dense
        replicated("mlp.linear_fc1.layer_norm_weight" if te else "pre_mlp_layernorm.weight",
                   hf[prefix + "post_attention_layernorm.weight"])
        by_tp("mlp.linear_fc1.weight", gated_fc1(hf[mlp + "gate_proj.weight"], hf[mlp + "up_proj.weight"]))
        by_tp("mlp.linear_fc2.weight", list(hf[mlp + "down_proj.weight"].chunk(TP, 1)))
        return out, modules + ["mlp.linear_fc1", "mlp.linear_fc2"]
    replicated("pre_mlp_layernorm.weight", hf[prefix + "post_attention_layernorm.weight"])
    replicated("mlp.router.weight", hf[mlp + "gate.weight"])
    replicated("mlp.router.expert_bias", hf[mlp + "gate.e_score_correction_bias"])
    gate, up, down = (torch.stack([hf[mlp + f"experts.{e}.{p}_proj.weight"] for e in range(EXPERTS)])
                      for p in ("gate", "up", "down"))
    local = EXPERTS // EP
    for rank in range(TP * EP):
        mine, tp = slice(rank // TP * local, (rank // TP + 1) * local), rank % TP
        fc1 = torch.cat([gate[mine].chunk(TP, 1)[tp], up[mine].chunk(TP, 1)[tp]], dim=1)
        fc2 = down[mine].chunk(TP, 2)[tp]
        names = ([f"mlp.experts.linear_fc1.weight{i}" for i in range(local)] +
                 [f"mlp.experts.linear_fc2.weight{i}" for i in range(local)]) if experts == "te_grouped" else \
            ([f"mlp.experts.local_experts.{i}.linear_fc1.weight" for i in range(local)] +
             [f"mlp.experts.local_experts.{i}.linear_fc2.weight" for i in range(local)])
        for name, tensor in zip(names, list(fc1) + list(fc2)):
            out.setdefault(name, [None] * (TP * EP))[rank] = tensor
    shared = mlp + "shared_experts."
    by_tp("mlp.shared_experts.linear_fc1.weight", gated_fc1(hf[shared + "gate_proj.weight"],
                                                           hf[shared + "up_proj.weight"]))
    by_tp("mlp.shared_experts.linear_fc2.weight", list(hf[shared + "down_proj.weight"].chunk(TP, 1)))
    experts_te = (["mlp.experts.linear_fc1", "mlp.experts.linear_fc2"] if experts == "te_grouped" else
                  [f"mlp.experts.local_experts.{i}.linear_{w}" for i in range(local) for w in ("fc1", "fc2")])
    return out, modules + experts_te + ["mlp.shared_experts.linear_fc1", "mlp.shared_experts.linear_fc2"]


def megatron_model(hf: Dict[str, torch.Tensor], style: str, padded: int) -> Dict[Tuple[int, int, int], Dict]:
    """(tp rank, stage, ep rank) -> Megatron's state dict of the HF DeepSeek-V3 tensors ``hf`` at TP2 PP2 EP2."""
    impl, grouped, mtp_layer = STYLES[style]
    te, experts = impl == "transformer_engine", "te_grouped" if grouped else "sequential"
    models = {(rank, stage, ep): {} for rank in range(TP) for stage in range(PP) for ep in range(EP)}

    def put(stage: int, name: str, pieces: List[torch.Tensor]) -> None:  # a piece per (TP, EP) rank
        for (rank, piece_stage, ep), model in models.items():
            if piece_stage == stage:
                model[name] = pieces[ep * TP + rank].clone()

    def put_layer(stage: int, theirs: str, hf_layer: int) -> None:
        pieces, modules = megatron_layer(hf, hf_layer, te, experts)
        for name, per_rank in pieces.items():
            put(stage, theirs + name, per_rank)
        for module in modules if te else ():
            put(stage, f"{theirs}{module}._extra_state", [torch.zeros(0, dtype=torch.uint8)] * (TP * EP))

    def by_tp(tensors: List[torch.Tensor]) -> List[torch.Tensor]:
        return [tensors[rank % TP] for rank in range(TP * EP)]

    for stage in (0, PP - 1):  # the MTP modules read the word embeddings on the last stage too
        put(stage, "embedding.word_embeddings.weight", by_tp(padded_vocab(hf["model.embed_tokens.weight"], padded)))
    for layer in range(LAYERS):
        stage, local = divmod(layer, LAYERS // PP)
        put_layer(stage, f"decoder.layers.{local}.", layer)
    mtp = f"model.layers.{LAYERS}."
    for name in ("enorm.weight", "hnorm.weight"):
        put(PP - 1, f"mtp.layers.0.{name}", [hf[mtp + name]] * (TP * EP))
    put(PP - 1, "mtp.layers.0.eh_proj.weight", by_tp(list(hf[mtp + "eh_proj.weight"].chunk(TP))))
    put(PP - 1, "mtp.layers.0.final_layernorm.weight", [hf[mtp + "shared_head.norm.weight"]] * (TP * EP))
    put_layer(PP - 1, f"mtp.layers.0.{mtp_layer}.", LAYERS)
    if te:
        put(PP - 1, "mtp.layers.0.eh_proj._extra_state", [torch.zeros(0, dtype=torch.uint8)] * (TP * EP))
    put(PP - 1, "decoder.final_layernorm.weight", [hf["model.norm.weight"]] * (TP * EP))
    put(PP - 1, "output_layer.weight", by_tp(padded_vocab(hf["lm_head.weight"], padded)))
    return models


def mla_megatron_args(padded: int, **overrides: Any) -> argparse.Namespace:
    """``args`` of a Megatron-LM run of the tiny DeepSeek-V3 (its names; MLA's default rope_type, yarn)."""
    config = dict(num_layers=LAYERS, hidden_size=HIDDEN, ffn_hidden_size=96, num_attention_heads=4,
                  num_query_groups=4, kv_channels=16, max_position_embeddings=256, norm_epsilon=1e-6,
                  add_qkv_bias=False, rotary_base=10000.0, untie_embeddings_and_output_weights=True)
    values = dict(multi_latent_attention=True, qk_layernorm=True, q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA,
                  qk_head_dim=12, qk_pos_emb_head_dim=ROPE, v_head_dim=10, rope_type=None, rotary_scaling_factor=4.0,
                  mscale=0.8, mscale_all_dim=0.9, original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0,
                  num_experts=EXPERTS, moe_router_topk=4, moe_ffn_hidden_size=32, moe_router_score_function="sigmoid",
                  moe_router_enable_expert_bias=True, moe_router_num_groups=4, moe_router_group_topk=2,
                  moe_router_topk_scaling_factor=2.5, moe_shared_expert_intermediate_size=32,
                  moe_layer_freq=[0, 1, 1, 1], mtp_num_layers=1, expert_model_parallel_size=EP,
                  hidden_dropout=0.0, attention_dropout=0.0)
    return megatron_args(config, padded, **{**values, **overrides})


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("style", sorted(STYLES))
def test_hf_to_megatron_is_megatron_cores_mla_and_mtp_layout_and_back_is_exact(deepseek, tmp_path, style: str) -> None:
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    impl, grouped, mtp_layer = STYLES[style]
    convert("hf", "megatron", deepseek["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--target-expert-parallel-size", str(EP),
            "--make-vocab-size-divisible-by", str(DIVISIBLE_BY), "--transformer-impl", impl,
            "--megatron-mtp-layer-name", mtp_layer, *(["--moe-grouped-gemm"] if grouped else []))
    written = ep_files(megatron)
    args = written[(0, 0, 0)]["args"]
    for key, model in megatron_model(deepseek["hf"], style, args.padded_vocab_size).items():
        assert sorted(written[key]["model"]) == sorted(model), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, written[key]["model"][name]), (key, name)
    assert (args.multi_latent_attention, args.qk_layernorm, args.q_lora_rank, args.kv_lora_rank, args.qk_head_dim,
            args.qk_pos_emb_head_dim, args.v_head_dim, args.rotary_interleaved) == \
        (True, True, Q_LORA, KV_LORA, 12, ROPE, 10, False)
    assert (args.rope_type, args.rotary_scaling_factor, args.mscale, args.mscale_all_dim,
            args.original_max_position_embeddings, args.beta_fast, args.beta_slow, args.mtp_num_layers) == \
        ("yarn", 4.0, 0.8, 0.9, 64, 32.0, 1.0, 1)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(deepseek["hf"], read_safetensors(back))


@pytest.mark.parametrize("style", sorted(STYLES))
def test_megatron_checkpoint_to_hf_gives_transformers_logits(deepseek, tmp_path, style: str) -> None:
    """Files written by megatron-core's rules (rope_type unset: MLA's yarn) -> HF: every tensor, MTP's included,
    and transformers' logits."""
    padded = -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    impl, grouped, _ = STYLES[style]
    args = mla_megatron_args(padded, transformer_impl=impl, moe_grouped_gemm=grouped)
    root = save_megatron_files(str(tmp_path / "megatron"), megatron_model(deepseek["hf"], style, padded), args, ep=EP)
    out = str(tmp_path / "hf")
    convert("megatron", "hf", root, out, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf",
            "deepseek_v3")
    assert_converted_like(deepseek, out)


# --------------------------------------------------------------------------- args and refusals


def test_mla_args_round_trip() -> None:
    """config -> Megatron args -> config keeps MLA's sizes, YaRN and MTP; without YaRN rope_type is 'rope' (MLA's
    default in Megatron is yarn), and q without a latent reads back."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    base = dict(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96, vocab_size=128,
                add_bias_linear=False, activation="swiglu", multi_latent_attention=True, kv_lora_rank=24,
                qk_head_dim=12, qk_pos_emb_head_dim=8, v_head_dim=10, rope_interleaved=True,
                untie_embeddings_and_output_weights=True)
    for extra, rope_type in ((dict(q_lora_rank=20, rope_scaling_type="yarn", rope_scaling_factor=40.0,
                                   rope_original_max_position_embeddings=4096, rope_scaling_mscale=1.0,
                                   rope_scaling_mscale_all_dim=1.0, rope_scaling_beta_fast=16.0, mtp_num_layers=2),
                              "yarn"),
                             (dict(), "rope")):
        config = TransformerConfig(**base, **extra)
        args = megatron_format.args_from_config(config)
        assert args["rope_type"] == rope_type and args["qk_layernorm"] and not args["rotary_interleaved"]
        back = TransformerConfig(**megatron_format.config_from_args(argparse.Namespace(
            **args, tensor_model_parallel_size=1)))
        for name in (*megatron_format.MLA_FIELDS, "rope_scaling_type", "rope_scaling_factor", "rope_interleaved",
                     "rope_original_max_position_embeddings", "mtp_num_layers", "qk_norm"):
            assert getattr(back, name) == getattr(config, name), (extra, name)


@pytest.mark.parametrize("extra, fragment", [
    (dict(rope_interleaved=False), "rope_interleaved = False"),
    (dict(mla_latent_norm_epsilon=1e-5), "mla_latent_norm_epsilon = 1e-05"),
    (dict(rope_scaling_type="linear", rope_scaling_factor=2.0), "rope_scaling_type = 'linear'")])
def test_error_mla_megatron_cannot_compute(extra: Dict[str, Any], fragment: str) -> None:
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    config = TransformerConfig(**{**dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128,
                                         add_bias_linear=False, multi_latent_attention=True, kv_lora_rank=24,
                                         qk_head_dim=12, qk_pos_emb_head_dim=8, v_head_dim=10, rope_interleaved=True),
                                  **extra})
    with pytest.raises(megatron_format.MegatronFormatError, match=fragment):
        megatron_format.args_from_config(config)


def test_error_mla_megatron_files(capsys, deepseek, tmp_path) -> None:
    """MLA without its latent norms (qk_layernorm off) is refused; local layers at a TP that does not divide the down
    projections' rows are refused (TE keeps them whole); --megatron-mtp-layer-name needs a megatron target."""
    padded = -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    root = save_megatron_files(str(tmp_path / "megatron"), megatron_model(deepseek["hf"], "local", padded),
                               mla_megatron_args(padded, qk_layernorm=False), ep=EP)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "mg", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out"), "--model-type-hf", "deepseek_v3"],
                 "args.multi_latent_attention without args.qk_layernorm")
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir",
                          deepseek["hf_dir"], "--save-dir", str(tmp_path / "out"), "--target-tensor-parallel-size", "4"],
                 "--target-tensor-parallel-size 4", "18 rows", "linear_q_down_proj",
                 "--transformer-impl transformer_engine")
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", deepseek["hf_dir"],
                          "--save-dir", str(tmp_path / "out"), "--megatron-mtp-layer-name", "transformer_layer"],
                 "--megatron-mtp-layer-name")


def test_non_finite_split_down_projection_is_named_in_its_rank_file(capsys, deepseek, tmp_path) -> None:
    """A NaN in TP rank 1's rows of a local MLA down projection is refused naming that tensor in rank 1's file."""
    padded = -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    models = megatron_model(deepseek["hf"], "local", padded)
    poisoned = "decoder.layers.1.self_attention.linear_q_down_proj.weight"
    models[(1, 0, 0)][poisoned][0, 0] = float("nan")
    root = save_megatron_files(str(tmp_path / "megatron"), models, mla_megatron_args(padded), ep=EP)
    line = expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "hf", "--load-dir", root,
                                 "--save-dir", str(tmp_path / "out"), "--model-type-hf", "deepseek_v3"],
                        f"tensor '{poisoned}'", "holds 1 NaN/Inf")
    assert "mp_rank_01_000_000" in line, line

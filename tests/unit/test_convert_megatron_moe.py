"""Megatron-LM checkpoints of mixture-of-experts models, with expert-parallel rank files (``mp_rank_TT_PPP_EEE``).

A tiny Qwen3-Next (the gated DeltaNet and gated attention layers of ``test_convert_megatron_gdn``; a dense first layer, then MoE layers of 4 experts, top
2 renormalised, with a gated shared expert) is written by this file's own writer from the HF tensors, by
Megatron-core's rules, at TP2 PP2 EP2: ``mlp.router.weight``, each EP rank's two experts as SequentialMLP
(``local_experts.i.linear_fc1.weight``), TEGroupedMLP (``linear_fc1.weight<i>``) or the legacy GroupedMLP of
MindSpeed-LLM (``weight1`` [h, E x fc1 rows] holding fc1_i^T in turn, ``weight2``), each expert's fc1 rows of TP
rank t ``[gate_t; up_t]``, ``mlp.shared_experts.*`` and its ``gate_weight``, the MoE layer's norm unfused with TE,
``moe_layer_freq`` as the per-layer list. Then:

* HF -> Megatron (each expert layout) gives exactly those files and -> HF is exact;
* those files -> HF give transformers' logits (Megatron's post-softmax top-k, and MindSpeed's spelling of the
  same routing: pre-softmax with ``norm_topk_prob``);
* a Nemotron-H with MoE ('E') layers (sigmoid scores, the expert bias, expert groups, a scaling factor, an ungated
  shared expert) converts to Megatron's hybrid layout and back exactly;
* routing and layer placement map to Megatron's meaning and back, and what Megatron's router does not compute is
  refused in one line.

    python -m pytest tests/unit/test_convert_megatron_moe.py -q
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
import transformers

from core.checkpointing import TRACKER_FILENAME, checkpoint_file, map_foreign_file
from tests.unit.test_convert_ckpt import read_safetensors
from tests.unit.test_convert_errors import expect_error
from tests.unit.test_convert_megatron import (DIVISIBLE_BY, PP, TP, convert, hf_config_json, megatron_args,
                                             save_megatron_files)
from tests.unit.test_convert_megatron_gdn import (KEY_DIM, KEY_HEADS, LAYER_TYPES, VALUE_DIM, VALUE_HEADS,
                                                  assert_converted_like, assert_same_tensors, gated_fc1, padded_vocab, put_mixer,
                                                  saved_hf_model)

EP = 2
EXPERTS, EXPERT_FFN, SHARED_FFN = 4, 32, 48
HF_CONFIG = dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4, head_dim=16,
                 linear_conv_kernel_dim=4, linear_key_head_dim=KEY_DIM, linear_value_head_dim=VALUE_DIM,
                 linear_num_key_heads=KEY_HEADS, linear_num_value_heads=VALUE_HEADS, vocab_size=101,
                 num_hidden_layers=len(LAYER_TYPES), layer_types=LAYER_TYPES, num_experts=EXPERTS,
                 num_experts_per_tok=2, moe_intermediate_size=EXPERT_FFN, shared_expert_intermediate_size=SHARED_FFN,
                 norm_topk_prob=True, mlp_only_layers=[0])
MOE_MARKS = [0, 1, 1, 1]
LAYOUTS = {  # id -> (transformer_impl, --moe-grouped-gemm)
    "local_sequential": ("local", False), "te_grouped": ("transformer_engine", True),
    "local_grouped": ("local", True), "te_sequential": ("transformer_engine", False)}


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory) -> Dict[str, Any]:
    return saved_hf_model(str(tmp_path_factory.mktemp("qwen3_next")), "Qwen3NextConfig", "Qwen3NextForCausalLM",
                          HF_CONFIG)


# --------------------------------------------------------------------------- Megatron-core's rules, from HF names


def gdn_in_proj(hf: Dict[str, torch.Tensor], prefix: str, rank: int) -> torch.Tensor:
    """Rank ``rank``'s GatedDeltaNet in_proj [q_t; k_t; v_t; z_t; b_t; a_t] from Qwen3-Next's per-key-head groups."""
    ratio = VALUE_HEADS // KEY_HEADS
    qkvz = hf[prefix + "in_proj_qkvz.weight"].reshape(KEY_HEADS, 2 * KEY_DIM + 2 * ratio * VALUE_DIM, -1)
    ba = hf[prefix + "in_proj_ba.weight"].reshape(KEY_HEADS, 2 * ratio, -1)
    mine = slice(rank * KEY_HEADS // TP, (rank + 1) * KEY_HEADS // TP)  # this rank's key heads (and their groups)
    bounds = [0, KEY_DIM, 2 * KEY_DIM, 2 * KEY_DIM + ratio * VALUE_DIM, 2 * KEY_DIM + 2 * ratio * VALUE_DIM]
    parts = [qkvz[mine, bounds[i]:bounds[i + 1]] for i in range(4)] + [ba[mine, :ratio], ba[mine, ratio:]]
    return torch.cat([part.reshape(-1, part.size(-1)) for part in parts])


def expert_entries(layout: str, fc1: torch.Tensor, fc2: torch.Tensor) -> Dict[str, torch.Tensor]:
    """One (TP, EP) rank's experts, ``fc1`` [E, rows, h] and ``fc2`` [E, h, cols], under Megatron's names."""
    if layout.endswith("sequential"):
        return {**{f"mlp.experts.local_experts.{i}.linear_fc1.weight": w for i, w in enumerate(fc1)},
                **{f"mlp.experts.local_experts.{i}.linear_fc2.weight": w for i, w in enumerate(fc2)}}
    if layout == "te_grouped":
        return {**{f"mlp.experts.linear_fc1.weight{i}": w for i, w in enumerate(fc1)},
                **{f"mlp.experts.linear_fc2.weight{i}": w for i, w in enumerate(fc2)}}
    # GroupedMLP: weight1 is the memory of [E, h, rows] (x @ weight1.view(E, h, -1)[e]), weight2 of [E, cols, h]
    weight1 = torch.stack([w.t() for w in fc1]).contiguous().view(fc1.size(2), -1)
    weight2 = torch.stack([w.t() for w in fc2]).contiguous().view(-1, fc2.size(1))
    return {"mlp.experts.weight1": weight1, "mlp.experts.weight2": weight2}


def megatron_model(hf: Dict[str, torch.Tensor], layout: str, padded: int) -> Dict[Tuple[int, int, int], Dict]:
    """(tp rank, stage, ep rank) -> Megatron's state dict of the HF Qwen3-Next tensors ``hf`` at TP2 PP2 EP2."""
    te = layout.startswith("te")
    models = {(rank, stage, ep): {} for rank in range(TP) for stage in range(PP) for ep in range(EP)}
    per_stage = len(LAYER_TYPES) // PP

    def put(stage: int, name: str, pieces: List[torch.Tensor], by_ep: bool = False) -> None:
        for rank in range(TP):
            for ep in range(EP):
                models[(rank, stage, ep)][name] = pieces[ep * TP + rank if by_ep else rank].clone()

    put(0, "embedding.word_embeddings.weight", padded_vocab(hf["model.embed_tokens.weight"], padded))
    for layer, kind in enumerate(LAYER_TYPES):
        stage, local = divmod(layer, per_stage)
        hf_prefix, theirs = f"model.layers.{layer}.", f"decoder.layers.{local}."
        modules = put_mixer(put, hf, layer, stage, theirs, kind, te, gdn_in_proj)
        mlp = hf_prefix + "mlp."
        if not MOE_MARKS[layer]:
            put(stage, theirs + ("mlp.linear_fc1.layer_norm_weight" if te else "pre_mlp_layernorm.weight"),
                [hf[hf_prefix + "post_attention_layernorm.weight"]] * TP)
            put(stage, theirs + "mlp.linear_fc1.weight", gated_fc1(hf[mlp + "gate_proj.weight"],
                                                                    hf[mlp + "up_proj.weight"]))
            put(stage, theirs + "mlp.linear_fc2.weight", list(hf[mlp + "down_proj.weight"].chunk(TP, 1)))
            modules += ["mlp.linear_fc1", "mlp.linear_fc2"]
        else:  # the norm stays a module of its own: Megatron fuses none into an MoE layer
            put(stage, theirs + "pre_mlp_layernorm.weight", [hf[hf_prefix + "post_attention_layernorm.weight"]] * TP)
            put(stage, theirs + "mlp.router.weight", [hf[mlp + "gate.weight"]] * TP)
            gate, up, down = (torch.stack([hf[mlp + f"experts.{e}.{p}_proj.weight"] for e in range(EXPERTS)])
                              for p in ("gate", "up", "down"))  # [E, f, h], [E, f, h], [E, h, f] (saved per expert)
            per_rank = {}
            for ep in range(EP):
                mine = slice(ep * EXPERTS // EP, (ep + 1) * EXPERTS // EP)
                for rank in range(TP):
                    fc1 = torch.cat([gate[mine].chunk(TP, 1)[rank], up[mine].chunk(TP, 1)[rank]], dim=1)
                    per_rank[ep * TP + rank] = expert_entries(layout, fc1, down[mine].chunk(TP, 2)[rank])
            for name in per_rank[0]:
                put(stage, theirs + name, [per_rank[r][name] for r in range(TP * EP)], by_ep=True)
            shared = mlp + "shared_expert."
            put(stage, theirs + "mlp.shared_experts.linear_fc1.weight",
                gated_fc1(hf[shared + "gate_proj.weight"], hf[shared + "up_proj.weight"]))
            put(stage, theirs + "mlp.shared_experts.linear_fc2.weight",
                list(hf[shared + "down_proj.weight"].chunk(TP, 1)))
            put(stage, theirs + "mlp.shared_experts.gate_weight", [hf[mlp + "shared_expert_gate.weight"]] * TP)
            modules += (["mlp.experts.linear_fc1", "mlp.experts.linear_fc2"] if layout == "te_grouped" else
                        [f"mlp.experts.local_experts.{i}.linear_{w}" for i in range(EXPERTS // EP)
                         for w in ("fc1", "fc2")])
            modules += ["mlp.shared_experts.linear_fc1", "mlp.shared_experts.linear_fc2"]
        if te:
            for module in modules:
                put(stage, theirs + module + "._extra_state", [torch.zeros(0, dtype=torch.uint8)] * TP)
    put(PP - 1, "decoder.final_layernorm.weight", [hf["model.norm.weight"]] * TP)
    put(PP - 1, "output_layer.weight", padded_vocab(hf["lm_head.weight"], padded))
    return models


def moe_megatron_args(padded: int, **overrides: Any) -> argparse.Namespace:
    """``args`` of a Megatron-LM run of the tiny Qwen3-Next (its names)."""
    config = dict(num_layers=len(LAYER_TYPES), hidden_size=64, ffn_hidden_size=96, num_attention_heads=8,
                  num_query_groups=4, kv_channels=16, max_position_embeddings=32768, norm_epsilon=1e-6,
                  add_qkv_bias=False, rotary_base=10000.0, untie_embeddings_and_output_weights=True)
    values = dict(apply_layernorm_1p=True, qk_layernorm=True, rotary_percent=0.25, attention_output_gate=True,
                  experimental_attention_variant="gated_delta_net", linear_attention_freq=[1, 0, 1, 1],
                  linear_conv_kernel_dim=4, linear_key_head_dim=KEY_DIM, linear_value_head_dim=VALUE_DIM,
                  linear_num_key_heads=KEY_HEADS, linear_num_value_heads=VALUE_HEADS, num_experts=EXPERTS,
                  moe_router_topk=2, moe_ffn_hidden_size=EXPERT_FFN, moe_shared_expert_intermediate_size=SHARED_FFN,
                  moe_shared_expert_gate=True, moe_router_pre_softmax=False, moe_layer_freq=MOE_MARKS,
                  moe_aux_loss_coeff=0.001, expert_model_parallel_size=EP, expert_tensor_parallel_size=TP,
                  hidden_dropout=0.0, attention_dropout=0.0)
    return megatron_args(config, padded, **{**values, **overrides})


def write_moe_megatron(root: str, hf: Dict[str, torch.Tensor], layout: str, **arg_overrides: Any) -> str:
    padded = -(-HF_CONFIG["vocab_size"] // (DIVISIBLE_BY * TP)) * DIVISIBLE_BY * TP
    impl, grouped = LAYOUTS[layout]
    args = moe_megatron_args(padded, transformer_impl=impl, moe_grouped_gemm=grouped, **arg_overrides)
    return save_megatron_files(root, megatron_model(hf, layout, padded), args, ep=EP)


def ep_files(root: str) -> Dict[Tuple[int, int, int], Dict[str, Any]]:
    """(tp rank, stage, ep rank) -> checkpoint of a Megatron TP2 PP2 EP2 checkpoint (release or iteration)."""
    iteration = open(os.path.join(root, TRACKER_FILENAME)).read().strip()
    number = None if iteration == "release" else int(iteration)
    return {(rank, stage, ep): map_foreign_file(checkpoint_file(root, number, rank, stage, PP, release=number is None,
                                                                ep_rank=ep, ep_size=EP))
            for rank in range(TP) for stage in range(PP) for ep in range(EP)}


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_hf_to_megatron_is_megatron_cores_expert_layout_and_back_is_exact(qwen3_next, tmp_path, layout: str) -> None:
    megatron, back = str(tmp_path / "megatron"), str(tmp_path / "hf")
    impl, grouped = LAYOUTS[layout]
    convert("hf", "megatron", qwen3_next["hf_dir"], megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--target-expert-parallel-size", str(EP),
            "--make-vocab-size-divisible-by", str(DIVISIBLE_BY), "--transformer-impl", impl,
            *(["--moe-grouped-gemm"] if grouped else []))
    written = ep_files(megatron)
    args = written[(0, 0, 0)]["args"]
    for key, model in megatron_model(qwen3_next["hf"], layout, args.padded_vocab_size).items():
        assert sorted(written[key]["model"]) == sorted(model), key
        for name, tensor in model.items():
            if not name.endswith("_extra_state"):
                assert torch.equal(tensor, written[key]["model"][name]), (key, name)
    assert (args.num_experts, args.moe_router_topk, args.moe_ffn_hidden_size, args.moe_layer_freq,
            args.moe_shared_expert_intermediate_size, args.moe_shared_expert_gate) == \
        (EXPERTS, 2, EXPERT_FFN, MOE_MARKS, SHARED_FFN, True)
    # softmax over all experts, top-2 renormalised: Megatron's default (softmax over the top-2 logits)
    assert (args.moe_router_pre_softmax, args.norm_topk_prob, args.moe_router_score_function) == \
        (False, True, "softmax")
    assert (args.expert_model_parallel_size, args.expert_tensor_parallel_size, args.moe_grouped_gemm) == \
        (EP, TP, grouped)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(qwen3_next["hf"], read_safetensors(back))


@pytest.mark.parametrize("layout, routing", [
    ("te_grouped", dict()),  # Megatron's: softmax over the top-k logits
    ("local_grouped", dict(moe_router_pre_softmax=True, norm_topk_prob=True))])  # MindSpeed's spelling of it
def test_megatron_checkpoint_to_hf_gives_transformers_logits(qwen3_next, tmp_path, layout: str,
                                                             routing: Dict[str, Any]) -> None:
    root = write_moe_megatron(str(tmp_path / "megatron"), qwen3_next["hf"], layout, **routing)
    out = str(tmp_path / "hf")
    convert("megatron", "hf", root, out, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf",
            "qwen3_next")
    assert_converted_like(qwen3_next, out)


def test_megatron_to_mg_at_another_ep_and_back(qwen3_next, tmp_path) -> None:
    """Megatron EP2 (SequentialMLP) -> ours at EP 1 -> Megatron EP2 with TEGroupedMLP -> HF: every tensor kept."""
    root = write_moe_megatron(str(tmp_path / "megatron"), qwen3_next["hf"], "local_sequential")
    mg, again, back = str(tmp_path / "mg"), str(tmp_path / "again"), str(tmp_path / "hf")
    convert("megatron", "mg", root, mg, "--vocab-size", str(HF_CONFIG["vocab_size"]), "--model-type-hf", "qwen3_next")
    convert("mg", "megatron", mg, again, "--target-tensor-parallel-size", str(TP), "--target-pipeline-parallel-size",
            str(PP), "--target-expert-parallel-size", str(EP), "--transformer-impl", "transformer_engine",
            "--moe-grouped-gemm")
    assert "decoder.layers.1.mlp.experts.linear_fc2.weight1" in ep_files(again)[(1, 1, 1)]["model"]
    convert("megatron", "hf", again, back)
    assert_same_tensors(qwen3_next["hf"], read_safetensors(back))


# --------------------------------------------------------------------------- a hybrid MoE: Nemotron-H with 'E' layers

NEMOTRON_MOE = dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4, head_dim=8,
                    mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=8, chunk_size=5, conv_kernel=4,
                    vocab_size=101, max_position_embeddings=256, time_step_limit=(0.001, float("inf")),
                    layers_block_type=["mamba", "moe", "attention", "moe"], n_routed_experts=4, num_experts_per_tok=2,
                    moe_intermediate_size=32, moe_shared_expert_intermediate_size=48, n_group=2, topk_group=1,
                    routed_scaling_factor=2.5, norm_topk_prob=True)


def test_hybrid_moe_hf_to_megatron_and_back_is_exact(tmp_path) -> None:
    """'M E * E' at TP2 PP2 EP2 (TE): Megatron's hybrid names for the 'E' layers (norm unfused, router weight and
    expert bias, experts per EP rank, ungated shared expert), sigmoid routing args, and back to HF exactly."""
    config = transformers.NemotronHConfig(**NEMOTRON_MOE, dtype="float32")
    torch.manual_seed(0)
    model = transformers.NemotronHForCausalLM(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
        for layer in (1, 3):  # a selection bias that matters
            model.model.layers[layer].mixer.gate.e_score_correction_bias.copy_(torch.randn(4) * 0.1)
    hf_dir, megatron, back = str(tmp_path / "hf"), str(tmp_path / "megatron"), str(tmp_path / "back")
    model.save_pretrained(hf_dir)
    hf = read_safetensors(hf_dir)
    convert("hf", "megatron", hf_dir, megatron, "--target-tensor-parallel-size", str(TP),
            "--target-pipeline-parallel-size", str(PP), "--target-expert-parallel-size", str(EP),
            "--transformer-impl", "transformer_engine")
    files = ep_files(megatron)
    stage0 = files[(1, 0, 1)]["model"]  # TP rank 1, EP rank 1: experts 2 and 3, fc1 rows 16..31 of each
    up = hf["backbone.layers.1.mixer.experts.up_proj"] if "backbone.layers.1.mixer.experts.up_proj" in hf else None
    expert = hf.get("backbone.layers.1.mixer.experts.2.up_proj.weight", up[2] if up is not None else None)
    assert torch.equal(stage0["decoder.layers.1.mlp.experts.local_experts.0.linear_fc1.weight"], expert[16:])
    assert torch.equal(stage0["decoder.layers.1.mlp.router.expert_bias"],
                       hf["backbone.layers.1.mixer.gate.e_score_correction_bias"])
    assert "decoder.layers.1.pre_mlp_layernorm.weight" in stage0
    assert not any(name.startswith("decoder.layers.1.mlp.linear_fc1") for name in stage0)
    args = files[(0, 0, 0)]["args"]
    assert (args.hybrid_layer_pattern, args.num_experts, args.moe_router_score_function, args.norm_topk_prob,
            args.moe_router_enable_expert_bias, args.moe_router_num_groups, args.moe_router_group_topk,
            args.moe_router_topk_scaling_factor) == ("ME|*E", 4, "sigmoid", True, True, 2, 1, 2.5)
    convert("megatron", "hf", megatron, back)
    assert_same_tensors(hf, read_safetensors(back))
    derived = hf_config_json(back)  # the routing as transformers reads it
    for key in ("norm_topk_prob", "n_group", "topk_group", "routed_scaling_factor", "num_experts_per_tok",
                "n_routed_experts", "moe_shared_expert_intermediate_size", "layers_block_type"):
        assert derived[key] == NEMOTRON_MOE[key], key


# --------------------------------------------------------------------------- args, layouts and refusals


def test_grouped_expert_layout_is_megatrons_view() -> None:
    """weight1.view(E, h, -1)[e] is expert e's fc1 transposed (x @ it), weight2.view(E, -1, h)[e] its fc2's; the
    per-expert layouts hold the experts as they are."""
    from mindspeed_llm.models import megatron_format

    fc1, fc2 = torch.randn(3, 10, 6), torch.randn(3, 6, 5)  # [E, rows, h], [E, h, cols]
    (weight1,) = megatron_format.experts_to_megatron(megatron_format.GROUPED_EXPERTS, "fc1", fc1)
    (weight2,) = megatron_format.experts_to_megatron(megatron_format.GROUPED_EXPERTS, "fc2", fc2)
    assert weight1.shape == (6, 30) and weight2.shape == (15, 6)
    for e in range(3):
        assert torch.equal(weight1.view(3, 6, -1)[e], fc1[e].t())
        assert torch.equal(weight2.view(3, -1, 6)[e], fc2[e].t())
    for which, stacked, entries in (("fc1", fc1, [weight1]), ("fc2", fc2, [weight2])):
        assert torch.equal(megatron_format.experts_from_megatron(megatron_format.GROUPED_EXPERTS, which, entries, 3),
                           stacked)
        for layout in (megatron_format.SEQUENTIAL_EXPERTS, megatron_format.TE_GROUPED_EXPERTS):
            pieces = megatron_format.experts_to_megatron(layout, which, stacked)
            assert torch.equal(megatron_format.experts_from_megatron(layout, which, pieces, 3), stacked)


def test_moe_args_round_trip() -> None:
    """config -> Megatron args -> config keeps the routing (as Megatron computes it) and the MoE layers."""
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    base = dict(num_layers=6, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96, vocab_size=128,
                add_bias_linear=False, activation="swiglu", num_experts=8, moe_ffn_hidden_size=32)
    for extra, megatron in (
            (dict(moe_router_pre_softmax=True, norm_topk_prob=True, first_k_dense_replace=1),
             dict(moe_router_pre_softmax=False, norm_topk_prob=True, moe_layer_freq=[0, 1, 1, 1, 1, 1])),
            (dict(moe_router_pre_softmax=True, moe_layer_freq=2, moe_aux_loss_coeff=0.01),
             dict(moe_router_pre_softmax=True, norm_topk_prob=False, moe_layer_freq=[1, 0, 1, 0, 1, 0])),
            (dict(moe_router_score_function="sigmoid", norm_topk_prob=True, moe_router_enable_expert_bias=True,
                  moe_router_num_groups=4, moe_router_group_topk=2, moe_router_topk_scaling_factor=2.5,
                  moe_shared_expert_intermediate_size=48, moe_router_topk=4),
             dict(moe_router_score_function="sigmoid", moe_router_num_groups=4, moe_router_group_topk=2)),
            (dict(hybrid_override_pattern="M*E-E*", shared_expert_gate=True, moe_shared_expert_intermediate_size=48,
                  position_embedding_type="none", mamba_state_dim=8, mamba_head_dim=16, mamba_num_groups=2),
             dict(moe_shared_expert_gate=True, moe_layer_freq=1))):
        config = TransformerConfig(**base, **extra)
        args = megatron_format.args_from_config(config)
        assert {key: args[key] for key in megatron} == megatron, extra
        back = TransformerConfig(**megatron_format.config_from_args(argparse.Namespace(
            **args, tensor_model_parallel_size=1)))
        for name in megatron_format.MOE_FIELDS:
            assert getattr(back, name) == getattr(config, name), (extra, name)
        assert [back.is_moe_layer(i) for i in range(6)] == [config.is_moe_layer(i) for i in range(6)]
    read = TransformerConfig(**megatron_format.config_from_args(argparse.Namespace(  # MindSpeed: int + first K
        num_layers=6, hidden_size=64, num_attention_heads=4, padded_vocab_size=128, swiglu=True,
        add_bias_linear=False, num_experts=8, moe_layer_freq=2, first_k_dense_replace=3,
        position_embedding_type="rope")))
    assert [read.is_moe_layer(i) for i in range(6)] == [False, False, False, False, True, False]


@pytest.mark.parametrize("extra, fragment", [
    (dict(moe_router_enable_expert_bias=True), "selects without the expert bias"),
    (dict(moe_router_pre_softmax=True, norm_topk_prob=True, moe_router_num_groups=2, moe_router_group_topk=1),
     "ranks groups by their top logits"),
    (dict(moe_router_score_function="sigmoid", norm_topk_prob=False), "norm_topk_prob = False"),
    (dict(moe_router_score_function="sigmoid", norm_topk_prob=True, moe_router_num_groups=2,
          moe_router_group_topk=1, moe_router_group_score_topk=1), "moe_router_group_score_topk = 1"),
    (dict(moe_router_score_function="sparsemixer"), "moe_router_score_function = 'sparsemixer'"),
    (dict(add_router_bias=True), "biases on its router")])
def test_error_routing_megatron_cannot_compute(extra: Dict[str, Any], fragment: str) -> None:
    from core.transformer.config import TransformerConfig
    from mindspeed_llm.models import megatron_format

    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128,
                               add_bias_linear=False, num_experts=4, **extra)
    with pytest.raises(megatron_format.MegatronFormatError, match=fragment):
        megatron_format.args_from_config(config)


@pytest.mark.parametrize("setting, fragments", [
    (dict(moe_layer_freq=[1, 1, 0, 1]), ("args.moe_layer_freq [1, 1, 0, 1]", "every N-th layer")),
    (dict(moe_router_score_function="sqrtsoftplus"), ("args.moe_router_score_function = 'sqrtsoftplus'",)),
    (dict(moe_router_enable_expert_bias=True), ("args.moe_router_enable_expert_bias", "softmax")),
    (dict(expert_tensor_parallel_size=1), ("args.expert_tensor_parallel_size = 1",))])
def test_error_unsupported_moe_megatron_setting(capsys, qwen3_next, tmp_path, setting, fragments) -> None:
    root = write_moe_megatron(str(tmp_path / "megatron"), qwen3_next["hf"], "local_sequential", **setting)
    expect_error(capsys, ["--load-model-type", "megatron", "--save-model-type", "mg", "--load-dir", root,
                          "--save-dir", str(tmp_path / "out"), "--model-type-hf", "qwen3_next"], *fragments)


def test_error_moe_flags_of_other_targets(capsys, qwen3_next, tmp_path) -> None:
    expect_error(capsys, ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", qwen3_next["hf_dir"],
                          "--save-dir", str(tmp_path / "out"), "--moe-grouped-gemm"], "--moe-grouped-gemm",
                 "--save-model-type megatron")

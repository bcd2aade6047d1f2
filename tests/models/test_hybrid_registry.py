"""The hybrid families of issue 27 in the registry: each is converted or refused in one line with its reason; the
paired families (an HF layer = two of our pattern letters) map HF layer j to our layers 2j and 2j + 1, read both
spellings of their layer kinds, and refuse on export what their config cannot say.

    python -m pytest -q tests/models/test_hybrid_registry.py
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, config_from_hf, family_for_hf_config, find_rule, get_family

# the model types the issue names, as transformers 5.24 spells them
HYBRID_MODEL_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen4_exp_text", "kimi_linear", "nemotron_h",
                      "falcon_h1", "bamba", "jamba", "zamba", "zamba2", "granitemoehybrid", "olmo_hybrid",
                      "bailing_hybrid", "minimax", "lfm2", "lfm2_moe", "lfm3", "recurrent_gemma", "rwkv", "xlstm")
SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8)


@pytest.mark.parametrize("model_type", HYBRID_MODEL_TYPES)
def test_every_hybrid_family_converts_or_says_why_not(model_type: str) -> None:
    try:
        family = family_for_hf_config({"model_type": model_type})
    except RegistryError as error:
        assert f"{model_type} is not supported: " in str(error) and len(str(error)) > 60, str(error)
        assert "\n" not in str(error)
    else:
        assert family.model_type == model_type


def test_paired_rules_map_hf_layer_j_to_our_layers_2j_and_2j_plus_1() -> None:
    rules = get_family("bamba").weights
    assert find_rule(rules, "decoder.layers.4.mixer.A_log")[1] == ("model.layers.2.mamba.A_log",)
    mlp = "model.layers.2.feed_forward.down_proj.weight"
    assert find_rule(rules, "decoder.layers.5.mlp.linear_fc2.weight")[1] == (mlp,)
    assert find_rule(rules, "decoder.layers.5.pre_mlp_layernorm.weight")[1] == ("model.layers.2.pre_ff_layernorm.weight",)
    with pytest.raises(RegistryError, match="no weight rule"):  # a mixer tensor never sits in an MLP layer
        find_rule(rules, "decoder.layers.5.mixer.A_log")


def test_layer_kinds_read_in_every_spelling() -> None:
    bamba = config_from_hf({**SIZES, "model_type": "bamba", "attn_layer_indices": [1, 3]}, "bamba")
    assert bamba.hybrid_override_pattern == "M-*-M-*-" and bamba.num_layers == 8 and bamba.rotary_percent == 0.5
    granite = dict(SIZES, model_type="granitemoehybrid", num_local_experts=4, position_embedding_type="nope")
    legacy = config_from_hf({**granite, "layer_types": ["mamba", "attention", "mamba", "mamba"]}, "granitemoehybrid")
    today = config_from_hf({**granite, "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                                       "linear_attention"]}, "granitemoehybrid")
    assert legacy == today and legacy.hybrid_override_pattern == "ME*EMEME"
    assert legacy.position_embedding_type == "none" and legacy.moe_shared_expert_intermediate_size == 1024
    jamba = transformers.JambaConfig(**{key: value for key, value in SIZES.items() if not key.startswith("mamba_n")},
                                     attn_layer_period=2, attn_layer_offset=1, expert_layer_period=4,
                                     expert_layer_offset=2, num_experts=4).to_dict()
    cfg = config_from_hf(jamba, "jamba")
    assert cfg.hybrid_override_pattern == "M-*-ME*-" and cfg.mamba_version == 1
    assert cfg.mamba_mixer_rms_weights and cfg.mamba_mixer_rms_eps == jamba["rms_norm_eps"]


def _jamba(pattern: str) -> TransformerConfig:
    hf = transformers.JambaConfig(**{key: value for key, value in SIZES.items() if not key.startswith("mamba_n")},
                                  num_experts=4).to_dict()
    return dataclasses.replace(config_from_hf(hf, "jamba"), hybrid_override_pattern=pattern,
                               num_layers=len(pattern))


def test_exports_refuse_what_the_family_cannot_say() -> None:
    with pytest.raises(RegistryError, match=r"attention layers every n-th HF layer.*\[0, 1, 3\]"):
        get_family("jamba").to_hf_config(_jamba("*-*-M-*-"))  # attention at HF layers 0, 1 and 3: no period
    assert get_family("jamba").to_hf_config(_jamba("M-*EM-*E"))["attn_layer_period"] == 2
    granite = config_from_hf({**SIZES, "model_type": "granitemoehybrid", "num_local_experts": 0,
                              "layer_types": ["mamba"] * 4}, "granitemoehybrid")
    with pytest.raises(RegistryError, match="pairs"):
        get_family("granitemoehybrid").to_hf_config(dataclasses.replace(granite, hybrid_override_pattern="MM--M-M-"))


def test_bad_hf_configs_are_refused_in_one_line() -> None:
    with pytest.raises(RegistryError, match="bamba z_loss_coefficient=0.1"):
        config_from_hf({**SIZES, "model_type": "bamba", "z_loss_coefficient": 0.1}, "bamba")
    with pytest.raises(RegistryError, match="granitemoehybrid mamba_proj_bias=True"):
        config_from_hf({**SIZES, "model_type": "granitemoehybrid", "mamba_proj_bias": True}, "granitemoehybrid")
    with pytest.raises(RegistryError, match="layer_types"):
        config_from_hf({**SIZES, "model_type": "granitemoehybrid", "layer_types": ["mamba", "mlp", "mamba", "mamba"]},
                       "granitemoehybrid")
    with pytest.raises(ValueError, match="--mamba-mixer-rms-weights .* add --mamba-mixer-rms-eps"):
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128,
                          hybrid_override_pattern="M-", position_embedding_type="none", mamba_version=1,
                          mamba_mixer_rms_weights=True)


def test_mamba_num_heads_sets_the_mixer_width() -> None:
    """--mamba-num-heads (Megatron-core's): d_inner = heads x head dim, not expand x hidden; Nemotron-H channels
    that are no multiple of the width convert to it and back."""
    from core.models.gpt_model import build_model, layout_state

    cfg = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, vocab_size=128,
                            hybrid_override_pattern="M", position_embedding_type="none", mamba_heads=6,
                            mamba_head_dim=16, mamba_num_groups=1, mamba_state_dim=8)
    assert cfg.mamba_d_inner == 96 and cfg.mamba_num_heads == 6
    mixer = build_model(cfg, layout_state(1), torch.device("cpu"), seed=0).decoder.layers["0"].mixer
    assert mixer.in_proj.weight.shape[0] == 2 * 96 + 2 * 8 + 6 and mixer.out_proj.weight.shape == (64, 96)
    hf = transformers.NemotronHConfig(**{**SIZES, "num_hidden_layers": 1}, layers_block_type=["mamba"],
                                      mamba_num_heads=6, mamba_head_dim=16, n_groups=1).to_dict()
    converted = config_from_hf(hf, "nemotron_h")
    assert converted.mamba_heads == 6 and get_family("nemotron_h").to_hf_config(converted)["mamba_num_heads"] == 6


# Moonshot's config.json of Kimi-Linear-48B-A3B, shrunk: the remote code's keys (aliases of KimiLinearConfig's
# attribute_map, 1-based layer lists in linear_attn_config), not transformers' own
MOONSHOT_KIMI = dict(model_type="kimi_linear", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=4, vocab_size=128, kv_lora_rank=32, q_lora_rank=None,
                     qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, moe_intermediate_size=32, num_experts=8,
                     num_experts_per_token=2, num_shared_experts=1, moe_renormalize=True, num_expert_group=1,
                     topk_group=1, routed_scaling_factor=2.446, first_k_dense_replace=1, mla_use_nope=True,
                     moe_router_activation_func="sigmoid", moe_layer_freq=1, num_nextn_predict_layers=0,
                     model_max_length=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
                     linear_attn_config={"full_attn_layers": [2, 4], "kda_layers": [1, 3], "num_heads": 4,
                                         "head_dim": 16, "short_conv_kernel_size": 4})


def test_kimi_linear_reads_moonshots_config_as_transformers_does() -> None:
    cfg = config_from_hf(MOONSHOT_KIMI, "kimi_linear")
    assert [cfg.layer_parts(i) for i in range(4)] == [("kimi_delta_attention", "dense"), ("attention", "moe"),
                                                      ("kimi_delta_attention", "moe"), ("attention", "moe")]
    assert (cfg.num_experts, cfg.moe_router_topk, cfg.first_k_dense_replace, cfg.max_position_embeddings) == \
        (8, 2, 1, 4096)
    assert cfg.position_embedding_type == "none" and cfg.multi_latent_attention
    assert (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim) == (4, 4, 16)
    ours = transformers.KimiLinearConfig(**get_family("kimi_linear").to_hf_config(cfg))
    theirs = transformers.KimiLinearConfig(**MOONSHOT_KIMI)
    for key in ("layer_types", "mlp_layer_types", "num_local_experts", "num_experts_per_tok", "n_shared_experts",
                "norm_topk_prob", "linear_num_heads", "linear_head_dim", "max_position_embeddings"):
        assert getattr(ours, key) == getattr(theirs, key), key
    assert get_family("kimi_linear").to_hf_config(cfg)["linear_attn_config"]["kda_layers"] == [1, 3]


@pytest.mark.parametrize("change, message", [
    (dict(mla_use_nope=False), "mla_use_nope=false"),
    (dict(moe_router_activation_func="softmax"), "moe_router_activation_func"),
    (dict(num_nextn_predict_layers=1), "num_nextn_predict_layers"),
    (dict(mlp_layer_types=["sparse", "dense", "sparse", "sparse"]), "leading run of dense"),
    (dict(layer_types=["linear_attention", "sliding_attention", "full_attention", "full_attention"]), "layer_types"),
])
def test_kimi_linear_refuses_what_transformers_does_not_compute(change: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**MOONSHOT_KIMI, **change}, "kimi_linear")
    assert "\n" not in str(error.value)


def test_kimi_linear_reads_the_dense_mlp_in_either_spelling() -> None:
    family = get_family("kimi_linear")
    saved = "model.layers.0.block_sparse_moe.gate_proj.weight"  # transformers' save_pretrained
    assert family.canonical_hf_name(saved) == "model.layers.0.mlp.gate_proj.weight"  # Moonshot's, and our export
    for kept in ("model.layers.1.block_sparse_moe.gate.weight", "model.layers.1.block_sparse_moe.experts.0.w1.weight",
                 "model.layers.1.block_sparse_moe.shared_experts.gate_proj.weight"):
        assert family.canonical_hf_name(kept) == kept


def test_kimi_linear_checkpoints_convert_in_moonshots_spelling_and_refuse_both(tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from mindspeed_llm.convert.errors import ConversionError
    from mindspeed_llm.convert.hf import HFSource
    from tests.models.test_zoo_parity import CASES, build_hf_model

    saved = tmp_path / "saved"
    build_hf_model(CASES["kimi_linear"]).save_pretrained(saved)  # one model.safetensors, transformers' spelling
    tensors = load_file(saved / "model.safetensors")
    family = get_family("kimi_linear")
    moonshot = {family.canonical_hf_name(name): tensor for name, tensor in tensors.items()}
    assert "model.layers.0.mlp.gate_proj.weight" in moonshot and "model.layers.0.block_sparse_moe.gate_proj.weight" \
        in tensors
    both = {**tensors, **{name: tensor.clone() for name, tensor in moonshot.items()}}
    for name, content in (("moonshot", moonshot), ("both", both)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text((saved / "config.json").read_text())
        save_file(content, tmp_path / name / "model.safetensors", metadata={"format": "pt"})
    source = HFSource(str(tmp_path / "moonshot"), "kimi_linear")
    dense = "model.layers.0.mlp.down_proj.weight"
    assert torch.equal(source.read("decoder.layers.0.mlp.linear_fc2.weight", [dense], None)[0],
                       tensors["model.layers.0.block_sparse_moe.down_proj.weight"])
    transformers_spelled = HFSource(str(saved), "kimi_linear")
    assert torch.equal(transformers_spelled.read("decoder.layers.0.mlp.linear_fc2.weight", [dense], None)[0],
                       moonshot[dense])
    with pytest.raises(ConversionError, match="two spellings of one kimi_linear tensor"):
        HFSource(str(tmp_path / "both"), "kimi_linear")


# Falcon-H1-0.5B's config.json (its muP scales and Mamba sizes), shrunk to 2 layers
FALCON_H1_05B = dict(model_type="falcon_h1", hidden_size=1024, intermediate_size=2048, num_hidden_layers=2,
                     num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=32784,
                     mamba_d_ssm=1536, mamba_n_heads=24, mamba_d_head=64, mamba_d_state=128, mamba_n_groups=1,
                     mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=128, mamba_rms_norm=False,
                     mamba_norm_before_gate=False, rope_theta=1e11, rms_norm_eps=1e-5,
                     embedding_multiplier=5.656854249492381, lm_head_multiplier=0.0390625,
                     key_multiplier=0.390625, attention_in_multiplier=1.0, attention_out_multiplier=0.9375,
                     ssm_in_multiplier=1.25, ssm_out_multiplier=0.23570226039551587,
                     mlp_multipliers=[0.8838834764831844, 0.5859375],
                     ssm_multipliers=[0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738])


def test_falcon_h1_reads_its_scales_and_mamba_width() -> None:
    """Every HF layer is 'H' (Mamba2 beside attention) then '-'; the Mamba width is mamba_d_ssm, not expand x
    hidden; the key scale is a softmax scale; each muP scale lands on its flag and comes back on export."""
    cfg = config_from_hf(FALCON_H1_05B, "falcon_h1")
    assert cfg.hybrid_override_pattern == "H-H-" and cfg.num_layers == 4
    assert (cfg.mamba_d_inner, cfg.mamba_num_heads, cfg.mamba_head_dim) == (1536, 24, 64) and not cfg.mamba_rmsnorm
    assert cfg.softmax_scale == pytest.approx(0.390625 / 8) and cfg.output_multiplier_scale == 0.0390625
    assert cfg.attention_in_multiplier is None and cfg.attention_out_multiplier == 0.9375
    assert cfg.ssm_multipliers == tuple(FALCON_H1_05B["ssm_multipliers"]) and cfg.mlp_multipliers[1] == 0.5859375
    exported = get_family("falcon_h1").to_hf_config(cfg)
    hf = transformers.FalconH1Config(**{key: value for key, value in exported.items()
                                        if key != "time_step_limit"})  # infinity as config.json spells it
    for key in ("mamba_d_ssm", "mamba_n_heads", "mamba_d_head", "mamba_rms_norm", "embedding_multiplier",
                "lm_head_multiplier", "attention_in_multiplier", "attention_out_multiplier", "ssm_in_multiplier",
                "ssm_out_multiplier", "mlp_multipliers", "ssm_multipliers"):
        assert getattr(hf, key) == pytest.approx(FALCON_H1_05B[key]), key
    assert hf.key_multiplier == pytest.approx(0.390625) and hf.layers_block_type == ["hybrid"] * 2


@pytest.mark.parametrize("change, message", [
    (dict(projectors_bias=True), "falcon_h1 projectors_bias=True is not supported"),
    (dict(attention_bias=True), "falcon_h1 attention_bias=True is not supported"),
    (dict(mamba_d_head=32), "mamba_n_heads x mamba_d_head = 768 is not the Mamba width 1536"),
    (dict(ssm_multipliers=[1.0, 2.0]), "falcon_h1 needs 5 scales"),
])
def test_falcon_h1_refuses_what_it_cannot_build(change: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**FALCON_H1_05B, **change}, "falcon_h1")
    assert "\n" not in str(error.value)


def test_falcon_h1_export_needs_its_pairs() -> None:
    cfg = config_from_hf(FALCON_H1_05B, "falcon_h1")
    with pytest.raises(RegistryError, match="an H layer then a '-' layer"):
        get_family("falcon_h1").to_hf_config(dataclasses.replace(cfg, hybrid_override_pattern="H-M-"))


def test_olmo_hybrid_reads_transformers_defaults_and_nope() -> None:
    """OlmoHybridConfig's defaults (DeltaNet heads = attention heads, key dim 0.75 hidden / heads, value dim twice
    it, every 4th layer attention, beta doubled); rope_theta null (the released checkpoints) is no positions, and
    the export writes it back."""
    hf = dict(model_type="olmo_hybrid", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
              num_attention_heads=4, vocab_size=128, rope_parameters={"rope_type": "default", "rope_theta": None})
    cfg = config_from_hf(hf, "olmo_hybrid")
    assert (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
            cfg.linear_value_head_dim) == (4, 4, 12, 24)
    assert [cfg.layer_parts(i)[0] for i in range(4)] == ["gated_delta_net"] * 3 + ["attention"]
    assert cfg.position_embedding_type == "none" and cfg.linear_allow_neg_eigval and cfg.norm_epsilon == 1e-6
    assert cfg.layer_norms(0) == (True, False) and cfg.layer_norms(3) == (False, True)
    exported = get_family("olmo_hybrid").to_hf_config(cfg)
    assert exported["rope_parameters"]["rope_theta"] is None and exported["linear_allow_neg_eigval"] is True
    assert exported["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    with pytest.raises(RegistryError, match="olmo_hybrid attention_bias=True is not supported"):
        config_from_hf({**hf, "attention_bias": True}, "olmo_hybrid")
    with pytest.raises(RegistryError, match="olmo_hybrid cannot express linear_attention_pre_norm=False"):
        get_family("olmo_hybrid").to_hf_config(dataclasses.replace(cfg, linear_attention_pre_norm=False))


def test_recurrent_gemma_reads_its_block_cycle_and_bf16_embedding_scale() -> None:
    """block_types cycle over the layers and come back as their shortest cycle; the embeddings are scaled by
    sqrt(hidden) rounded to bf16 (transformers' normalizer buffer: 50.5 for RecurrentGemma-2B's 2560)."""
    hf = dict(model_type="recurrent_gemma", hidden_size=2560, intermediate_size=15360, num_hidden_layers=5,
              num_attention_heads=10, num_key_value_heads=1, vocab_size=256000,
              block_types=["recurrent", "recurrent", "attention"])
    cfg = config_from_hf(hf, "recurrent_gemma")
    assert cfg.embedding_multiplier == 50.5 and cfg.ffn_hidden_size == 7680 and cfg.rotary_percent == 0.5
    assert [cfg.layer_parts(i)[0] for i in range(5)] == ["rg_lru", "rg_lru", "attention", "rg_lru", "rg_lru"]
    assert cfg.sliding_window == 2048 and cfg.output_logit_softcapping == 30.0 and cfg.lru_width_or_default == 2560
    exported = get_family("recurrent_gemma").to_hf_config(cfg)
    assert exported["block_types"] == ["recurrent", "recurrent", "attention"]
    assert exported["intermediate_size"] == 15360 and exported["attention_window_size"] == 2048
    with pytest.raises(RegistryError, match="recurrent_gemma rope_type 'linear' is not supported"):
        config_from_hf({**hf, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
                       "recurrent_gemma")
    published = {key: value for key, value in hf.items() if key != "block_types"}  # the Hub file's spelling
    assert config_from_hf({**published, "_block_types": ["recurrent", "attention"]},
                          "recurrent_gemma").linear_attention_freq == "[1,0,1,0,1]"
    with pytest.raises(RegistryError, match="recurrent_gemma block_types"):
        config_from_hf({**hf, "block_types": ["recurrent", "mlp"]}, "recurrent_gemma")


# Ling-3.0-Flash's layout as transformers' BailingHybridConfig defaults give it, shrunk to 6 layers: every 6th MLA,
# the first 2 dense, the bounded KDA forget gate
LING = dict(model_type="bailing_hybrid", hidden_size=256, intermediate_size=512, num_hidden_layers=6,
            num_attention_heads=4, num_key_value_heads=4, vocab_size=128, num_experts=16, num_experts_per_token=4,
            num_expert_group=4, topk_group=2, moe_intermediate_size=64, head_dim=64, kv_lora_rank=32,
            qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, pad_token_id=0, eos_token_id=1)


def test_bailing_hybrid_reads_transformers_defaults_both_ways() -> None:
    cfg = config_from_hf(LING, "bailing_hybrid")
    assert [cfg.layer_parts(i) for i in range(6)] == [("kimi_delta_attention", "dense")] * 2 + \
        [("kimi_delta_attention", "moe")] * 3 + [("attention", "moe")]
    assert (cfg.kda_full_rank_gates, cfg.kda_gate_lower_bound, cfg.linear_key_head_dim, cfg.linear_conv_kernel_dim) \
        == (True, -5.0, 64, 4)
    assert cfg.attention_output_gate and cfg.attention_output_gate_per_head and cfg.rope_interleaved
    assert (cfg.rotary_base, cfg.moe_router_num_groups, cfg.moe_router_group_topk, cfg.moe_router_topk_scaling_factor) \
        == (6000000.0, 4, 2, 2.5)
    exported = get_family("bailing_hybrid").to_hf_config(cfg, {**LING, "num_nextn_predict_layers": 1})
    assert (exported["num_experts"], exported["kda_safe_gate"], exported["num_nextn_predict_layers"]) == (16, True, 1)
    theirs = transformers.BailingHybridConfig(**{k: v for k, v in exported.items() if k != "model_type"})
    assert (theirs.linear_head_dim, theirs.layer_types[-1], theirs.num_local_experts) == (64, "full_attention", 16)
    unbounded = config_from_hf({**LING, "kda_safe_gate": False}, "bailing_hybrid")
    assert unbounded.kda_gate_lower_bound is None
    with pytest.raises(RegistryError, match="linear layers are Kimi Delta Attention with full-rank gates"):
        get_family("bailing_hybrid").to_hf_config(dataclasses.replace(cfg, kda_full_rank_gates=False))


@pytest.mark.parametrize("change, message", [
    (dict(hidden_act="gelu"), "hidden_act='gelu' is not supported"),
    (dict(linear_num_heads=8), "linear_num_heads=8 differs from num_attention_heads=4"),
    (dict(mlp_layer_types=["sparse", "dense"] + ["sparse"] * 4), "leading run of dense"),
])
def test_bailing_hybrid_refuses_what_it_cannot_build(change: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**LING, **change}, "bailing_hybrid")
    assert "\n" not in str(error.value)


def test_bailing_hybrid_mtp_layers_are_left_out_with_a_note(tmp_path, capfd) -> None:
    """Ling's checkpoints save their MTP layer as model.layers.{num_hidden_layers}: transformers does not load it,
    and the converter leaves it out, saying so."""
    from safetensors.torch import load_file, save_file

    from mindspeed_llm.convert.hf import HFSource
    from tests.models.test_zoo_parity import CASES, build_hf_model

    saved = tmp_path / "saved"
    build_hf_model(CASES["bailing_hybrid_bounded"]).save_pretrained(saved)
    tensors = load_file(saved / "model.safetensors")
    mtp = {name.replace("model.layers.3.", "model.layers.4."): tensor.clone() for name, tensor in tensors.items()
           if name.startswith("model.layers.3.")}
    save_file({**tensors, **mtp}, saved / "model.safetensors", metadata={"format": "pt"})
    source = HFSource(str(saved), "bailing_hybrid")
    assert source.left_out_count == len(mtp) and not any(n.startswith("model.layers.4.") for n in source.where)
    assert f"leaving out {len(mtp)} tensor(s) of model.layers.4.*" in capfd.readouterr().err


ZAMBA2_DEFAULTS = transformers.Zamba2Config().to_dict()  # transformers' defaults are Zamba2-2.7B's sizes


def test_zamba2_reads_transformers_defaults_and_its_shared_blocks() -> None:
    """54 layers, 9 of them hybrid ('Z') over one shared block; attention heads of 2h / heads channels scaled
    by (head_dim / 2) ** -0.5 without positions; the MLP adapters of rank 128; Mamba2 of 8 heads over 2 x hidden;
    an untied config has one block per hybrid layer (transformers ties the blocks only with the embeddings)."""
    cfg = config_from_hf(ZAMBA2_DEFAULTS, "zamba2")
    hybrid = [i for i, block in enumerate(ZAMBA2_DEFAULTS["layers_block_type"]) if block == "hybrid"]
    assert [i for i, letter in enumerate(cfg.hybrid_override_pattern) if letter == "Z"] == hybrid and len(hybrid) == 9
    assert (cfg.num_shared_blocks, cfg.shared_block_adapter_rank, cfg.shared_block_attention_adapters) == (1, 128, False)
    assert (cfg.kv_channels, cfg.query_pre_attn_scalar, cfg.position_embedding_type) == (160, 80.0, "none")
    assert cfg.activation == "geglu" and not cfg.untie_embeddings_and_output_weights
    assert (cfg.mamba_d_inner, cfg.mamba_num_heads, cfg.mamba_head_dim) == (5120, 8, 640)
    exported = get_family("zamba2").to_hf_config(cfg)
    hf = transformers.Zamba2Config(**exported)
    assert hf.hybrid_layer_ids == hybrid and hf.attention_head_dim == 160 and hf.num_mem_blocks == 1
    untied = config_from_hf({**ZAMBA2_DEFAULTS, "tie_word_embeddings": False}, "zamba2")
    assert untied.num_shared_blocks == 9 and untied.untie_embeddings_and_output_weights
    with pytest.raises(RegistryError, match="use --num-shared-blocks 9"):
        get_family("zamba2").to_hf_config(dataclasses.replace(untied, num_shared_blocks=1))


@pytest.mark.parametrize("change, message", [
    (dict(use_long_context=True), "zamba2 use_long_context=True is not supported"),
    (dict(add_bias_linear=True), "zamba2 add_bias_linear=True is not supported"),
    (dict(rms_norm_eps=1e-6), "zamba2 rms_norm_eps=1e-06 is not supported"),
    (dict(use_shared_attention_adapter=True, num_key_value_heads=8), "use_shared_attention_adapter with "
                                                                     "num_key_value_heads=8"),
    (dict(layers_block_type=["mamba", "attention"], num_hidden_layers=2), "zamba2 layers_block_type \\['attention'\\]"),
])
def test_zamba2_refuses_what_it_cannot_build(change: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**ZAMBA2_DEFAULTS, **change}, "zamba2")
    assert "\n" not in str(error.value)


ZAMBA_DEFAULTS = transformers.ZambaConfig().to_dict()  # transformers' defaults are Zamba-7B's sizes


def test_zamba_reads_transformers_defaults_and_its_shared_block() -> None:
    """76 layers, 13 of them hybrid ('Z') over the one shared block (heads of 2h / heads channels scaled by
    (head_dim / 2) ** -0.5, no positions, no adapters); Mamba1 of 2 independent SSMs over 2 x hidden, dt rank
    ceil(h / 16); an untied config has one block per hybrid layer."""
    cfg = config_from_hf(ZAMBA_DEFAULTS, "zamba")
    hybrid = [i for i, block in enumerate(ZAMBA_DEFAULTS["layers_block_type"]) if block == "hybrid"]
    assert [i for i, letter in enumerate(cfg.hybrid_override_pattern) if letter == "Z"] == hybrid and len(hybrid) == 13
    assert (cfg.num_shared_blocks, cfg.shared_block_adapter_rank) == (1, None)
    assert not cfg.shared_block_attention_adapters
    assert (cfg.kv_channels, cfg.query_pre_attn_scalar, cfg.position_embedding_type) == (464, 232.0, "none")
    assert (cfg.mamba_version, cfg.mamba1_heads, cfg.mamba_head_dim, cfg.mamba_d_inner) == (1, 2, 3712, 7424)
    assert cfg.mamba_dt_rank_or_default == 232 and cfg.activation == "geglu"
    exported = get_family("zamba").to_hf_config(cfg)
    hf = transformers.ZambaConfig(**exported)
    assert hf.layers_block_type == ZAMBA_DEFAULTS["layers_block_type"] and hf.attention_head_dim == 464
    assert (hf.n_mamba_heads, hf.mamba_dt_rank, hf.intermediate_size) == (2, 232, 14848)
    untied = config_from_hf({**ZAMBA_DEFAULTS, "tie_word_embeddings": False}, "zamba")
    assert untied.num_shared_blocks == 13
    with pytest.raises(RegistryError, match="use --num-shared-blocks 13"):
        get_family("zamba").to_hf_config(dataclasses.replace(untied, num_shared_blocks=1))
    with pytest.raises(RegistryError, match="zamba's shared block has no adapters"):
        get_family("zamba").to_hf_config(dataclasses.replace(cfg, shared_block_adapter_rank=4))


@pytest.mark.parametrize("change, message", [
    (dict(mamba_proj_bias=True), "zamba mamba_proj_bias=True is not supported"),
    (dict(hidden_mamba_act="gelu"), "zamba hidden_mamba_act='gelu' is not supported"),
    (dict(attention_hidden_size=1000), "zamba attention_hidden_size=1000 is not supported"),
    (dict(n_mamba_heads=3), "zamba mamba_expand x hidden_size = 7424 is not a multiple of n_mamba_heads=3"),
    (dict(layers_block_type=["mamba", "attention"], num_hidden_layers=2), "zamba layers_block_type \\['attention'\\]"),
])
def test_zamba_refuses_what_it_cannot_build(change: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**ZAMBA_DEFAULTS, **change}, "zamba")
    assert "\n" not in str(error.value)

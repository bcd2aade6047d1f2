"""Hybrid state-space families as registry data: Nemotron-H (``nemotron_h``), Mamba2 mixed with attention,
MLP and MoE layers in Megatron-core's hybrid layout.

Every HF block is one norm, one branch and a residual add, as every letter of our
``--hybrid-override-pattern``: ``layers_block_type`` (or the older ``hybrid_override_pattern`` string)
gives per layer ``mamba``/``linear_attention`` ('M'), ``attention``/``full_attention`` ('*'), ``mlp``
('-') or ``moe`` ('E').

    ours                                              HF (backbone.layers.{i}.*)
    decoder.layers.{i}.norm | input_layernorm | pre_mlp_layernorm        norm           (by the layer's letter)
    decoder.layers.{i}.mixer.<name>                                    mixer.<name>     (Mamba2, same layout)
    decoder.layers.{i}.self_attention.linear_qkv      cat(mixer.q_proj, k_proj, v_proj)  (fuse rows)
    decoder.layers.{i}.self_attention.linear_proj     mixer.o_proj
    decoder.layers.{i}.mlp.linear_fc1 / linear_fc2    mixer.up_proj / mixer.down_proj   (squared ReLU, no gate)
    decoder.layers.{i}.mlp.router.weight / expert_bias  mixer.gate.weight / e_score_correction_bias
    decoder.layers.{i}.mlp.experts.linear_fc1/fc2     stack of mixer.experts.{e}.up_proj / down_proj
    decoder.layers.{i}.mlp.shared_experts.*           mixer.shared_experts.up_proj / down_proj

Attention has no position embedding (``--position-embedding-type none``) and no biases (transformers builds
q/k/v/o without them whatever ``attention_bias`` says). The MLP, experts and shared expert are squared-ReLU
MLPs without a gate (``mlp_hidden_act`` relu2 -> ``--activation squared_relu``); the router is DeepSeek-V3's
sigmoid with the expert bias, groups, ``norm_topk_prob`` and ``routed_scaling_factor``; one shared expert of
``moe_shared_expert_intermediate_size`` (HF builds exactly one, whatever ``n_shared_experts`` says).
transformers' model ties nothing whatever ``tie_word_embeddings`` says (its ``lm_head`` is saved and used
on its own), so the output layer is always untied here and a tied model is refused on export. The
Mamba2 mixer is the one of :mod:`~mindspeed_llm.models.families.ssm` with ``mamba_num_heads x mamba_head_dim``
channels; dt is clamped to ``time_step_limit`` (``--mamba-dt-limit-min`` / ``--mamba-dt-limit-max``), as
transformers does since 5.25 (5.24 and older clamped below at ``time_step_min`` instead, which NVIDIA's own
Mamba2 layers never did; ``time_step_min`` is only an initialisation bound).

Mamba channels that are not an integer multiple of the hidden size are ``--mamba-num-heads`` heads.
Refused in one line: a latent MoE projection (``moe_latent_size``), MTP layers (``num_nextn_predict_layers``),
Mamba biases (``use_bias``), a non-SiLU Mamba activation and sliding windows.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

from core.transformer.config import ATTENTION, TransformerConfig, feature_fields
from mindspeed_llm.models.families.llama_like import _refuse
from mindspeed_llm.models.families.moe_common import group_routing, group_routing_hf, sigmoid_routing
from mindspeed_llm.models.families.moe_sigmoid import scaling_factor, scaling_factor_hf
from mindspeed_llm.models.families.ssm import MIXER_TENSORS, dt_limits, dt_limits_hf
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, _dtype_name,
                                           register, require_config)

# HF block types (today's names and transformers' legacy ones) -> our pattern letters
BLOCK_LETTERS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-",
                 "moe": "E"}
LETTER_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
# initialisation-only keys and keys transformers reads but that change nothing (kept for the inverse)
PRESERVED = ("rescale_prenorm_residual", "time_step_min", "time_step_max", "time_step_floor", "use_mamba_kernels",
             "mamba_ssm_cache_dtype", "n_shared_experts", "moe_shared_expert_overlap", "attention_bias",
             "num_logits_to_keep", "mtp_layers_block_type", "tie_word_embeddings")


def _pattern(hf: Dict[str, Any]) -> str:
    """The hybrid pattern of ``layers_block_type`` (or ``layer_types``), else of the ``hybrid_override_pattern``
    string of older configs."""
    blocks = hf.get("layers_block_type") or hf.get("layer_types")
    if blocks:
        unknown = sorted({block for block in blocks if block not in BLOCK_LETTERS})
        if unknown:
            raise RegistryError(f"nemotron_h layers_block_type {unknown} are not supported ({sorted(BLOCK_LETTERS)})")
        return "".join(BLOCK_LETTERS[block] for block in blocks)
    pattern = hf.get("hybrid_override_pattern")
    if not pattern:
        raise RegistryError("nemotron_h config.json needs layers_block_type or hybrid_override_pattern")
    unknown = sorted(set(pattern) - set(LETTER_BLOCKS))
    if unknown:
        raise RegistryError(f"nemotron_h hybrid_override_pattern letters {unknown} are not supported (M, *, -, E)")
    return str(pattern)


def _refuse_unsupported(hf: Dict[str, Any]) -> None:
    _refuse("nemotron_h", hf, moe_latent_size=None, num_nextn_predict_layers=0, use_bias=False, sliding_window=None,
            mamba_hidden_act="silu", mlp_hidden_act="relu2")


def _mamba_fields(hf: Dict[str, Any], hidden: int) -> Dict[str, Any]:
    heads, head_dim = int(hf.get("mamba_num_heads", 128)), int(hf.get("mamba_head_dim", 64))
    # d_inner = expand x hidden where the channels are a multiple of the width, else --mamba-num-heads x head dim
    width = dict(mamba_heads=heads) if (heads * head_dim) % hidden else dict(mamba_expand=heads * head_dim // hidden)
    return dict(mamba_version=2, mamba_state_dim=int(hf.get("ssm_state_size", 128)), mamba_head_dim=head_dim,
                mamba_num_groups=int(hf.get("n_groups", 8)), **width,
                mamba_d_conv=int(hf.get("conv_kernel", 4)), mamba_conv_bias=bool(hf.get("use_conv_bias", True)),
                mamba_chunk_size=int(hf.get("chunk_size", 128)), **dt_limits(hf))


def _moe_fields(hf: Dict[str, Any]) -> Dict[str, Any]:
    topk = int(hf.get("num_experts_per_tok", 2))
    return dict(num_experts=int(hf.get("n_routed_experts", 8)), moe_router_topk=topk,
                moe_ffn_hidden_size=int(hf.get("moe_intermediate_size", 7688)),
                moe_shared_expert_intermediate_size=int(hf.get("moe_shared_expert_intermediate_size", 7688)),
                moe_router_topk_scaling_factor=scaling_factor(hf.get("routed_scaling_factor")),
                **sigmoid_routing(bool(hf.get("norm_topk_prob", True))), **group_routing(hf, "nemotron_h"))


def _nemotron_h_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    _refuse_unsupported(hf)
    pattern, hidden = _pattern(hf), int(hf["hidden_size"])
    heads = int(hf.get("num_attention_heads", 32))
    kwargs: Dict[str, Any] = dict(
        num_layers=len(pattern), hybrid_override_pattern=pattern, hidden_size=hidden,
        ffn_hidden_size=int(hf.get("intermediate_size", 21504)), num_attention_heads=heads,
        num_query_groups=int(hf.get("num_key_value_heads") or heads), kv_channels=int(hf.get("head_dim", 128)),
        vocab_size=int(hf["vocab_size"]), max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        normalization="RMSNorm", norm_epsilon=float(hf.get("layer_norm_epsilon", 1e-5)),
        position_embedding_type="none", activation="squared_relu", add_bias_linear=False,
        add_mlp_bias=bool(hf.get("mlp_bias", False)),
        untie_embeddings_and_output_weights=True,  # transformers never ties them (see the module docstring)
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)),
        make_vocab_size_divisible_by=1, fp32_residual_connection=bool(hf.get("residual_in_fp32", False)))
    if not set(pattern) & {"*", "-", "E"}:  # an all-Mamba stack: no field of attention or MLP layers
        kwargs = {key: value for key, value in kwargs.items() if key not in feature_fields(ATTENTION)}
    if "M" in pattern:
        kwargs.update(_mamba_fields(hf, hidden))
    if "E" in pattern:
        kwargs.update(_moe_fields(hf))
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _check_exportable(cfg: TransformerConfig) -> None:
    """Our settings Nemotron-H's config cannot express, refused in one line."""
    if cfg.hybrid_override_pattern is None or set(cfg.hybrid_override_pattern) - set(LETTER_BLOCKS):
        raise RegistryError("nemotron_h needs --hybrid-override-pattern of M, *, - and E letters")
    if set(cfg.hybrid_override_pattern) & {"-", "E"}:  # an all-Mamba stack keeps the default (unused) activation
        require_config(cfg, "nemotron_h", activation="squared_relu")
    require_config(cfg, "nemotron_h", normalization="RMSNorm", position_embedding_type="none", add_bias_linear=False,
                   add_qkv_bias=False, add_dense_bias=False, qk_norm="none", mamba_version=2, sliding_window=None,
                   apply_layernorm_1p=False, post_norm=False, post_norm_only=False, mtp_num_layers=None,
                   attention_output_gate=False, softmax_type="vanilla")
    if "E" in cfg.hybrid_override_pattern:
        require_config(cfg, "nemotron_h", moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
                       moe_router_pre_softmax=False, shared_expert_gate=False)
        if cfg.moe_shared_expert_intermediate_size is None:
            raise RegistryError("nemotron_h MoE layers have a shared expert; add "
                                "--moe-shared-expert-intermediate-size")


def _nemotron_h_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_exportable(cfg)
    pattern = cfg.hybrid_override_pattern
    out: Dict[str, Any] = dict(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        layers_block_type=[LETTER_BLOCKS[letter] for letter in pattern],
        num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_query_groups,
        head_dim=cfg.kv_channels, max_position_embeddings=cfg.max_position_embeddings,
        intermediate_size=cfg.ffn_hidden_size, mlp_hidden_act="relu2", mlp_bias=cfg.add_mlp_bias,
        layer_norm_epsilon=cfg.norm_epsilon, tie_word_embeddings=False,
        residual_in_fp32=cfg.fp32_residual_connection, initializer_range=cfg.init_method_std, use_bias=False,
        attention_dropout=0.0, hidden_dropout=0.0, num_nextn_predict_layers=0, use_cache=True,
        torch_dtype=str(cfg.params_dtype).replace("torch.", ""))
    if "M" in pattern:
        out.update(ssm_state_size=cfg.mamba_state_dim, mamba_num_heads=cfg.mamba_num_heads,
                   mamba_head_dim=cfg.mamba_head_dim, n_groups=cfg.mamba_num_groups, conv_kernel=cfg.mamba_d_conv,
                   use_conv_bias=cfg.mamba_conv_bias, chunk_size=cfg.mamba_chunk_size, mamba_hidden_act="silu",
                   time_step_limit=dt_limits_hf(cfg))
    if "E" in pattern:
        out.update(n_routed_experts=cfg.num_experts, num_experts_per_tok=cfg.moe_router_topk,
                   moe_intermediate_size=cfg.moe_expert_ffn_hidden_size,
                   moe_shared_expert_intermediate_size=cfg.moe_shared_expert_intermediate_size, n_shared_experts=1,
                   norm_topk_prob=cfg.norm_topk_prob, routed_scaling_factor=scaling_factor_hf(cfg),
                   moe_latent_size=None, **group_routing_hf(cfg, "nemotron_h"))
    return out


def _block(ours: str, hf: List[str], transform: str = "copy") -> WeightRule:
    return WeightRule("decoder.layers.{i}." + ours, tuple("backbone.layers.{i}." + name for name in hf), transform)


NEMOTRON_H_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("backbone.embeddings.weight",), "vocab"),
    # one HF norm per block: ours is named by the layer's kind
    _block("norm.weight", ["norm.weight"]),
    _block("input_layernorm.weight", ["norm.weight"]),
    _block("pre_mlp_layernorm.weight", ["norm.weight"]),
    *(_block(f"mixer.{name}", [f"mixer.{name}"]) for name in MIXER_TENSORS),
    _block("self_attention.linear_qkv.weight", ["mixer.q_proj.weight", "mixer.k_proj.weight", "mixer.v_proj.weight"],
           "fuse_rows"),
    _block("self_attention.linear_proj.weight", ["mixer.o_proj.weight"]),
    _block("mlp.linear_fc1.weight", ["mixer.up_proj.weight"]),
    _block("mlp.linear_fc1.bias", ["mixer.up_proj.bias"]),
    _block("mlp.linear_fc2.weight", ["mixer.down_proj.weight"]),
    _block("mlp.linear_fc2.bias", ["mixer.down_proj.bias"]),
    _block("mlp.router.weight", ["mixer.gate.weight"]),
    _block("mlp.router.expert_bias", ["mixer.gate.e_score_correction_bias"]),
    _block("mlp.shared_experts.linear_fc1.weight", ["mixer.shared_experts.up_proj.weight"]),
    _block("mlp.shared_experts.linear_fc2.weight", ["mixer.shared_experts.down_proj.weight"]),
    WeightRule("decoder.final_layernorm.weight", ("backbone.norm_f.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)



def _nemotron_h_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """The map with the experts, which checkpoints save one tensor per expert (``mixer.experts.{e}.up_proj``
    [ffn, h], ``down_proj`` [h, ffn]), stacked into our ``[E, out, in]`` tensors."""
    if cfg.num_experts is None:
        return NEMOTRON_H_WEIGHTS
    experts = range(cfg.num_experts)
    return NEMOTRON_H_WEIGHTS + (
        _block("mlp.experts.linear_fc1.weight", [f"mixer.experts.{e}.up_proj.weight" for e in experts],
               "stack_experts"),
        _block("mlp.experts.linear_fc2.weight", [f"mixer.experts.{e}.down_proj.weight" for e in experts],
               "stack_experts"))


NEMOTRON_H = register(Family("nemotron_h", "nemotron_h", "NemotronHForCausalLM", _nemotron_h_config,
                             _checked("nemotron_h", _nemotron_h_config, _nemotron_h_hf_config), NEMOTRON_H_WEIGHTS, preserved_keys=PRESERVED,
                             weights_for=_nemotron_h_weights), "nemotron-h")

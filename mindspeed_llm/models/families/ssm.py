"""State-space families as registry data: Mamba, FalconMamba and Mamba2 (MindSpeed's ``mamba2``).

Every layer is a Mamba layer (``hybrid_override_pattern`` of all 'M'): an RMS
norm, the mixer (:mod:`core.transformer.mamba_mixer`) and a residual add; no attention,
MLP or position embedding. Mamba and FalconMamba use the selective scan
(``mamba_version`` 1; FalconMamba adds weightless norms on dt, B and C,
``mamba_mixer_rms_eps``); Mamba2 the chunked SSD with heads and groups.

    ours                                            HF
    embedding.word_embeddings.weight    [v_pad, h]  backbone.embeddings.weight  [v, h]   (vocab pad)
    decoder.layers.{i}.norm.weight                  backbone.layers.{i}.norm.weight
    decoder.layers.{i}.mixer.<name>                 backbone.layers.{i}.mixer.<name>     (same layout)
    decoder.final_layernorm.weight                  backbone.norm_f.weight
    output_layer.weight                 [v_pad, h]  lm_head.weight              [v, h]   (vocab pad)

``in_proj`` keeps HF's row order (Mamba ``[x; z]``, Mamba2 ``[z; x; B; C; dt]``),
which is also Megatron's; the TP split of each piece is the model's
(:class:`~core.tensor_parallel.param_meta.TPShard` segments), so the map copies.
Initialisation-only settings (``time_step_*`` ranges, ``rescale_prenorm_residual``)
are kept for the inverse config. ``residual_in_fp32`` (HF's default True) is
``fp32_residual_connection`` (``--fp32-residual-connection``) both ways, so a
bf16 checkpoint keeps its residual stream in fp32 as transformers does.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import Family, RegistryError, WeightRule, register

MIXER_TENSORS = ("in_proj.weight", "in_proj.bias", "conv1d.weight", "conv1d.bias", "x_proj.weight",
                 "dt_proj.weight", "dt_proj.bias", "A_log", "D", "dt_bias", "norm.weight", "out_proj.weight",
                 "out_proj.bias", "dt_layernorm.weight", "b_layernorm.weight", "c_layernorm.weight")

SSM_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("backbone.embeddings.weight",), "vocab"),
    WeightRule("decoder.layers.{i}.norm.weight", ("backbone.layers.{i}.norm.weight",)),
    *(WeightRule(f"decoder.layers.{{i}}.mixer.{name}", (f"backbone.layers.{{i}}.mixer.{name}",))
      for name in MIXER_TENSORS),
    WeightRule("decoder.final_layernorm.weight", ("backbone.norm_f.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
)

# HF keys our config does not model: initialisation ranges (see the module docstring)
PRESERVED = ("rescale_prenorm_residual", "time_step_scale", "time_step_min", "time_step_max",
             "time_step_init_scheme", "time_step_floor", "use_mambapy", "use_associative_scan")
# Mamba and FalconMamba build d_inner from intermediate_size (written back), so a stated ``expand`` that
# disagrees with it (falcon-mamba-7b's 16) changes nothing and is kept as published
MAMBA1_PRESERVED = PRESERVED + ("expand",)


def _expand(hf: Dict[str, Any], family: str) -> int:
    """d_inner / hidden. Mamba and FalconMamba take d_inner from ``intermediate_size`` when config.json gives it,
    as transformers builds the mixer from it whatever ``expand`` says (tiiuae/falcon-mamba-7b: ``expand`` 16,
    ``intermediate_size`` 8192 = 2 x 4096); otherwise, and for Mamba2, d_inner is ``expand`` x hidden."""
    hidden, expand = int(hf["hidden_size"]), hf.get("expand", 2)
    given = hf.get("intermediate_size") if family != "mamba2" else None
    if given is not None:
        if int(given) % hidden:
            raise RegistryError(f"{family} intermediate_size={given} is not expand x hidden_size={hidden} for an "
                                "integer expand: the decoder needs d_inner = expand x hidden")
        return int(given) // hidden
    inner = expand * hidden
    if inner != int(inner) or int(inner) % hidden:
        raise RegistryError(f"{family} expand={expand} with hidden_size={hidden} is not supported: the decoder needs "
                            "an integer expand (d_inner = expand x hidden)")
    return int(inner) // hidden


def _common_ssm_config(hf: Dict[str, Any], family: str, state_size: int = 16) -> Dict[str, Any]:
    """The fields every state-space family shares: an all-Mamba pattern, RMS norms, tied embeddings by default
    (``state_size``: the family's default when config.json omits it)."""
    if hf.get("hidden_act", "silu") != "silu":
        raise RegistryError(f"{family} hidden_act={hf['hidden_act']!r} is not supported (supported: silu)")
    layers = int(hf["num_hidden_layers"])
    kwargs: Dict[str, Any] = dict(
        num_layers=layers, hidden_size=int(hf["hidden_size"]), num_attention_heads=1,
        vocab_size=int(hf["vocab_size"]), normalization="RMSNorm",
        norm_epsilon=float(hf.get("layer_norm_epsilon", 1e-5)), position_embedding_type="none",
        add_bias_linear=bool(hf.get("use_bias", False)),
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", True),
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.1)),
        make_vocab_size_divisible_by=1, hybrid_override_pattern="M" * layers,
        mamba_state_dim=int(hf.get("state_size", state_size)), mamba_expand=_expand(hf, family),
        mamba_d_conv=int(hf.get("conv_kernel", 4)), mamba_conv_bias=bool(hf.get("use_conv_bias", True)),
        fp32_residual_connection=bool(hf.get("residual_in_fp32", True)))
    dtype = hf.get("torch_dtype") or hf.get("dtype")
    if isinstance(dtype, str) and hasattr(torch, dtype):
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _common_ssm_hf_config(cfg: TransformerConfig, family: str, version: int) -> Dict[str, Any]:
    pattern = cfg.hybrid_override_pattern
    if pattern is None or set(pattern) != {"M"} or cfg.mamba_version != version:
        raise RegistryError(f"{family} needs every layer a Mamba layer (--hybrid-override-pattern of 'M') and "
                            f"--mamba-version {version}")
    if cfg.normalization != "RMSNorm" or cfg.apply_layernorm_1p or cfg.non_parametric_norm:
        raise RegistryError(f"{family} needs --normalization RMSNorm (without offsets)")
    return dict(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                state_size=cfg.mamba_state_dim, expand=cfg.mamba_expand, conv_kernel=cfg.mamba_d_conv,
                use_bias=cfg.add_bias_linear, use_conv_bias=cfg.mamba_conv_bias, hidden_act="silu",
                layer_norm_epsilon=cfg.norm_epsilon, initializer_range=cfg.init_method_std,
                tie_word_embeddings=not cfg.untie_embeddings_and_output_weights, use_cache=True,
                residual_in_fp32=cfg.fp32_residual_connection,
                torch_dtype=str(cfg.params_dtype).replace("torch.", ""))


def _dt_rank(hf: Dict[str, Any]) -> int:
    rank = hf.get("time_step_rank", "auto")
    return math.ceil(int(hf["hidden_size"]) / 16) if rank == "auto" else int(rank)


def _mamba_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_ssm_config(hf, "mamba"), "mamba_version": 1, "mamba_dt_rank": _dt_rank(hf)}


def _mamba_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.mamba_mixer_rms_eps is not None:
        raise RegistryError("mamba has no dt/B/C norms (--mamba-mixer-rms-eps); use --model-type-hf falcon_mamba")
    return {**_common_ssm_hf_config(cfg, "mamba", 1), "time_step_rank": cfg.mamba_dt_rank_or_default,
            "intermediate_size": cfg.mamba_d_inner}


def _falcon_mamba_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_ssm_config(hf, "falcon_mamba"), "mamba_version": 1, "mamba_dt_rank": _dt_rank(hf),
            "mamba_mixer_rms_eps": float(hf.get("mixer_rms_eps", 1e-6))}


def _falcon_mamba_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.mamba_mixer_rms_eps is None:
        raise RegistryError("falcon_mamba needs --mamba-mixer-rms-eps (its norms on dt, B and C)")
    return {**_common_ssm_hf_config(cfg, "falcon_mamba", 1), "time_step_rank": cfg.mamba_dt_rank_or_default,
            "intermediate_size": cfg.mamba_d_inner, "mixer_rms_eps": cfg.mamba_mixer_rms_eps}


INFINITY = {"__float__": "Infinity"}  # how transformers writes inf into config.json


def _json_float(value: Any) -> float:
    """A float of config.json, where transformers writes inf as ``{"__float__": "Infinity"}``."""
    return float(value["__float__"]) if isinstance(value, dict) else float(value)


def _mamba2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("norm_before_gate", False):
        raise RegistryError("mamba2 norm_before_gate=True is not supported (the gate multiplies before the norm)")
    if not hf.get("rms_norm", True):
        raise RegistryError("mamba2 rms_norm=False is not supported (the gated RMS norm is always applied)")
    kwargs = {**_common_ssm_config(hf, "mamba2", state_size=128), "mamba_version": 2,
              "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", False),
              "mamba_head_dim": int(hf.get("head_dim", 64)), "mamba_num_groups": int(hf.get("n_groups", 8)),
              "mamba_chunk_size": int(hf.get("chunk_size", 256))}
    inner, heads = kwargs["mamba_expand"] * kwargs["hidden_size"], int(hf.get("num_heads", 128))
    if heads * kwargs["mamba_head_dim"] != inner:
        raise RegistryError(f"mamba2 num_heads={heads} x head_dim={kwargs['mamba_head_dim']} is not expand x "
                            f"hidden_size = {inner}")
    return {**kwargs, **dt_limits(hf)}


def dt_limits(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``time_step_limit`` (dt clamped to [low, high] after the softplus) as our dt limit fields."""
    low, high = (_json_float(bound) for bound in hf.get("time_step_limit") or (0.0, float("inf")))
    return {"mamba_dt_limit_min": low, "mamba_dt_limit_max": None if math.isinf(high) else high}


def dt_limits_hf(cfg: TransformerConfig) -> List[Any]:
    """Our dt limits as ``time_step_limit``."""
    upper = cfg.mamba_dt_limit_max
    return [cfg.mamba_dt_limit_min, INFINITY if upper is None else upper]


def _mamba2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_common_ssm_hf_config(cfg, "mamba2", 2), "num_heads": cfg.mamba_num_heads,
            "head_dim": cfg.mamba_head_dim, "n_groups": cfg.mamba_num_groups, "chunk_size": cfg.mamba_chunk_size,
            "time_step_limit": dt_limits_hf(cfg)}


MAMBA = register(Family("mamba", "mamba", "MambaForCausalLM", _mamba_config, _mamba_hf_config, SSM_WEIGHTS,
                        preserved_keys=MAMBA1_PRESERVED))
FALCON_MAMBA = register(Family("falcon_mamba", "falcon_mamba", "FalconMambaForCausalLM", _falcon_mamba_config,
                               _falcon_mamba_hf_config, SSM_WEIGHTS, preserved_keys=MAMBA1_PRESERVED), "falcon-mamba")
MAMBA2 = register(Family("mamba2", "mamba2", "Mamba2ForCausalLM", _mamba2_config, _mamba2_hf_config, SSM_WEIGHTS,
                         preserved_keys=PRESERVED))

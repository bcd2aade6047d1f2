"""Hybrids whose HF layer is a token mixer and then an MLP, as registry data: Bamba (``bamba``), Granite-4
(``granitemoehybrid``), Jamba (``jamba``) and Falcon-H1 (``falcon_h1``).

Each HF decoder layer ``j`` is a Mamba mixer (Mamba2; Jamba's Mamba1) or an attention block, then an MLP (Bamba: a
SwiGLU ``feed_forward``; Granite-4: its MoE plus an ungated shared expert, or the shared expert alone without
experts; Jamba: a SwiGLU MLP or, every ``expert_layer_period``-th layer, an MoE), each branch behind its own
pre-norm and residual add. One letter of our ``--hybrid-override-pattern`` is one norm and one branch, so HF layer
``j`` is our layers ``2j`` (``M`` or ``*``) and ``2j + 1`` (``-`` or ``E``): a 3-layer Bamba with
``attn_layer_indices [1]`` is ``M-*-M-``. The weight rules pair them with a layer stride of 2.

    ours                                               HF (model.layers.{j}.*)
    decoder.layers.{2j}.norm | input_layernorm         input_layernorm                 (by the mixer)
    decoder.layers.{2j}.mixer.<name>                   mamba.<name>                    (same layout)
    decoder.layers.{2j}.self_attention.linear_qkv      cat(self_attn.q_proj, k_proj, v_proj)   (fuse rows)
    decoder.layers.{2j}.self_attention.linear_proj     self_attn.o_proj
    decoder.layers.{2j+1}.pre_mlp_layernorm            pre_ff_layernorm (Bamba, Jamba) | post_attention_layernorm
    decoder.layers.{2j+1}.mlp.linear_fc1 / fc2         feed_forward.[gate; up] / down (Bamba, Jamba)
                                                       | shared_mlp.input_linear / output_linear (dense Granite-4)
    decoder.layers.{2j+1}.mlp.router / experts         block_sparse_moe.router.layer, input_linear, output_linear
                                                       | feed_forward.router, experts.{e}.gate/up/down_proj (Jamba)
    decoder.layers.{2j+1}.mlp.shared_experts           shared_mlp.input_linear / output_linear

Bamba's attention rotates half of each head (transformers fixes ``partial_rotary_factor`` at 0.5) and has
``attention_bias`` on q/k/v and o; its MLP has ``mlp_bias``. Granite-4 adds Granite's scales (embedding,
attention, logits, and ``residual_multiplier`` on every branch, the Mamba mixer's too), RoPE or none
(``position_embedding_type``), and Mixtral's routing (softmax over the top-k logits). Their Mamba2 mixers are the
one of :mod:`~mindspeed_llm.models.families.ssm` with ``mamba_n_heads x mamba_d_head = mamba_expand x hidden``
channels and dt clamped to ``time_step_limit``. Jamba's attention has no positions and no biases; its Mamba1
mixer norms dt, B and C with weights (``--mamba-mixer-rms-eps`` = ``rms_norm_eps`` with
``--mamba-mixer-rms-weights``); its router takes the top-k of the softmax over all experts, not renormalised.
Jamba's attention and expert layers are every ``attn_layer_period``-th / ``expert_layer_period``-th layer from
an offset; a pattern without such a period is refused on export.

Falcon-H1's mixer is a Mamba2 and an attention side by side on the layer's one norm (our letter ``H``,
:mod:`core.transformer.parallel_hybrid`), so HF layer ``j`` is ``H`` then ``-``::

    decoder.layers.{2j}.self_attention.mamba.<name>             mamba.<name>
    decoder.layers.{2j}.self_attention.attention.linear_qkv     cat(self_attn.q_proj, k_proj, v_proj)
    decoder.layers.{2j}.self_attention.attention.linear_proj    self_attn.o_proj

Its Mamba width is ``mamba_d_ssm`` (``--mamba-num-heads`` x head dim, not expand x hidden); its gated norm is
optional (``mamba_rms_norm``: ``--disable-mamba-rmsnorm`` without it) and may norm before the gate
(``--mamba-norm-before-gate``). Its muP scales are flags applied in the forward, so training sees them as the
original does: ``embedding_multiplier``, ``lm_head_multiplier`` (``--output-multiplier-scale``),
``key_multiplier`` (a factor on the softmax scale: ``q . (m k) = m (q . k)``), ``attention_in/out_multiplier``,
``ssm_in/out_multiplier``, ``ssm_multipliers`` (one per in_proj part z, x, B, C, dt) and ``mlp_multipliers``
(the gate before SiLU, the output). Its biases (``attention_bias``, ``mlp_bias``, ``projectors_bias``) are
refused: every published model has none.

Refused in one line: Mamba projection biases (``mamba_proj_bias``), a non-SiLU activation, Bamba's logit z-loss
(``z_loss_coefficient``: a training loss the suite does not add) and router jitter.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.families.hybrid_ssm import BLOCK_LETTERS
from mindspeed_llm.models.families.llama_like import _refuse
from mindspeed_llm.models.families.moe_common import _moe_common, per_expert_weights
from mindspeed_llm.models.families.moe_softmax import (GRANITEMOE_WEIGHTS, NO_ROUTING_EXTRAS, _attention_bias_hf,
                                                      _attention_biases)
from mindspeed_llm.models.families.ssm import MIXER_TENSORS, dt_limits, dt_limits_hf
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, _common_config,
                                           _common_hf_config, _granite_scales, _granite_scales_hf, _layer, register,
                                           require_config)

MIXER_LETTERS, MLP_LETTERS = "M*", "-E"
HF_LAYER_TYPES = {"M": "linear_attention", "*": "full_attention"}
ROPE_FIELDS = ("rotary_base", "rotary_percent")
PRESERVED = ("num_logits_to_keep", "output_router_logits", "z_loss_coefficient")


def _mixer_letters(hf: Dict[str, Any], family: str) -> str:
    """Per HF layer, 'M' (Mamba2) or '*' (attention): from ``layer_types`` (either spelling), else from Bamba's
    ``attn_layer_indices`` (every other layer Mamba)."""
    types = hf.get("layer_types") or hf.get("layers_block_type")
    layers = int(hf["num_hidden_layers"])
    if not types:
        attention = set(hf.get("attn_layer_indices") or ())
        return "".join("*" if i in attention else "M" for i in range(layers))
    letters = [BLOCK_LETTERS.get(kind) for kind in types]
    if len(types) != layers or any(letter not in HF_LAYER_TYPES for letter in letters):
        raise RegistryError(f"{family} layer_types {list(types)} must name {layers} layers, each linear_attention "
                            "(mamba) or full_attention (attention)")
    return "".join(letters)


def _pairs_of(cfg: TransformerConfig, family: str, mlp: str, mixer: str = MIXER_LETTERS) -> Tuple[str, str]:
    """(mixer letters, MLP letters) of the HF layers of ``cfg``'s pattern, which must pair every mixer (a letter
    of ``mixer``) with a letter of ``mlp``."""
    pattern = cfg.hybrid_override_pattern or ""
    mixers, mlps = pattern[0::2], pattern[1::2]
    if not pattern or len(mixers) != len(mlps) or set(mixers) - set(mixer) or set(mlps) - set(mlp):
        raise RegistryError(f"{family} needs --hybrid-override-pattern of pairs, an {' or '.join(mixer)} layer then "
                            f"a {' or '.join(repr(letter) for letter in mlp)} layer (one HF layer each); got "
                            f"{pattern!r}")
    return mixers, mlps


def _mamba_fields(hf: Dict[str, Any], family: str) -> Dict[str, Any]:
    hidden, heads = int(hf["hidden_size"]), int(hf.get("mamba_n_heads", 128))
    expand = int(hf.get("mamba_expand", 2))
    head_dim = hf.get("mamba_d_head", "auto")
    head_dim = expand * hidden // heads if head_dim in (None, "auto") else int(head_dim)
    if heads * head_dim != expand * hidden:
        raise RegistryError(f"{family} mamba_n_heads x mamba_d_head = {heads * head_dim} is not mamba_expand x "
                            f"hidden_size = {expand * hidden}")
    return dict(mamba_version=2, mamba_state_dim=int(hf.get("mamba_d_state", 256)), mamba_head_dim=head_dim,
                mamba_num_groups=int(hf.get("mamba_n_groups", 1)), mamba_expand=expand,
                mamba_d_conv=int(hf.get("mamba_d_conv", 4)), mamba_conv_bias=bool(hf.get("mamba_conv_bias", True)),
                mamba_chunk_size=int(hf.get("mamba_chunk_size", 256)), **dt_limits(hf))


def _mamba_fields_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return dict(mamba_n_heads=cfg.mamba_num_heads, mamba_d_head=cfg.mamba_head_dim,
                mamba_n_groups=cfg.mamba_num_groups, mamba_d_state=cfg.mamba_state_dim, mamba_d_conv=cfg.mamba_d_conv,
                mamba_expand=cfg.mamba_expand, mamba_chunk_size=cfg.mamba_chunk_size,
                mamba_conv_bias=cfg.mamba_conv_bias, mamba_proj_bias=False, time_step_limit=dt_limits_hf(cfg))


def _hybrid_config(hf: Dict[str, Any], family: str, mixers: str, mlps: str) -> Dict[str, Any]:
    """The fields the families share: Llama's attention and sizes and the paired pattern of the HF layers'
    ``mixers`` and ``mlps`` letters."""
    _refuse(family, hf, mamba_proj_bias=False, hidden_act="silu")
    return {**_common_config(hf), "num_layers": 2 * len(mixers),
            "hybrid_override_pattern": "".join(mixer + mlp for mixer, mlp in zip(mixers, mlps))}


def _hybrid_hf_config(cfg: TransformerConfig, family: str, mlp: str, mamba_version: int = 2,
                      mixer: str = MIXER_LETTERS) -> Tuple[Dict[str, Any], str, str]:
    """(the shared HF keys, the HF layers' mixer letters, their MLP letters); refuses what no family's config
    can say."""
    mixers, mlps = _pairs_of(cfg, family, mlp, mixer)
    require_config(cfg, family, normalization="RMSNorm", activation="swiglu", qk_norm="none", sliding_window=None,
                   apply_layernorm_1p=False, post_norm=False, post_norm_only=False, mtp_num_layers=None,
                   attention_output_gate=False, softmax_type="vanilla", mamba_version=mamba_version)
    out = {**_common_hf_config(cfg), "num_hidden_layers": len(mixers), "hidden_act": "silu"}
    return out, mixers, mlps


def _mamba2_config(hf: Dict[str, Any], family: str, mlp: str) -> Dict[str, Any]:
    """Bamba's and Granite-4's shared fields: :func:`_hybrid_config` with ``mlp`` after every mixer, and the
    Mamba2 mixer."""
    mixers = _mixer_letters(hf, family)
    kwargs = _hybrid_config(hf, family, mixers, mlp * len(mixers))
    if "M" in mixers:
        kwargs.update(_mamba_fields(hf, family))
    return kwargs


def _mamba2_hf_config(cfg: TransformerConfig, family: str, mlp: str) -> Tuple[Dict[str, Any], str]:
    out, mixers, _ = _hybrid_hf_config(cfg, family, mlp)
    if "M" in mixers:
        out.update(_mamba_fields_hf(cfg))
    return out, mixers


def _without_positions(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` of a model whose attention has no positions: no RoPE fields, ``position_embedding_type none``."""
    return {**{key: value for key, value in kwargs.items() if key not in ROPE_FIELDS},
            "position_embedding_type": "none"}


# --------------------------------------------------------------------------- Bamba


def _bamba_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    _refuse("bamba", hf, z_loss_coefficient=0.0)
    kwargs = _mamba2_config(hf, "bamba", "-")
    kwargs["rotary_percent"] = 0.5  # transformers' BambaConfig fixes it whatever config.json says
    attention_bias = bool(hf.get("attention_bias", False))
    kwargs.update(add_bias_linear=False, add_qkv_bias=attention_bias, add_dense_bias=attention_bias,
                  add_mlp_bias=bool(hf.get("mlp_bias", False)))
    return kwargs


def _bamba_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out, mixers = _mamba2_hf_config(cfg, "bamba", "-")
    require_config(cfg, "bamba", "--rotary-percent 0.5", position_embedding_type="rope", rotary_percent=0.5)
    return {**out, "attention_bias": _attention_bias_hf(cfg, "bamba", mlp_bias=True), "mlp_bias": cfg.mlp_bias,
            "z_loss_coefficient": 0.0,
            "attn_layer_indices": [j for j, letter in enumerate(mixers) if letter == "*"]}


# --------------------------------------------------------------------------- Granite-4 (GraniteMoeHybrid)


def _granite4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    experts = int(hf.get("num_local_experts", 8) or 0)
    kwargs = _mamba2_config(hf, "granitemoehybrid", "E" if experts else "-")
    kwargs.update(**_attention_biases(hf), **_granite_scales(hf))
    if hf.get("position_embedding_type") != "rope":  # None or "nope": no positions
        kwargs = _without_positions(kwargs)
    shared = int(hf.get("shared_intermediate_size", 1024))
    if experts:
        kwargs.update(**_moe_common(hf, "granitemoehybrid", "num_local_experts"),
                      moe_shared_expert_intermediate_size=shared)
    else:  # the shared expert alone is the layer's dense MLP
        kwargs["ffn_hidden_size"] = shared
    return kwargs


def _granite4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    moe = cfg.num_experts is not None
    out, mixers = _mamba2_hf_config(cfg, "granitemoehybrid", "E" if moe else "-")
    out.update(attention_bias=_attention_bias_hf(cfg, "granitemoehybrid"), **_granite_scales_hf(cfg),
               layer_types=[HF_LAYER_TYPES[letter] for letter in mixers],
               position_embedding_type="rope" if cfg.position_embedding_type == "rope" else None)
    if cfg.position_embedding_type not in ("rope", "none"):
        raise RegistryError(f"granitemoehybrid has RoPE or no positions; the config sets --position-embedding-type "
                            f"{cfg.position_embedding_type}")
    if not moe:
        return {**out, "num_local_experts": 0, "shared_intermediate_size": cfg.ffn_hidden_size}
    require_config(cfg, "granitemoehybrid", moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   **NO_ROUTING_EXTRAS)
    if cfg.moe_shared_expert_intermediate_size is None:
        raise RegistryError("granitemoehybrid MoE layers have a shared expert; add "
                            "--moe-shared-expert-intermediate-size")
    return {**out, "num_local_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "intermediate_size": cfg.moe_expert_ffn_hidden_size, "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
            "shared_intermediate_size": cfg.moe_shared_expert_intermediate_size}


# --------------------------------------------------------------------------- Jamba


def _every(layers: int, period: int, offset: int) -> List[bool]:
    return [j % period == offset for j in range(layers)]


def _jamba_letters(hf: Dict[str, Any]) -> Tuple[str, str]:
    """(mixer letters, MLP letters) per HF layer: attention every ``attn_layer_period``-th layer from
    ``attn_layer_offset``, MoE every ``expert_layer_period``-th from ``expert_layer_offset`` (with experts)."""
    layers = int(hf["num_hidden_layers"])
    attention = _every(layers, int(hf.get("attn_layer_period", 8)), int(hf.get("attn_layer_offset", 4)))
    moe = _every(layers, int(hf.get("expert_layer_period", 2)), int(hf.get("expert_layer_offset", 1)))
    return ("".join("*" if mark else "M" for mark in attention),
            "".join("E" if mark and int(hf["num_experts"]) > 1 else "-" for mark in moe))


def _jamba_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"num_experts": 16, **hf}  # JambaConfig's default when config.json omits it
    mixers, mlps = _jamba_letters(hf)
    kwargs = _without_positions(_hybrid_config(hf, "jamba", mixers, mlps))  # Jamba's attention has no positions
    if "M" in mixers:
        hidden, rank = int(hf["hidden_size"]), hf.get("mamba_dt_rank", "auto")
        kwargs.update(mamba_version=1, mamba_state_dim=int(hf.get("mamba_d_state", 16)),
                      mamba_d_conv=int(hf.get("mamba_d_conv", 4)), mamba_expand=int(hf.get("mamba_expand", 2)),
                      mamba_dt_rank=math.ceil(hidden / 16) if rank in (None, "auto") else int(rank),
                      mamba_conv_bias=bool(hf.get("mamba_conv_bias", True)),
                      mamba_mixer_rms_eps=kwargs["norm_epsilon"], mamba_mixer_rms_weights=True)
    if "E" in mlps:
        kwargs.update(**_moe_common(hf, "jamba", "num_experts"), moe_router_pre_softmax=True, norm_topk_prob=False)
    return kwargs


def _period(marks: List[bool], what: str) -> Tuple[int, int]:
    """(period, offset) with layer ``j`` marked exactly when ``j % period == offset`` (the smallest period)."""
    for period in range(1, len(marks) + 2):
        for offset in range(period):
            if _every(len(marks), period, offset) == marks:
                return period, offset
    raise RegistryError(f"jamba places its {what} layers every n-th HF layer from an offset; the pattern has them "
                        f"at HF layers {[j for j, mark in enumerate(marks) if mark]}")


def _jamba_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out, mixers, mlps = _hybrid_hf_config(cfg, "jamba", MLP_LETTERS, mamba_version=1)
    require_config(cfg, "jamba", position_embedding_type="none", add_bias_linear=False, add_qkv_bias=False,
                   add_dense_bias=False, add_mlp_bias=False)
    attention, moe = _period([m == "*" for m in mixers], "attention"), _period([m == "E" for m in mlps], "MoE")
    out.update(attn_layer_period=attention[0], attn_layer_offset=attention[1], expert_layer_period=moe[0],
               expert_layer_offset=moe[1], mamba_proj_bias=False)
    if "M" in mixers:
        require_config(cfg, "jamba", f"--mamba-mixer-rms-eps {cfg.norm_epsilon} --mamba-mixer-rms-weights",
                       mamba_mixer_rms_eps=cfg.norm_epsilon, mamba_mixer_rms_weights=True)
        out.update(mamba_d_state=cfg.mamba_state_dim, mamba_d_conv=cfg.mamba_d_conv, mamba_expand=cfg.mamba_expand,
                   mamba_dt_rank=cfg.mamba_dt_rank_or_default, mamba_conv_bias=cfg.mamba_conv_bias)
    if "E" not in mlps:
        return {**out, "num_experts": 1, "num_experts_per_tok": 1}
    require_config(cfg, "jamba", moe_router_score_function="softmax", moe_router_pre_softmax=True,
                   norm_topk_prob=False, moe_shared_expert_intermediate_size=None,
                   moe_ffn_hidden_size=cfg.ffn_hidden_size, **NO_ROUTING_EXTRAS)
    return {**out, "num_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "router_aux_loss_coef": cfg.moe_aux_loss_coeff}


# --------------------------------------------------------------------------- Falcon-H1

# FalconH1Config's defaults where a config.json omits a key
FALCON_H1_DEFAULTS = dict(rms_norm_eps=1e-5, mamba_d_ssm=1024, mamba_n_heads=128, mamba_d_head="auto",
                          mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=256,
                          mamba_conv_bias=True, mamba_rms_norm=False, mamba_norm_before_gate=True)
# FalconH1Config's muP scales -> ours (None: 1, no multiply)
FALCON_H1_SCALES = dict(embedding_multiplier="embedding_multiplier", lm_head_multiplier="output_multiplier_scale",
                        attention_in_multiplier="attention_in_multiplier",
                        attention_out_multiplier="attention_out_multiplier", ssm_in_multiplier="ssm_in_multiplier",
                        ssm_out_multiplier="ssm_out_multiplier")


def _scale(value: Any) -> Any:
    return None if value is None or float(value) == 1.0 else float(value)


def _scales(values: Any, count: int) -> Tuple[float, ...]:
    """A list of muP scales, () when every one is 1 (or none is given)."""
    scales = tuple(float(v) for v in (values or ()))
    if scales and len(scales) != count:
        raise RegistryError(f"falcon_h1 needs {count} scales, got {list(scales)}")
    return () if all(v == 1.0 for v in scales) else scales


def _falcon_h1_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Falcon-H1: every HF layer a Mamba2 and an attention on one norm ('H'), then a SwiGLU MLP ('-'), with
    muP scales on the embeddings, both mixers, the MLP and the logits."""
    hf = {**FALCON_H1_DEFAULTS, **{key: value for key, value in hf.items() if value is not None}}
    _refuse("falcon_h1", hf, attention_bias=False, mlp_bias=False, projectors_bias=False)
    layers = int(hf["num_hidden_layers"])
    kwargs = _hybrid_config(hf, "falcon_h1", "H" * layers, "-" * layers)
    hidden, heads, expand = int(hf["hidden_size"]), int(hf["mamba_n_heads"]), int(hf["mamba_expand"])
    inner = int(hf["mamba_d_ssm"]) if hf.get("mamba_d_ssm") is not None else expand * hidden
    head_dim = inner // heads if hf["mamba_d_head"] == "auto" else int(hf["mamba_d_head"])
    if heads * head_dim != inner:
        raise RegistryError(f"falcon_h1 mamba_n_heads x mamba_d_head = {heads * head_dim} is not the Mamba width "
                            f"{inner} (mamba_d_ssm, else mamba_expand x hidden_size)")
    rms_norm = bool(hf["mamba_rms_norm"])
    kwargs.update(mamba_version=2, mamba_heads=heads, mamba_head_dim=head_dim, mamba_expand=expand,
                  mamba_state_dim=int(hf["mamba_d_state"]), mamba_num_groups=int(hf["mamba_n_groups"]),
                  mamba_d_conv=int(hf["mamba_d_conv"]), mamba_conv_bias=bool(hf["mamba_conv_bias"]),
                  mamba_chunk_size=int(hf["mamba_chunk_size"]), mamba_rmsnorm=rms_norm,
                  mamba_norm_before_gate=rms_norm and bool(hf["mamba_norm_before_gate"]), **dt_limits(hf),
                  ssm_multipliers=_scales(hf.get("ssm_multipliers"), 5),
                  mlp_multipliers=_scales(hf.get("mlp_multipliers"), 2),
                  **{ours: _scale(hf.get(theirs)) for theirs, ours in FALCON_H1_SCALES.items()})
    key_multiplier = _scale(hf.get("key_multiplier"))
    if key_multiplier is not None:  # q . (m k) / sqrt(d): the key scale is a softmax scale
        kwargs["softmax_scale"] = key_multiplier * kwargs["kv_channels"] ** -0.5
    return kwargs


def _falcon_h1_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out, _, _ = _hybrid_hf_config(cfg, "falcon_h1", "-", mixer="H")
    require_config(cfg, "falcon_h1", position_embedding_type="rope", add_bias_linear=False, add_qkv_bias=False,
                   add_dense_bias=False, add_mlp_bias=False)
    key_multiplier = (cfg.softmax_scale or cfg.kv_channels ** -0.5) * cfg.kv_channels ** 0.5
    return {**out, "mamba_d_ssm": cfg.mamba_d_inner, "mamba_n_heads": cfg.mamba_num_heads,
            "mamba_d_head": cfg.mamba_head_dim, "mamba_n_groups": cfg.mamba_num_groups,
            "mamba_d_state": cfg.mamba_state_dim, "mamba_d_conv": cfg.mamba_d_conv, "mamba_expand": cfg.mamba_expand,
            "mamba_chunk_size": cfg.mamba_chunk_size, "mamba_conv_bias": cfg.mamba_conv_bias,
            "mamba_proj_bias": False, "projectors_bias": False, "attention_bias": False, "mlp_bias": False,
            "mamba_rms_norm": cfg.mamba_rmsnorm, "mamba_norm_before_gate": cfg.mamba_norm_before_gate or
            not cfg.mamba_rmsnorm, "time_step_limit": dt_limits_hf(cfg), "key_multiplier": key_multiplier,
            "ssm_multipliers": list(cfg.ssm_multipliers or (1.0,) * 5),
            "mlp_multipliers": list(cfg.mlp_multipliers or (1.0,) * 2),
            **{theirs: getattr(cfg, ours) or 1.0 for theirs, ours in FALCON_H1_SCALES.items()}}


# --------------------------------------------------------------------------- weight maps


def _half(rule: WeightRule, offset: int) -> WeightRule:
    """A per-layer ``rule`` (our layer = HF layer) moved to one half of each HF layer ``j``: our layer
    ``2j + offset`` (0: the mixer, 1: the MLP)."""
    return dataclasses.replace(rule, layer_stride=2, layer_offset=offset)


def _mixer(ours: str, hf: List[str], transform: str = "copy") -> WeightRule:
    return _half(_layer(ours, hf, transform), 0)


def _mlp(ours: str, hf: List[str], transform: str = "copy") -> WeightRule:
    return _half(_layer(ours, hf, transform), 1)


def _ends(final_norm: str) -> Tuple[WeightRule, ...]:
    return (WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
            WeightRule("decoder.final_layernorm.weight", (final_norm,)),
            WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"))


MIXER_WEIGHTS: Tuple[WeightRule, ...] = (
    _mixer("norm.weight", ["input_layernorm.weight"]),
    _mixer("input_layernorm.weight", ["input_layernorm.weight"]),
    *(_mixer(f"mixer.{name}", [f"mamba.{name}"]) for name in MIXER_TENSORS),
    *(_mixer(f"self_attention.linear_qkv.{kind}", [f"self_attn.{p}_proj.{kind}" for p in "qkv"], "fuse_rows")
      for kind in ("weight", "bias")),
    *(_mixer(f"self_attention.linear_proj.{kind}", [f"self_attn.o_proj.{kind}"]) for kind in ("weight", "bias")),
)

FEED_FORWARD_WEIGHTS: Tuple[WeightRule, ...] = (  # Bamba's and Jamba's dense MLP
    _mlp("pre_mlp_layernorm.weight", ["pre_ff_layernorm.weight"]),
    *(_mlp(f"mlp.linear_fc1.{kind}", [f"feed_forward.gate_proj.{kind}", f"feed_forward.up_proj.{kind}"], "fuse_rows")
      for kind in ("weight", "bias")),
    *(_mlp(f"mlp.linear_fc2.{kind}", [f"feed_forward.down_proj.{kind}"]) for kind in ("weight", "bias")),
)
BAMBA_WEIGHTS: Tuple[WeightRule, ...] = MIXER_WEIGHTS + FEED_FORWARD_WEIGHTS + _ends("model.final_layernorm.weight")
JAMBA_WEIGHTS: Tuple[WeightRule, ...] = BAMBA_WEIGHTS


def _jamba_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """The map plus the experts of the MoE layers, which checkpoints save one tensor per expert
    (``feed_forward.experts.{e}.gate_proj``...), stacked into ours; the router is ``feed_forward.router``."""
    if cfg.num_experts is None:
        return JAMBA_WEIGHTS
    experts = per_expert_weights(cfg, "feed_forward", "gate_proj", "up_proj", "down_proj", "router")
    return JAMBA_WEIGHTS + tuple(_half(rule, 1) for rule in experts)


FALCON_H1_WEIGHTS: Tuple[WeightRule, ...] = (  # the 'H' layer's two mixers, then Bamba's MLP half
    _mixer("input_layernorm.weight", ["input_layernorm.weight"]),
    *(_mixer(f"self_attention.mamba.{name}", [f"mamba.{name}"]) for name in MIXER_TENSORS),
    _mixer("self_attention.attention.linear_qkv.weight", [f"self_attn.{p}_proj.weight" for p in "qkv"], "fuse_rows"),
    _mixer("self_attention.attention.linear_proj.weight", ["self_attn.o_proj.weight"]),
) + FEED_FORWARD_WEIGHTS + _ends("model.final_layernorm.weight")

GRANITE4_WEIGHTS: Tuple[WeightRule, ...] = MIXER_WEIGHTS + (
    # without experts the shared MLP is the layer's dense MLP ([2 ffn, h] [gate; up]: our layout)
    _mlp("mlp.linear_fc1.weight", ["shared_mlp.input_linear.weight"]),
    _mlp("mlp.linear_fc2.weight", ["shared_mlp.output_linear.weight"]),
    # the pre-MLP norm, router, experts and shared expert as GraniteMoe saves them, on the MLP half
    *(_half(rule, 1) for rule in GRANITEMOE_WEIGHTS
      if rule.ours.startswith(("decoder.layers.{i}.mlp.", "decoder.layers.{i}.pre_mlp_layernorm."))),
) + _ends("model.norm.weight")

BAMBA = register(Family("bamba", "bamba", "BambaForCausalLM", _bamba_config,
                        _checked("bamba", _bamba_config, _bamba_hf_config), BAMBA_WEIGHTS, preserved_keys=PRESERVED))
GRANITE4 = register(Family("granitemoehybrid", "granitemoehybrid", "GraniteMoeHybridForCausalLM", _granite4_config,
                           _checked("granitemoehybrid", _granite4_config, _granite4_hf_config), GRANITE4_WEIGHTS,
                           preserved_keys=PRESERVED), "granite4", "granite-4")
JAMBA = register(Family("jamba", "jamba", "JambaForCausalLM", _jamba_config,
                        _checked("jamba", _jamba_config, _jamba_hf_config), JAMBA_WEIGHTS,
                        preserved_keys=PRESERVED + ("use_mamba_kernels", "use_mambapy", "use_associative_scan"),
                        weights_for=_jamba_weights))
FALCON_H1 = register(Family("falcon_h1", "falcon_h1", "FalconH1ForCausalLM", _falcon_h1_config,
                            _checked("falcon_h1", _falcon_h1_config, _falcon_h1_hf_config), FALCON_H1_WEIGHTS,
                            preserved_keys=("num_logits_to_keep",)), "falcon-h1")

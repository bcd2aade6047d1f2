"""MiniMax-Text-01 (``minimax``) as registry data: lightning-attention layers beside softmax attention, every
layer with Mixtral's mixture of experts, and a residual path of its own.

HF ``layer_types`` (``linear_attention`` / ``full_attention``) become ``--experimental-attention-variant
lightning`` with ``--linear-attention-freq`` as a list of 1 (lightning) and 0 (attention) per layer. A lightning
layer has the attention layers' heads and head dim (``num_attention_heads``, ``head_dim``): our
``--linear-num-{key,value}-heads`` and ``--linear-{key,value}-head-dim``; transformers' ``block_size`` (the
block of its lightning loop) is our ``--linear-chunk-size``. Its decay rates are fixed by the layer's depth
(:mod:`core.transformer.lightning_attention`), so the config carries no tensor for them: transformers saves
them as buffers (``slope_rate``, ``query_decay``, ``key_decay``, ``diagonal_decay``), which the converter
neither reads nor writes (``IGNORED_HF_TENSORS``; transformers recomputes them on load).

    ours (decoder.layers.{i}.*)                       HF (model.layers.{i}.*)
    self_attention.in_proj   [qkv; gate]              self_attn.qkv_proj, self_attn.output_gate  (fused rows)
    self_attention.{norm, out_proj}                   self_attn.<same>                (lightning layers)
    self_attention.linear_qkv / linear_proj           self_attn.{q,k,v}_proj / o_proj (attention layers)
    mlp.router / mlp.experts                          block_sparse_moe.gate / experts.{e}.w1, w3, w2

Each of MiniMax's residual adds keeps the branch's *normed* input, weighed: ``a * norm(x) + b * f(norm(x))``
(``--apply-residual-connection-post-layernorm``, ``a`` = ``--residual-alpha``, ``b`` = ``--residual-multiplier``;
MiniMax-Text-01 has ``a`` = (2 x 80)^(1/4) = 3.5566 and ``b`` = 1). transformers gives attention, lightning and
MLP adds factors of their own; the decoder has one pair, so configs whose three ``*_alpha_factor`` (or
``*_beta_factor``) differ are refused in one line, as are a ``hidden_act`` other than SiLU (it also activates the
lightning q/k/v), router jitter and attention biases.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from core.transformer.config import LIGHTNING_MIXER, TransformerConfig
from mindspeed_llm.models.families.linear_attention import config_marks, linear_layer_types, linear_marks
from mindspeed_llm.models.families.moe_common import (DENSE_ATTENTION_WEIGHTS, _moe_common, _moe_common_hf,
                                                      per_expert_weights)
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _checked, _common_config,
                                           _common_hf_config, _layer, register, require_config)

FAMILY = "minimax"
FACTOR_KINDS = ("full_attn", "linear_attn", "mlp")  # transformers' {kind}_alpha_factor / {kind}_beta_factor
LIGHTNING_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("self_attention.in_proj.weight", ["self_attn.qkv_proj.weight", "self_attn.output_gate.weight"],
           "fuse_rows"),
    _layer("self_attention.norm.weight", ["self_attn.norm.weight"]),
    _layer("self_attention.out_proj.weight", ["self_attn.out_proj.weight"]),
)
MINIMAX_WEIGHTS = DENSE_ATTENTION_WEIGHTS + LIGHTNING_WEIGHTS


def _minimax_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return MINIMAX_WEIGHTS + per_expert_weights(cfg, "block_sparse_moe", "w1", "w3", "w2", "gate")


# --------------------------------------------------------------------------- HF -> ours

def _one_factor(hf: Dict[str, Any], which: str) -> float:
    """The one ``*_{which}_factor`` of the three branches; differing ones are refused."""
    values = {kind: float(hf.get(f"{kind}_{which}_factor", 1.0)) for kind in FACTOR_KINDS}
    if len(set(values.values())) != 1:
        raise RegistryError(f"{FAMILY} {', '.join(f'{k}_{which}_factor={v}' for k, v in values.items())} differ; the "
                            f"decoder has one residual {which} for every add (--residual-"
                            f"{'alpha' if which == 'alpha' else 'multiplier'}): set them equal")
    return next(iter(values.values()))


def _optional(value: float) -> Optional[float]:
    return None if value == 1.0 else value


def _lightning_layers(hf: Dict[str, Any]) -> Dict[str, Any]:
    layers = int(hf["num_hidden_layers"])
    types = hf.get("layer_types") or ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(layers)]
    marks = linear_marks(types, FAMILY, layers)
    if not any(marks):
        return {}
    heads = int(hf["num_attention_heads"])
    dim = int(hf.get("head_dim") or int(hf["hidden_size"]) // heads)
    return dict(experimental_attention_variant="lightning", linear_attention_freq=str(marks),
                linear_num_key_heads=heads, linear_num_value_heads=heads, linear_key_head_dim=dim,
                linear_value_head_dim=dim, linear_chunk_size=int(hf.get("block_size", 256)))


def _minimax_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("hidden_act", "silu") != "silu":
        raise RegistryError(f"{FAMILY} hidden_act={hf['hidden_act']!r} is not supported: the lightning layers "
                            "activate q, k and v by SiLU (hidden_act silu)")
    if hf.get("attention_bias", False):
        raise RegistryError(f"{FAMILY} attention_bias=True is not supported (transformers' MiniMax has none)")
    return {**_common_config(hf), "sliding_window": hf.get("sliding_window"),
            **_moe_common(hf, FAMILY, "num_local_experts"), **_lightning_layers(hf),
            "apply_residual_connection_post_layernorm": True,
            "residual_alpha": _optional(_one_factor(hf, "alpha")),
            "residual_multiplier": _optional(_one_factor(hf, "beta"))}


# --------------------------------------------------------------------------- ours -> HF

def _lightning_layers_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    marks = config_marks(cfg)
    if any(marks) and (cfg.layer_parts(marks.index(1))[0] != LIGHTNING_MIXER
                       or cfg.linear_num_value_heads != cfg.num_attention_heads
                       or cfg.linear_value_head_dim != cfg.kv_channels):
        raise RegistryError(f"{FAMILY} linear layers are lightning attention with the attention layers' heads and "
                            "head dim: --experimental-attention-variant lightning with --linear-num-value-heads = "
                            "--num-attention-heads and --linear-value-head-dim = --kv-channels")
    return dict(layer_types=linear_layer_types(marks),
                block_size=cfg.linear_chunk_size if any(marks) else 256)


def _minimax_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    require_config(cfg, FAMILY, "--apply-residual-connection-post-layernorm, the Mixtral router and SwiGLU",
                   apply_residual_connection_post_layernorm=True, activation="swiglu", add_bias_linear=False,
                   add_qkv_bias=False, moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_shared_expert_intermediate_size=None,
                   moe_layer_freq=1, first_k_dense_replace=0, moe_expert_capacity_factor=None)
    alpha, beta = cfg.residual_alpha or 1.0, cfg.residual_multiplier or 1.0
    factors = {f"{kind}_{which}_factor": value for kind in FACTOR_KINDS
               for which, value in (("alpha", alpha), ("beta", beta))}
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "num_local_experts": cfg.num_experts,
            **_moe_common_hf(cfg), **_lightning_layers_hf(cfg), **factors}


MINIMAX = register(Family(FAMILY, "minimax", "MiniMaxForCausalLM", _minimax_config,
                          _checked(FAMILY, _minimax_config, _minimax_hf_config), MINIMAX_WEIGHTS,
                          preserved_keys=("output_router_logits",), weights_for=_minimax_weights), "minimax-text-01")

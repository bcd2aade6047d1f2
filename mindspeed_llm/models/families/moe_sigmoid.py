"""Sigmoid-routed / expert-bias MoE families: GLM-4.5 (``glm4_moe``), dots.llm1 (``dots1``), Solar-Open
(``solar_open``), ERNIE-4.5-MoE (``ernie4_5_moe``), MiniMax-M2 (``minimax_m2``) and HY-V3 (``hy_v3``).

Their routers choose the experts by score + ``e_score_correction_bias`` (DeepSeek-V3's aux-loss-free bias:
our router's ``expert_bias`` buffer, ``--moe-router-enable-expert-bias``) and weigh them by the unbiased
scores. The sigmoid router and its groups map through ``moe_common`` (:func:`sigmoid_routing`,
:func:`group_routing`, shared with the MLA families); the helpers here (:func:`sigmoid_router`,
:func:`scaling_factor`, :func:`shared_experts`, :func:`leading_dense_layers` and their inverses) read the
DeepSeek-style HF keys and may be reused by other families of this kind:

* ``n_group`` / ``topk_group``: group-limited routing (``--moe-router-num-groups`` /
  ``--moe-router-group-topk``). HF scores a group by the sum of its best TWO biased scores (DeepSeek-V3):
  ``--moe-router-group-score-topk 2`` (without it, Megatron's ``group_limited_topk`` and ours sum the best
  ``topk / group_topk``). ``topk_group`` equal to ``n_group`` keeps every group: no group limit.
* ``routed_scaling_factor``: ``--moe-router-topk-scaling-factor`` (1.0: none);
* ``norm_topk_prob``: ``--norm-topk-prob`` (HF divides by the sum + 1e-20, as ours);
* ``n_shared_experts``: one shared expert of ``n x moe_intermediate_size`` (``--moe-shared-expert-intermediate-size``);
* ``first_k_dense_replace``: ``--first-k-dense-replace`` (dense FFN ``intermediate_size``).

Checkpoints hold one tensor per expert (``mlp.experts.{e}.gate_proj/up_proj/down_proj``, stacked by the
"stack_experts_gated"/"stack_experts" transforms), the router ``mlp.gate.weight`` and its bias
``mlp.gate.e_score_correction_bias`` (our ``mlp.router.expert_bias``), the shared expert
``mlp.shared_experts.{gate,up,down}_proj``. Per family:

* ``glm4_moe`` (MindSpeed ``glm45``): half the head dims rotate by default (``partial_rotary_factor`` 0.5,
  ``--rotary-percent``), q/k/v bias (``attention_bias``, ``--add-qkv-bias``), optional per-head q/k norms
  (``use_qk_norm``, ``--qk-layernorm``). Its MTP layers (``num_nextn_predict_layers``, ``--mtp-num-layers``)
  are carried in DeepSeek-V3's layout (``model.layers.{L + k}.*``); transformers' model does not build them,
  and a checkpoint saved by transformers (without them) converts without MTP.
* ``dots1``: per-head q/k norms always; ``attention_bias`` puts biases on q/k/v AND o
  (``--add-qkv-bias --add-dense-bias``); sliding-window layers from ``layer_types`` / ``max_window_layers``.
* ``solar_open``: every layer MoE, full RoPE, q/k/v bias (``attention_bias``).
* ``ernie4_5_moe``: softmax over all experts (``--moe-router-pre-softmax``) + the bias for the choice,
  always renormalised (HF clamps the sum at ``moe_norm_min``, refused above 1e-6 where it could act),
  interleaved RoPE, tied embeddings; bias tensor ``mlp.moe_statics.e_score_correction_bias`` [1, experts]
  ("expert_bias_row"); shared experts ``moe_num_shared_experts`` (0: none); MoE layers
  ``moe_layer_start_index`` .. last (``moe_layer_interval`` 1 only).
* ``minimax_m2``: sigmoid, always renormalised (HF divides by the plain sum, ours by the sum + 1e-20: equal
  unless the chosen scores sum below ~1e-13), no shared experts or dense layers (the remote-code keys
  ``scoring_func``, ``use_routing_bias``, ``qk_norm_type``, ``shared_intermediate_size``,
  ``routed_scaling_factor`` and ``attn_type_list`` are accepted at their neutral values only); q/k RMSNorms over all
  heads' channels (``--qk-layernorm-full-width``); partial RoPE (``rotary_dim``); Mixtral's tensor names
  (``block_sparse_moe.experts.{e}.w1/w3/w2``, bias ``block_sparse_moe.e_score_correction_bias``).
* ``hy_v3``: sigmoid, always renormalised, ``router_scaling_factor``; per-head q/k norms before RoPE;
  ``attention_bias`` on q/k/v and o; dense layers from ``mlp_layer_types`` (a leading run of "dense");
  tensors ``mlp.router.gate.weight``, ``mlp.expert_bias``, ``mlp.shared_mlp.*``. ``enable_moe_fp32_combine``
  (shared + routed output added in fp32, then rounded) equals adding two values of the model's dtype
  (one rounding either way), so both settings are accepted.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, TRANSFORMS, Family, RegistryError, TensorContext,
                                           WeightRule, _common_config, _common_hf_config, _layer, _layer_types,
                                           _layer_windows, mtp_config, mtp_hf_config, register, with_mtp_weights)
from mindspeed_llm.models.families.llama_like import _biases, _bias_places, _check_common, _no_extras, _refuse
from mindspeed_llm.models.families.moe_common import (DENSE_ATTENTION_WEIGHTS, check_bias_router_hf, dense_run,
                                                      group_routing, group_routing_hf, mlp_layer_types,
                                                      per_expert_weights, sigmoid_routing)

MAX_NORM_MIN = 1e-6  # ERNIE's moe_norm_min clamp: accepted up to here (never binds on real weights)


# --------------------------------------------------------------------------- a [1, experts] bias tensor

def _expert_bias_row_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return tensors[0].reshape(-1)  # [1, experts] -> [experts]


def _expert_bias_row_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> list:
    return [tensor.reshape(1, -1).contiguous()]  # [experts] -> [1, experts]


TRANSFORMS.setdefault("expert_bias_row", (_expert_bias_row_to_ours, _expert_bias_row_to_hf))


# --------------------------------------------------------------------------- general routing helpers

def scaling_factor(value: Any) -> Optional[float]:
    """An HF routed scaling factor as --moe-router-topk-scaling-factor (None for 1.0)."""
    factor = float(1.0 if value is None else value)
    return None if factor == 1.0 else factor


def scaling_factor_hf(cfg: TransformerConfig) -> float:
    return 1.0 if cfg.moe_router_topk_scaling_factor is None else cfg.moe_router_topk_scaling_factor


def sigmoid_router(hf: Dict[str, Any], family: str, experts_key: str, *, norm_topk_prob: bool,
                   groups: bool = True) -> Dict[str, Any]:
    """Experts, top-k and a sigmoid router whose choice adds the expert bias (``groups``: read
    ``n_group`` / ``topk_group``)."""
    experts = hf.get(experts_key)
    if experts is None:
        raise RegistryError(f"config.json lacks {experts_key!r} needed by family {family!r}")
    topk = int(hf.get("num_experts_per_tok") or 0)
    if topk < 1:
        raise RegistryError(f"{family} num_experts_per_tok={hf.get('num_experts_per_tok')!r} must be at least 1")
    out = dict(num_experts=int(experts), moe_router_topk=topk, **sigmoid_routing(norm_topk_prob),
               moe_aux_loss_coeff=float(hf.get("router_aux_loss_coef", 0.0) or 0.0))
    if groups:
        out.update(group_routing(hf, family))
    return out


def shared_experts(hf: Dict[str, Any], family: str, key: str, moe_ffn: int, optional: bool = False
                   ) -> Dict[str, Any]:
    """``hf[key]`` shared experts of ``moe_ffn`` each as one shared expert of their summed FFN size
    (``optional``: 0 means none; otherwise at least one is needed, as HF builds it unconditionally)."""
    count = int(hf.get(key) or 0)
    if count < 1 and not optional:
        raise RegistryError(f"{family} {key}={hf.get(key)!r} is not supported (needs at least 1 shared expert)")
    return {"moe_shared_expert_intermediate_size": count * moe_ffn if count else None}


def shared_experts_hf(cfg: TransformerConfig, family: str, key: str, optional: bool = False) -> Dict[str, Any]:
    """The inverse of :func:`shared_experts`: the count of expert-sized shared experts."""
    shared, moe_ffn = cfg.moe_shared_expert_intermediate_size, cfg.moe_expert_ffn_hidden_size
    if shared is None:
        if optional:
            return {key: 0}
        raise RegistryError(f"{family} always has a shared expert; add --moe-shared-expert-intermediate-size")
    if shared % moe_ffn:
        raise RegistryError(f"{family} shared experts are {key} x moe_intermediate_size; "
                            f"--moe-shared-expert-intermediate-size {shared} is not a multiple of {moe_ffn}")
    return {key: shared // moe_ffn}


def leading_dense_layers(count: int, family: str, key: str) -> Dict[str, Any]:
    if count < 0:
        raise RegistryError(f"{family} {key}={count} must be 0 or more")
    return {"first_k_dense_replace": count}


def moe_sizes(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Expert FFN ``moe_intermediate_size`` (dense layers: ``intermediate_size``)."""
    return {"moe_ffn_hidden_size": int(hf["moe_intermediate_size"])}


def moe_sizes_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return {"intermediate_size": cfg.ffn_hidden_size, "moe_intermediate_size": cfg.moe_expert_ffn_hidden_size,
            "num_experts_per_tok": cfg.moe_router_topk, "norm_topk_prob": cfg.norm_topk_prob}


def bias_router_weights(cfg: TransformerConfig, block: str = "mlp", router: str = "gate",
                        bias: str = "gate.e_score_correction_bias", shared: Optional[str] = "shared_experts",
                        bias_transform: str = "copy", gate: str = "gate_proj", up: str = "up_proj",
                        down: str = "down_proj") -> Tuple[WeightRule, ...]:
    """Rules of an MoE layer: per-expert tensors, router weight, its expert bias and the shared expert."""
    rules = per_expert_weights(cfg, block, gate, up, down, router)
    rules += (_layer("mlp.router.expert_bias", [f"{block}.{bias}"], bias_transform),)
    if shared is not None:
        rules += (_layer("mlp.shared_experts.linear_fc1.weight",
                         [f"{block}.{shared}.gate_proj.weight", f"{block}.{shared}.up_proj.weight"], "fuse_rows"),
                  _layer("mlp.shared_experts.linear_fc2.weight", [f"{block}.{shared}.down_proj.weight"]))
    return rules


def _no_moe_biases(hf: Dict[str, Any], family: str, key: str) -> None:
    if hf.get(key, False):
        raise RegistryError(f"{family} {key}=True is not supported (expert MLPs have no biases)")


# --------------------------------------------------------------------------- GLM-4.5 (glm4_moe)

def _glm4_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"partial_rotary_factor": 0.5, **hf}  # transformers' Glm4MoeConfig default
    return {**_common_config(hf), **_biases(hf.get("attention_bias", False), False, False),
            "qk_norm": "per_head" if hf.get("use_qk_norm", False) else "none", **moe_sizes(hf),
            **sigmoid_router(hf, "glm4_moe", "n_routed_experts", norm_topk_prob=bool(hf.get("norm_topk_prob", True))),
            "moe_router_topk_scaling_factor": scaling_factor(hf.get("routed_scaling_factor")),
            **shared_experts(hf, "glm4_moe", "n_shared_experts", int(hf["moe_intermediate_size"])),
            **leading_dense_layers(int(hf.get("first_k_dense_replace", 1)), "glm4_moe", "first_k_dense_replace"),
            **mtp_config(hf)}


def _glm4_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("glm4_moe", cfg, rotary_percent=cfg.rotary_percent)
    _no_extras("glm4_moe", cfg, "qk_norm")
    qkv, dense, mlp = _bias_places(cfg)
    if dense or mlp or cfg.qk_norm not in ("none", "per_head"):
        raise RegistryError("glm4_moe has q/k/v biases and per-head q/k norms at most")
    check_bias_router_hf(cfg, "glm4_moe")
    return {**_common_hf_config(cfg), "attention_bias": qkv, "use_qk_norm": cfg.qk_norm == "per_head",
            "partial_rotary_factor": cfg.rotary_percent, **moe_sizes_hf(cfg), "n_routed_experts": cfg.num_experts,
            **group_routing_hf(cfg, "glm4_moe"), "routed_scaling_factor": scaling_factor_hf(cfg),
            **shared_experts_hf(cfg, "glm4_moe", "n_shared_experts"),
            "first_k_dense_replace": cfg.first_k_dense_replace, **mtp_hf_config(cfg)}


def _deepseek_style_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    """Llama's attention and dense MLP rules (leading dense layers) plus the MoE layer's."""
    return LLAMA_WEIGHTS + bias_router_weights(cfg)


GLM4_MOE = register(Family("glm4_moe", "glm4_moe", "Glm4MoeForCausalLM", _glm4_moe_config, _glm4_moe_hf_config,
                           LLAMA_WEIGHTS, preserved_keys=("output_router_logits",),
                           weights_for=with_mtp_weights(_deepseek_style_weights)), "glm45", "glm4-moe")


# --------------------------------------------------------------------------- dots.llm1 (dots1)

def _dots1_windows(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Sliding-window layers: ``layer_types``, else layers ``i >= max_window_layers`` when a window is set."""
    layers, window = int(hf["num_hidden_layers"]), hf.get("sliding_window")
    first_sliding = int(hf.get("max_window_layers", layers) if hf.get("max_window_layers") is not None else layers)
    types = hf.get("layer_types") or ["sliding_attention" if window is not None and i >= first_sliding
                                      else "full_attention" for i in range(layers)]
    return _layer_windows(types, window, layers)


def _dots1_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    bias = hf.get("attention_bias", False)
    return {**_common_config(hf), **_biases(bias, bias, False), "qk_norm": "per_head", **_dots1_windows(hf),
            **moe_sizes(hf),
            **sigmoid_router(hf, "dots1", "n_routed_experts", norm_topk_prob=bool(hf.get("norm_topk_prob", False))),
            "moe_router_topk_scaling_factor": scaling_factor(hf.get("routed_scaling_factor")),
            **shared_experts(hf, "dots1", "n_shared_experts", int(hf["moe_intermediate_size"])),
            **leading_dense_layers(int(hf.get("first_k_dense_replace") or 0), "dots1", "first_k_dense_replace")}


def _dots1_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("dots1", cfg, sliding_window=cfg.sliding_window)
    _no_extras("dots1", cfg, "qk_norm")
    qkv, dense, mlp = _bias_places(cfg)
    if qkv != dense or mlp or cfg.qk_norm != "per_head":
        raise RegistryError("dots1 needs per-head q/k norms and one attention_bias for q/k/v and o (no MLP bias)")
    check_bias_router_hf(cfg, "dots1")
    types = _layer_types(cfg)
    sliding = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
    out = {**_common_hf_config(cfg), "attention_bias": qkv, **moe_sizes_hf(cfg), "n_routed_experts": cfg.num_experts,
           **group_routing_hf(cfg, "dots1"), "routed_scaling_factor": scaling_factor_hf(cfg),
           **shared_experts_hf(cfg, "dots1", "n_shared_experts"), "first_k_dense_replace": cfg.first_k_dense_replace,
           "layer_types": types}  # transformers reads layer_types first; the window keys only when a layer slides
    return {**out, "sliding_window": cfg.sliding_window, "max_window_layers": sliding[0]} if sliding else out


DOTS1 = register(Family("dots1", "dots1", "Dots1ForCausalLM", _dots1_config, _dots1_hf_config, LLAMA_WEIGHTS,
                        preserved_keys=("output_router_logits",), weights_for=_deepseek_style_weights), "dots")


# --------------------------------------------------------------------------- Solar-Open (solar_open)

def _solar_open_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"rope_theta": 1_000_000.0, **hf}  # transformers' SolarOpenConfig default_theta
    return {**_common_config(hf), **_biases(hf.get("attention_bias", False), False, False), **moe_sizes(hf),
            **sigmoid_router(hf, "solar_open", "n_routed_experts",
                             norm_topk_prob=bool(hf.get("norm_topk_prob", True))),
            "moe_router_topk_scaling_factor": scaling_factor(hf.get("routed_scaling_factor")),
            **shared_experts(hf, "solar_open", "n_shared_experts", int(hf["moe_intermediate_size"]))}


def _solar_open_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("solar_open", cfg)
    _no_extras("solar_open", cfg)
    qkv, dense, mlp = _bias_places(cfg)
    if dense or mlp:
        raise RegistryError("solar_open has q/k/v biases at most (attention_bias)")
    check_bias_router_hf(cfg, "solar_open", first_k_dense_replace=0)
    out = {**_common_hf_config(cfg), "attention_bias": qkv, **moe_sizes_hf(cfg), "n_routed_experts": cfg.num_experts,
           **group_routing_hf(cfg, "solar_open"), "routed_scaling_factor": scaling_factor_hf(cfg),
           **shared_experts_hf(cfg, "solar_open", "n_shared_experts")}
    out.pop("intermediate_size")  # every layer is MoE: SolarOpenConfig has no dense FFN size
    return out


def _solar_open_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + bias_router_weights(cfg)


SOLAR_OPEN = register(Family("solar_open", "solar_open", "SolarOpenForCausalLM", _solar_open_config,
                             _solar_open_hf_config, DENSE_ATTENTION_WEIGHTS, preserved_keys=("output_router_logits",),
                             weights_for=_solar_open_weights), "solar-open")


# --------------------------------------------------------------------------- ERNIE-4.5-MoE (ernie4_5_moe)

def _ernie_moe_layers(hf: Dict[str, Any]) -> Dict[str, Any]:
    """MoE layers ``moe_layer_start_index`` .. last, every layer (``(i + 1) % interval`` needs interval 1)."""
    layers = int(hf["num_hidden_layers"])
    for key in ("moe_layer_interval", "moe_layer_start_index", "moe_layer_end_index"):
        if not isinstance(hf.get(key, 0), (int, type(None))):  # ERNIE-VL: one value per modality
            raise RegistryError(f"ernie4_5_moe {key}={hf[key]!r} is not supported (one integer only)")
    interval = int(hf.get("moe_layer_interval") or 1)
    start, end = int(hf.get("moe_layer_start_index", 1) or 0), int(hf.get("moe_layer_end_index", -1))
    if interval != 1:
        raise RegistryError(f"ernie4_5_moe moe_layer_interval={interval} is not supported (only 1)")
    if end not in (-1, layers - 1):
        raise RegistryError(f"ernie4_5_moe moe_layer_end_index={end} is not supported (only the last layer, "
                            f"{layers - 1}, or -1)")
    return leading_dense_layers(start, "ernie4_5_moe", "moe_layer_start_index")


def _ernie_moe_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"rope_theta": 500000.0, "tie_word_embeddings": True, **hf}
    _no_moe_biases(hf, "ernie4_5_moe", "use_bias")
    _refuse("ernie4_5_moe", hf, moe_gate_act="softmax")
    norm_min = float(hf.get("moe_norm_min", 1e-12) or 0.0)
    if norm_min > MAX_NORM_MIN:
        raise RegistryError(f"ernie4_5_moe moe_norm_min={norm_min} is not supported (at most {MAX_NORM_MIN}: the "
                            "router divides by the weights' sum + 1e-20)")
    experts = hf.get("moe_num_experts", hf.get("num_experts"))
    topk = hf.get("moe_k", hf.get("num_experts_per_tok"))
    if experts is None or topk is None:
        raise RegistryError("config.json lacks 'moe_num_experts'/'moe_k' needed by family 'ernie4_5_moe'")
    router = dict(num_experts=int(experts), moe_router_topk=int(topk), moe_router_pre_softmax=True,
                  norm_topk_prob=True, moe_router_enable_expert_bias=True,
                  moe_aux_loss_coeff=float(hf.get("router_aux_loss_coef", 0.0) or 0.0))
    return {**_common_config(hf), "rope_interleaved": True, **moe_sizes(hf), **router,
            **shared_experts(hf, "ernie4_5_moe", "moe_num_shared_experts", int(hf["moe_intermediate_size"]),
                             optional=True), **_ernie_moe_layers(hf)}


def _ernie_moe_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("ernie4_5_moe", cfg, rope_interleaved=True)
    _no_extras("ernie4_5_moe", cfg)
    if any(_bias_places(cfg)):
        raise RegistryError("ernie4_5_moe with experts has no linear biases (use_bias=False)")
    check_bias_router_hf(cfg, "ernie4_5_moe", score_function="softmax", norm_topk_prob=True,
                         moe_router_num_groups=None, moe_router_topk_scaling_factor=None)
    out = {**_common_hf_config(cfg), "use_bias": False, "intermediate_size": cfg.ffn_hidden_size,
           "moe_intermediate_size": cfg.moe_expert_ffn_hidden_size, "moe_num_experts": cfg.num_experts,
           "moe_k": cfg.moe_router_topk, "moe_layer_start_index": cfg.first_k_dense_replace,
           "moe_layer_end_index": cfg.num_layers - 1, "moe_layer_interval": 1, "moe_norm_min": 1e-12,
           "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
           **shared_experts_hf(cfg, "ernie4_5_moe", "moe_num_shared_experts", optional=True)}
    out.pop("head_dim")  # Ernie4_5_MoeConfig derives it from hidden_size / heads
    if cfg.kv_channels * cfg.num_attention_heads != cfg.hidden_size:
        raise RegistryError("ernie4_5_moe derives head_dim from hidden_size / num_attention_heads; "
                            f"--kv-channels {cfg.kv_channels} differs")
    return out


def _ernie_moe_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return LLAMA_WEIGHTS + bias_router_weights(cfg, bias="moe_statics.e_score_correction_bias",
                                               bias_transform="expert_bias_row")


ERNIE4_5_MOE = register(Family("ernie4_5_moe", "ernie4_5_moe", "Ernie4_5_MoeForCausalLM", _ernie_moe_config,
                               _ernie_moe_hf_config, LLAMA_WEIGHTS, preserved_keys=("output_router_logits",),
                               weights_for=_ernie_moe_weights), "ernie4_5-moe", "ernie45-moe")


# --------------------------------------------------------------------------- MiniMax-M2 (minimax_m2)

def _minimax_m2_rope(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``rotary_dim`` (the rotated dims of a head) as ``partial_rotary_factor``, as transformers reads it."""
    params = dict(hf.get("rope_parameters") or {})
    if hf.get("rotary_dim") is not None and "partial_rotary_factor" not in params \
            and hf.get("partial_rotary_factor") is None:
        head_dim = int(hf.get("head_dim") or int(hf["hidden_size"]) // int(hf["num_attention_heads"]))
        hf = {**hf, "partial_rotary_factor": int(hf["rotary_dim"]) / head_dim}
    return hf


def _minimax_m2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = _minimax_m2_rope({"rope_theta": 5_000_000.0, "head_dim": 128, **hf})
    # keys of the original remote code that transformers' MiniMaxM2 does not read: only their neutral values
    _refuse("minimax_m2", hf, scoring_func="sigmoid", use_routing_bias=True, qk_norm_type="per_layer",
            shared_intermediate_size=0, routed_scaling_factor=1.0)
    if float(hf.get("router_jitter_noise", 0.0) or 0.0) != 0.0:
        raise RegistryError(f"minimax_m2 router_jitter_noise={hf['router_jitter_noise']} is not supported; set it to 0")
    attention_types = hf.get("attn_type_list")
    if attention_types and set(attention_types) != {1}:
        raise RegistryError("minimax_m2 attn_type_list with linear-attention layers (0) is not supported")
    out = {**_common_config(hf), "qk_norm": "full_width",
           **sigmoid_router(hf, "minimax_m2", "num_local_experts", norm_topk_prob=True, groups=False)}
    out["moe_ffn_hidden_size"] = out["ffn_hidden_size"]  # every layer MoE, expert FFN intermediate_size
    return out


def _minimax_m2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("minimax_m2", cfg, rotary_percent=cfg.rotary_percent)
    _no_extras("minimax_m2", cfg, "qk_norm")
    if any(_bias_places(cfg)) or cfg.qk_norm != "full_width":
        raise RegistryError("minimax_m2 needs q/k norms over all heads (--qk-layernorm-full-width) and no biases")
    check_bias_router_hf(cfg, "minimax_m2", norm_topk_prob=True, moe_router_num_groups=None,
                         moe_router_topk_scaling_factor=None, moe_shared_expert_intermediate_size=None,
                         first_k_dense_replace=0)
    out = {**_common_hf_config(cfg), "num_local_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
           "intermediate_size": cfg.moe_expert_ffn_hidden_size, "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
           "router_jitter_noise": 0.0, "partial_rotary_factor": cfg.rotary_percent,
           "rotary_dim": cfg.rotary_dim}
    return out


def _minimax_m2_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + bias_router_weights(cfg, block="block_sparse_moe", bias="e_score_correction_bias",
                                                         shared=None, gate="w1", up="w3", down="w2")


MINIMAX_M2 = register(Family("minimax_m2", "minimax_m2", "MiniMaxM2ForCausalLM", _minimax_m2_config,
                             _minimax_m2_hf_config, DENSE_ATTENTION_WEIGHTS, preserved_keys=("output_router_logits",),
                             weights_for=_minimax_m2_weights), "minimax-m2")


# --------------------------------------------------------------------------- HY-V3 (hy_v3)

def _hy_v3_dense_layers(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``mlp_layer_types`` (default: the first layer dense) as --first-k-dense-replace (a leading run only)."""
    layers = int(hf["num_hidden_layers"])
    dense = dense_run(hf.get("mlp_layer_types") or mlp_layer_types(min(1, layers), layers), layers, "hy_v3")
    return leading_dense_layers(dense, "hy_v3", "mlp_layer_types")


def _hy_v3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {"rope_theta": 11_158_840.0, "head_dim": 128, **hf}
    _no_moe_biases(hf, "hy_v3", "mlp_bias")
    bias = hf.get("attention_bias", False)
    return {**_common_config(hf), **_biases(bias, bias, False), "qk_norm": "per_head", **moe_sizes(hf),
            **sigmoid_router(hf, "hy_v3", "num_experts", norm_topk_prob=True, groups=False),
            "moe_router_topk_scaling_factor": scaling_factor(hf.get("router_scaling_factor", 2.826)),
            **shared_experts(hf, "hy_v3", "num_shared_experts", int(hf["moe_intermediate_size"])),
            **_hy_v3_dense_layers(hf)}


def _hy_v3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_common("hy_v3", cfg)
    _no_extras("hy_v3", cfg, "qk_norm")
    qkv, dense, mlp = _bias_places(cfg)
    if qkv != dense or mlp or cfg.qk_norm != "per_head" or cfg.qk_layernorm_after_rope:
        raise RegistryError("hy_v3 needs per-head q/k norms before RoPE and one attention_bias for q/k/v and o")
    check_bias_router_hf(cfg, "hy_v3", norm_topk_prob=True, moe_router_num_groups=None)
    dense_layers = cfg.first_k_dense_replace
    return {**_common_hf_config(cfg), "attention_bias": qkv, "mlp_bias": False, **moe_sizes_hf(cfg),
            "num_experts": cfg.num_experts, "router_scaling_factor": scaling_factor_hf(cfg),
            **shared_experts_hf(cfg, "hy_v3", "num_shared_experts"),
            "mlp_layer_types": mlp_layer_types(dense_layers, cfg.num_layers)}


def _hy_v3_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return LLAMA_WEIGHTS + bias_router_weights(cfg, router="router.gate", bias="expert_bias", shared="shared_mlp")


HY_V3 = register(Family("hy_v3", "hy_v3", "HYV3ForCausalLM", _hy_v3_config, _hy_v3_hf_config, LLAMA_WEIGHTS,
                        preserved_keys=("output_router_logits", "enable_moe_fp32_combine"),
                        weights_for=_hy_v3_weights), "hy-v3", "hunyuan_v3")

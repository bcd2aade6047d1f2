"""Mixture-of-experts families whose experts are stored as 3-D tensors: Llama 4 text, Aria text and GPT-OSS.

Llama 4 and Aria keep all experts of a layer in two HF tensors stored ``[experts, in, out]``: ``experts.gate_up_proj``
[experts, h, 2 x ffn] (``[gate | up]`` columns) and ``experts.down_proj`` [experts, ffn, h] (Aria's files
name them ``experts.fc1.weight`` and ``experts.fc2.weight``, which transformers renames on load); the
"experts_transposed" transform turns them into our ``mlp.experts.linear_fc1.weight`` [experts, 2 x ffn, h]
and ``linear_fc2.weight`` [experts, h, ffn].

* ``llama4`` (``Llama4TextConfig`` / ``Llama4ForCausalLM``, text only): Llama's attention with interleaved
  RoPE (``--rope-interleaved``; Llama 4 rotates complex pairs) and llama3 scaling; every
  ``no_rope_layer_interval``-th layer without RoPE (``no_rope_layers`` 0 -> ``--no-rope-layers``); the
  RoPE layers attend within chunks of ``attention_chunk_size`` tokens (``--attention-chunk-size``, the NoPE
  layers in ``--full-attention-layers``), with weightless q/k RMS norms after RoPE (``use_qk_norm`` ->
  ``--qk-l2-norm``); the NoPE layers' queries scaled by ``1 + attn_scale ln(1 + floor((p + 1) / floor_scale))``
  (``attn_temperature_tuning`` -> ``--attn-temperature-beta/-length --attn-temperature-nope-layers``).
  MoE layers: top-1 router, the sigmoid of the chosen logit scaling the expert's INPUT
  (``--moe-router-score-function sigmoid --moe-router-topk 1 --moe-apply-probs-on-input``), plus an ungated
  shared expert of the expert FFN size (``intermediate_size``); dense layers use ``intermediate_size_mlp``.
  HF's MoE layers are ``moe_layers`` (default ``interleave_moe_layer_step - 1, 2 x step - 1, ...``); they map
  only when they are Megatron's ``i >= --first-k-dense-replace and i % --moe-layer-freq == 0``, so
  ``interleave_moe_layer_step`` > 1 (Maverick: layers 1, 3, 5, ...) is refused. HF's Llama4ForCausalLM adds
  no router loss, so ``router_aux_loss_coef`` is kept in config.json but not applied (``--moe-aux-loss-coeff 0``).
* ``aria_text`` (``AriaTextConfig`` / ``AriaTextForCausalLM``): Llama's attention; every layer an MoE layer
  with the top-k softmax router (softmax over the k chosen logits, Megatron's default) and
  ``moe_num_shared_experts`` shared experts fused into one SwiGLU MLP of ``moe_num_shared_experts x
  intermediate_size`` (MindSpeed's ``--n-shared-experts``).
* ``gpt_oss`` (MindSpeed alias ``gpt-oss``), OpenAI's mixture of experts. Every layer: Llama's attention with
  biases on q/k/v/o and a learned sink logit per head (``--softmax-type learnable``), sliding-window and full
  layers as HF ``layer_types`` says (alternating by default), YaRN RoPE without rounding its ramp bounds
  (``--no-yarn-correction-range-round-to-int``), then an MoE layer: a router with a bias, top-k of the logits
  then a softmax over those k (our default routing), and experts with biases and the clamped SwiGLU ``(clamp(up,
  -l, l) + 1) * g * sigmoid(1.702 g)``, ``g = clamp(gate, max=l)`` (``--quick-geglu
  --activation-func-clamp-value l --glu-linear-offset 1``).

  ``attention_bias`` true (the published models) is ``--add-bias-linear``: Megatron's one switch for the
  attention, expert and router biases. HF's experts and router always have biases, so ``attention_bias``
  false maps to ``--disable-bias-linear --add-mlp-bias --add-router-bias``.

  Weights: HF keeps each layer's experts fused and transposed, ``mlp.experts.gate_up_proj`` [E, h, 2 ffn] with
  gate and up interleaved along the last dim ("experts_gate_up_interleaved" -> our fc1 [E, 2 ffn, h] with
  [gate; up] rows; its bias [E, 2 ffn] likewise) and ``down_proj`` [E, ffn, h] ("experts_transposed" -> our
  fc2 [E, h, ffn]); ``self_attn.sinks`` [heads] is our ``softmax_offset``.

  The published MXFP4 experts (``quantization_config``) are dequantised on import (mindspeed_llm/convert/quantized.py).
  Refused (RegistryError): ``swiglu_alpha`` other than quick GELU's 1.702 (Megatron's ``--quick-geglu`` fixes
  it), router jitter; our side: settings GPT-OSS has no key for (dense layers, shared experts, other routing).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from core.transformer.config import TransformerConfig
from core.transformer.mlp import QUICK_GELU_ALPHA
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _common_config, _common_hf_config,
                                           _layer, _layer_types, _layer_windows, _reject_biases, register,
                                           require_config)
from mindspeed_llm.models.families.moe_common import DENSE_ATTENTION_WEIGHTS, _moe_common, _moe_common_hf

LLAMA4_DEFAULT_THETA = 500000.0  # Llama4TextConfig.default_theta


def fused_expert_weights(block: str, gate_up: str, down: str, shared: str) -> Tuple[WeightRule, ...]:
    """Router, 3-D expert tensors ``{block}.experts.{gate_up|down}`` and the shared expert (SwiGLU) of
    ``model.layers.{i}.{block}``."""
    return (_layer("mlp.router.weight", [f"{block}.router.weight"]),
            _layer("mlp.experts.linear_fc1.weight", [f"{block}.experts.{gate_up}"], "experts_transposed"),
            _layer("mlp.experts.linear_fc2.weight", [f"{block}.experts.{down}"], "experts_transposed"),
            _layer("mlp.shared_experts.linear_fc1.weight",
                   [f"{block}.{shared}.gate_proj.weight", f"{block}.{shared}.up_proj.weight"], "fuse_rows"),
            _layer("mlp.shared_experts.linear_fc2.weight", [f"{block}.{shared}.down_proj.weight"]))


def moe_layer_pattern(moe_layers: Sequence[int], num_layers: int, family: str) -> Dict[str, int]:
    """HF's list of MoE layers as ``--first-k-dense-replace`` and ``--moe-layer-freq`` (i >= k and i % freq
    == 0), or a one-line error when no such pair gives that list."""
    wanted = sorted(int(i) for i in moe_layers)
    for freq in range(1, num_layers + 1):
        for first_k in range(num_layers):
            if [i for i in range(num_layers) if i >= first_k and i % freq == 0] == wanted:
                return {"first_k_dense_replace": first_k, "moe_layer_freq": freq}
    raise RegistryError(f"{family} moe_layers={wanted} (interleave_moe_layer_step) is not supported: MoE layers must "
                        "be i >= --first-k-dense-replace with i % --moe-layer-freq == 0")


def _moe_layers_of(cfg: TransformerConfig) -> List[int]:
    return [i for i in range(cfg.num_layers) if cfg.is_moe_layer(i)]


def _llama4_attention(hf: Dict[str, Any], layers: int) -> Dict[str, Any]:
    """NoPE layers, chunked attention, q/k L2 norms and the NoPE layers' attention temperature."""
    interval = int(hf.get("no_rope_layer_interval", 4))
    uses_rope = hf.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    nope = tuple(i for i in range(layers) if not uses_rope[i])
    chunk = hf.get("attention_chunk_size", 8192)  # Llama4TextConfig default; null: no chunked layers
    types = hf.get("layer_types") or ["chunked_attention" if uses_rope[i] and chunk is not None else "full_attention"
                                      for i in range(layers)]
    if len(types) != layers or set(types) - {"chunked_attention", "full_attention"}:
        raise RegistryError(f"llama4 layer_types {types} must name 'chunked_attention' or 'full_attention' per layer")
    chunked = "chunked_attention" in types
    if chunked and chunk is None:
        raise RegistryError("llama4 layer_types has chunked_attention layers but attention_chunk_size is null")
    out: Dict[str, Any] = {
        "no_rope_layers": nope, "qk_norm": "l2" if hf.get("use_qk_norm", True) else "none",
        "attention_chunk_size": int(chunk) if chunked else None,
        "full_attention_layers": tuple(i for i, kind in enumerate(types) if kind == "full_attention") if chunked else ()}
    if hf.get("attn_temperature_tuning", True) and nope:
        out.update(attn_temperature_beta=float(hf.get("attn_scale", 0.1)),
                   attn_temperature_length=int(hf.get("floor_scale", 8192)), attn_temperature_nope_layers=True)
    return out


def _llama4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("attention_bias", False):
        raise RegistryError("llama4 attention_bias=True is not supported (the experts have no biases)")
    experts_per_token = int(hf.get("num_experts_per_tok", 1))
    if experts_per_token != 1:
        raise RegistryError(f"llama4 num_experts_per_tok={experts_per_token} is not supported (only 1: the routing "
                            "weight scales the expert input, --moe-apply-probs-on-input)")
    layers = int(hf["num_hidden_layers"])
    step = int(hf.get("interleave_moe_layer_step", 1) or 1)
    moe_layers = hf.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, layers, step))
    rope = {} if hf.get("rope_parameters") or hf.get("rope_theta") else {"rope_theta": LLAMA4_DEFAULT_THETA}
    kwargs = {**_common_config({**rope, **hf}), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)),
              "rope_interleaved": True, **_llama4_attention(hf, layers),
              "ffn_hidden_size": int(hf.get("intermediate_size_mlp", 16384)),
              "num_experts": int(hf.get("num_local_experts", 16)), "moe_router_topk": 1,
              "moe_ffn_hidden_size": int(hf["intermediate_size"]), "moe_router_score_function": "sigmoid",
              "moe_apply_probs_on_input": True, "moe_aux_loss_coeff": 0.0,
              "moe_shared_expert_intermediate_size": int(hf["intermediate_size"]),
              **moe_layer_pattern(moe_layers, layers, "llama4")}
    return kwargs


def _llama4_attention_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    if not cfg.rope_interleaved or cfg.sliding_window is not None or cfg.qk_norm not in ("none", "l2"):
        raise RegistryError("llama4 needs --rope-interleaved, no --sliding-window and no --qk-layernorm "
                            "(its q/k norm is --qk-l2-norm)")
    temperature = cfg.attn_temperature_beta is not None
    if temperature and not cfg.attn_temperature_nope_layers:
        raise RegistryError("llama4 scales the NoPE layers' queries only: --attn-temperature-beta needs "
                            "--attn-temperature-nope-layers")
    return {"no_rope_layers": [int(i not in cfg.no_rope_layers) for i in range(cfg.num_layers)],
            "use_qk_norm": cfg.qk_norm == "l2", "attention_chunk_size": cfg.attention_chunk_size,
            "layer_types": ["chunked_attention" if cfg.layer_chunk(i) is not None else "full_attention"
                            for i in range(cfg.num_layers)],
            "attn_temperature_tuning": temperature, "attn_scale": cfg.attn_temperature_beta if temperature else 0.1,
            "floor_scale": cfg.attn_temperature_length if temperature else 8192}


def _llama4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "llama4")
    if cfg.num_experts is None:
        raise RegistryError("llama4 needs MoE layers (--num-experts)")
    require_config(cfg, "llama4", moe_router_topk=1, moe_router_score_function="sigmoid",
                   moe_apply_probs_on_input=True, norm_topk_prob=False, moe_router_num_groups=None,
                   moe_router_topk_scaling_factor=None, moe_router_enable_expert_bias=False,
                   moe_expert_capacity_factor=None, shared_expert_gate=False,
                   moe_shared_expert_intermediate_size=cfg.moe_expert_ffn_hidden_size)
    out = {**_common_hf_config(cfg), **_llama4_attention_hf(cfg), "attention_bias": False,
           "intermediate_size": cfg.moe_expert_ffn_hidden_size, "intermediate_size_mlp": cfg.ffn_hidden_size,
           "num_local_experts": cfg.num_experts, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
           "moe_layers": _moe_layers_of(cfg)}
    return out


def _llama4_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    dense = (_layer("mlp.linear_fc1.weight", ["feed_forward.gate_proj.weight", "feed_forward.up_proj.weight"],
                    "fuse_rows"),
             _layer("mlp.linear_fc2.weight", ["feed_forward.down_proj.weight"]))
    return DENSE_ATTENTION_WEIGHTS + dense + fused_expert_weights("feed_forward", "gate_up_proj", "down_proj", "shared_expert")


LLAMA4 = register(Family("llama4", "llama4_text", "Llama4ForCausalLM", _llama4_config, _llama4_hf_config,
                         DENSE_ATTENTION_WEIGHTS,
                         preserved_keys=("output_router_logits", "router_aux_loss_coef", "router_jitter_noise"),
                         weights_for=_llama4_weights))


def _aria_shared_experts(hf: Dict[str, Any]) -> Optional[int]:
    shared = int(hf.get("moe_num_shared_experts", 2))
    if shared < 1:
        raise RegistryError(f"aria_text moe_num_shared_experts={shared} is not supported (at least 1)")
    return shared * int(hf["intermediate_size"])


def _aria_text_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    for key in ("attention_bias", "mlp_bias"):
        if hf.get(key, False):
            raise RegistryError(f"aria_text {key}=True is not supported (the experts have no biases)")
    if "moe_intermediate_size" in hf:  # the remote-code AriaMoELMConfig's key; AriaTextConfig has none
        raise RegistryError(f"aria_text moe_intermediate_size={hf['moe_intermediate_size']} is not read by "
                            "transformers' AriaTextConfig (experts and shared experts use intermediate_size); "
                            "convert the config to transformers' aria_text format first")
    if (hf.get("hidden_act") or "silu") != "silu":
        raise RegistryError(f"aria_text hidden_act={hf['hidden_act']!r} is not supported (only silu: the routed "
                            "experts are always SiLU-gated)")
    return {**_common_config(hf), "num_experts": int(hf.get("moe_num_experts", 8)),
            "moe_router_topk": int(hf.get("moe_topk", 2)), "moe_ffn_hidden_size": int(hf["intermediate_size"]),
            "moe_shared_expert_intermediate_size": _aria_shared_experts(hf)}


def _aria_text_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "aria_text")
    if cfg.num_experts is None or cfg.activation != "swiglu":
        raise RegistryError("aria_text needs MoE layers (--num-experts) with --swiglu")
    ffn, shared = cfg.moe_expert_ffn_hidden_size, cfg.moe_shared_expert_intermediate_size
    if shared is None or shared % ffn:
        raise RegistryError(f"aria_text needs shared experts of a multiple of the expert FFN size {ffn} "
                            f"(--n-shared-experts), got --moe-shared-expert-intermediate-size {shared}")
    require_config(cfg, "aria_text", moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_expert_capacity_factor=None,
                   shared_expert_gate=False, moe_layer_freq=1, first_k_dense_replace=0,
                   moe_apply_probs_on_input=False, sliding_window=None)
    return {**_common_hf_config(cfg), "attention_bias": False, "mlp_bias": False, "intermediate_size": ffn,
            "moe_num_experts": cfg.num_experts, "moe_topk": cfg.moe_router_topk,
            "moe_num_shared_experts": shared // ffn}


def _aria_text_weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    return DENSE_ATTENTION_WEIGHTS + fused_expert_weights("mlp", "fc1.weight", "fc2.weight", "shared_experts")


ARIA_TEXT = register(Family("aria_text", "aria_text", "AriaTextForCausalLM", _aria_text_config, _aria_text_hf_config,
                            DENSE_ATTENTION_WEIGHTS, weights_for=_aria_text_weights))

# --------------------------------------------------------------------------- GPT-OSS

GPT_OSS_NAME = "gpt_oss"
GLU_LINEAR_OFFSET = 1.0  # GPT-OSS's (up + 1)
# transformers' GptOssConfig defaults for keys a config.json may leave out
GPT_OSS_DEFAULTS: Dict[str, Any] = dict(
    rms_norm_eps=1e-5, swiglu_alpha=QUICK_GELU_ALPHA, swiglu_limit=7.0, attention_bias=True, sliding_window=128,
    num_experts_per_tok=4, router_aux_loss_coef=0.001, tie_word_embeddings=False, head_dim=64,
    num_key_value_heads=8, max_position_embeddings=131072)
GPT_OSS_DEFAULT_ROPE: Dict[str, Any] = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                        "truncate": False, "original_max_position_embeddings": 4096,
                                        "rope_theta": 150000.0}

GPT_OSS_EXPERT_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("self_attention.softmax_offset", ["self_attn.sinks"]),
    _layer("mlp.router.weight", ["mlp.router.weight"]),
    _layer("mlp.router.bias", ["mlp.router.bias"]),
    _layer("mlp.experts.linear_fc1.weight", ["mlp.experts.gate_up_proj"], "experts_gate_up_interleaved"),
    _layer("mlp.experts.linear_fc1.bias", ["mlp.experts.gate_up_proj_bias"], "experts_gate_up_interleaved"),
    _layer("mlp.experts.linear_fc2.weight", ["mlp.experts.down_proj"], "experts_transposed"),
    _layer("mlp.experts.linear_fc2.bias", ["mlp.experts.down_proj_bias"]),
)
GPT_OSS_WEIGHTS = DENSE_ATTENTION_WEIGHTS + GPT_OSS_EXPERT_WEIGHTS


def _alternating_layer_types(layers: int) -> list:
    """transformers' default: even layers slide, odd layers attend fully."""
    return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]


def _gpt_oss_activation(hf: Dict[str, Any]) -> Dict[str, Any]:
    """The experts' clamped SwiGLU as --quick-geglu, --activation-func-clamp-value and --glu-linear-offset."""
    alpha, limit = float(hf["swiglu_alpha"]), hf["swiglu_limit"]
    if not math.isclose(alpha, QUICK_GELU_ALPHA, rel_tol=0.0, abs_tol=1e-9):
        raise RegistryError(f"{GPT_OSS_NAME} swiglu_alpha={alpha} is not supported (only quick GELU's {QUICK_GELU_ALPHA})")
    if limit is None or float(limit) <= 0:
        raise RegistryError(f"{GPT_OSS_NAME} swiglu_limit={limit!r} is not supported (a positive clamp value)")
    return dict(activation="quick_geglu", activation_func_clamp_value=float(limit),
                glu_linear_offset=GLU_LINEAR_OFFSET)


def _gpt_oss_biases(attention_bias: bool) -> Dict[str, Any]:
    """Expert and router biases always; attention biases with ``attention_bias``."""
    if attention_bias:
        return dict(add_bias_linear=True, add_mlp_bias=False, add_router_bias=False)
    return dict(add_bias_linear=False, add_mlp_bias=True, add_router_bias=True)


def _gpt_oss_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**GPT_OSS_DEFAULTS, **hf}
    if not any(hf.get(key) for key in ("rope_parameters", "rope_scaling", "rope_theta")):
        hf["rope_parameters"] = GPT_OSS_DEFAULT_ROPE
    layers = int(hf["num_hidden_layers"])
    window = hf.get("sliding_window")
    kwargs = {**_common_config(hf), **_moe_common(hf, GPT_OSS_NAME, "num_local_experts"), **_gpt_oss_activation(hf),
              **_gpt_oss_biases(bool(hf["attention_bias"])), "softmax_type": "learnable",
              **_layer_windows(hf.get("layer_types") or _alternating_layer_types(layers),
                               int(window) if window else None, layers)}
    return kwargs


def _check_gpt_oss(cfg: TransformerConfig) -> None:
    """What GPT-OSS's HF model has and cannot leave out, as one-line RegistryErrors."""
    if not (cfg.activation == "quick_geglu" and cfg.activation_func_clamp_value is not None
            and cfg.glu_linear_offset == GLU_LINEAR_OFFSET):
        raise RegistryError(f"{GPT_OSS_NAME} needs the clamped SwiGLU: --quick-geglu --activation-func-clamp-value L "
                            f"--glu-linear-offset {GLU_LINEAR_OFFSET}")
    if cfg.softmax_type != "learnable":
        raise RegistryError(f"{GPT_OSS_NAME} needs --softmax-type learnable (its attention sinks)")
    if not (cfg.mlp_bias and cfg.router_bias):
        raise RegistryError(f"{GPT_OSS_NAME} experts and router have biases: needs --add-bias-linear, or --add-mlp-bias "
                            "with --add-router-bias")
    if cfg.add_qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers:
        raise RegistryError(f"{GPT_OSS_NAME} has biases on all of q/k/v/o (--add-bias-linear) or none of them")
    if cfg.num_experts is None:
        raise RegistryError(f"{GPT_OSS_NAME} is an MoE family: needs --num-experts")
    require_config(cfg, GPT_OSS_NAME, moe_router_score_function="softmax", moe_router_pre_softmax=False,
                   moe_router_num_groups=None, moe_router_topk_scaling_factor=None,
                   moe_router_enable_expert_bias=False, moe_shared_expert_intermediate_size=None,
                   moe_layer_freq=1, first_k_dense_replace=0, moe_expert_capacity_factor=None)


def _gpt_oss_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _check_gpt_oss(cfg)
    out = {**_common_hf_config(cfg), **_moe_common_hf(cfg), "num_local_experts": cfg.num_experts,
           "hidden_act": "silu", "swiglu_alpha": QUICK_GELU_ALPHA, "swiglu_limit": cfg.activation_func_clamp_value,
           "attention_bias": cfg.add_bias_linear, "sliding_window": cfg.sliding_window,
           "layer_types": _layer_types(cfg)}
    out.pop("router_jitter_noise")
    if out["rope_scaling"] is None:  # GptOssConfig reads no rope_parameters as its YaRN defaults: say "default"
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": out.pop("rope_theta")}
        del out["rope_scaling"]
    return out


GPT_OSS = register(Family(GPT_OSS_NAME, "gpt_oss", "GptOssForCausalLM", _gpt_oss_config, _gpt_oss_hf_config,
                          GPT_OSS_WEIGHTS, preserved_keys=("output_router_logits",)), "gpt-oss")

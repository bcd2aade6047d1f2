"""GPT-OSS (issue 10): OpenAI's mixture-of-experts family, ``gpt_oss`` (MindSpeed alias ``gpt-oss``).

Every layer: Llama's attention with biases on q/k/v/o and a learned sink logit per head
(``--softmax-type learnable``), sliding-window and full layers as HF ``layer_types`` says (alternating by
default), YaRN RoPE without rounding its ramp bounds (``--no-yarn-correction-range-round-to-int``), then an
MoE layer: a router with a bias, top-k of the logits then a softmax over those k (our default routing), and
experts with biases and the clamped SwiGLU ``(clamp(up, -l, l) + 1) * g * sigmoid(1.702 g)``,
``g = clamp(gate, max=l)`` (``--quick-geglu --activation-func-clamp-value l --glu-linear-offset 1``).

``attention_bias`` true (the published models) is ``--add-bias-linear``: Megatron's one switch for the
attention, expert and router biases. HF's experts and router always have biases, so ``attention_bias``
false maps to ``--disable-bias-linear --add-mlp-bias --add-router-bias``.

Weights: HF keeps each layer's experts fused and transposed, ``mlp.experts.gate_up_proj`` [E, h, 2 ffn] with
gate and up interleaved along the last dim ("experts_gate_up_interleaved" -> our fc1 [E, 2 ffn, h] with
[gate; up] rows; its bias [E, 2 ffn] likewise) and ``down_proj`` [E, ffn, h] ("experts_transposed" -> our
fc2 [E, h, ffn]); ``self_attn.sinks`` [heads] is our ``softmax_offset``.

Refused (RegistryError): ``quantization_config`` (the published MXFP4 experts: convert a dequantized copy),
``swiglu_alpha`` other than quick GELU's 1.702 (Megatron's ``--quick-geglu`` fixes
it), router jitter; our side: settings GPT-OSS has no key for (dense layers, shared experts, other routing).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

from core.transformer.config import TransformerConfig
from core.transformer.mlp import QUICK_GELU_ALPHA
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _common_config, _common_hf_config,
                                           _layer, _layer_types, _layer_windows, register)
from mindspeed_llm.models.zoo_moe import (DENSE_ATTENTION_WEIGHTS, _moe_common, _moe_common_hf,
                                          _reject_unmapped_moe)

FAMILY = "gpt_oss"
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
        raise RegistryError(f"{FAMILY} swiglu_alpha={alpha} is not supported (only quick GELU's {QUICK_GELU_ALPHA})")
    if limit is None or float(limit) <= 0:
        raise RegistryError(f"{FAMILY} swiglu_limit={limit!r} is not supported (a positive clamp value)")
    return dict(activation="quick_geglu", activation_func_clamp_value=float(limit),
                glu_linear_offset=GLU_LINEAR_OFFSET)


def _gpt_oss_biases(attention_bias: bool) -> Dict[str, Any]:
    """Expert and router biases always; attention biases with ``attention_bias``."""
    if attention_bias:
        return dict(add_bias_linear=True, add_mlp_bias=False, add_router_bias=False)
    return dict(add_bias_linear=False, add_mlp_bias=True, add_router_bias=True)


def _gpt_oss_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    quantization = hf.get("quantization_config")
    if quantization:
        method = quantization.get("quant_method") if isinstance(quantization, dict) else quantization
        raise RegistryError(f"{FAMILY} quantization_config (quant_method {method!r}) is not supported: convert a "
                            "dequantized checkpoint (transformers: load with Mxfp4Config(dequantize=True), then "
                            "save_pretrained)")
    hf = {**GPT_OSS_DEFAULTS, **hf}
    if not any(hf.get(key) for key in ("rope_parameters", "rope_scaling", "rope_theta")):
        hf["rope_parameters"] = GPT_OSS_DEFAULT_ROPE
    layers = int(hf["num_hidden_layers"])
    window = hf.get("sliding_window")
    kwargs = {**_common_config(hf), **_moe_common(hf, FAMILY, "num_local_experts"), **_gpt_oss_activation(hf),
              **_gpt_oss_biases(bool(hf["attention_bias"])), "softmax_type": "learnable",
              **_layer_windows(hf.get("layer_types") or _alternating_layer_types(layers),
                               int(window) if window else None, layers)}
    return kwargs


def _check_gpt_oss(cfg: TransformerConfig) -> None:
    """What GPT-OSS's HF model has and cannot leave out, as one-line RegistryErrors."""
    if not (cfg.activation == "quick_geglu" and cfg.activation_func_clamp_value is not None
            and cfg.glu_linear_offset == GLU_LINEAR_OFFSET):
        raise RegistryError(f"{FAMILY} needs the clamped SwiGLU: --quick-geglu --activation-func-clamp-value L "
                            f"--glu-linear-offset {GLU_LINEAR_OFFSET}")
    if cfg.softmax_type != "learnable":
        raise RegistryError(f"{FAMILY} needs --softmax-type learnable (its attention sinks)")
    if not (cfg.mlp_bias and cfg.router_bias):
        raise RegistryError(f"{FAMILY} experts and router have biases: needs --add-bias-linear, or --add-mlp-bias "
                            "with --add-router-bias")
    if cfg.add_qkv_bias or cfg.add_dense_bias or cfg.dense_bias_layers:
        raise RegistryError(f"{FAMILY} has biases on all of q/k/v/o (--add-bias-linear) or none of them")
    if cfg.num_experts is None:
        raise RegistryError(f"{FAMILY} is an MoE family: needs --num-experts")
    _reject_unmapped_moe(cfg, FAMILY, moe_router_score_function="softmax", moe_router_pre_softmax=False,
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


GPT_OSS = register(Family(FAMILY, "gpt_oss", "GptOssForCausalLM", _gpt_oss_config, _gpt_oss_hf_config,
                          GPT_OSS_WEIGHTS, preserved_keys=("output_router_logits",)), "gpt-oss")

"""The architecture registry: Hugging Face families as data (DESIGN.md, principle 4).

Each :class:`Family` holds

* ``to_config``: HF ``config.json`` dict -> :class:`TransformerConfig` kwargs;
* ``to_hf_config``: our config (plus the original HF config, when known) -> an
  equivalent HF ``config.json`` dict;
* ``weights``: a declarative, two-way weight-name map. Each :class:`WeightRule`
  names one of our parameters (``{i}`` is the global layer number), the HF
  tensors it is made of and the transform between them (see ``TRANSFORMS``).

Which of our parameters exist (biases, the untied output layer) is decided by
the model built from the config, never by the family name; the map only says
where each one comes from. The families share the Llama layout:

    ours                                              HF
    embedding.word_embeddings.weight      [v_pad, h]  model.embed_tokens.weight  [v, h]   (vocab pad)
    decoder.layers.{i}.self_attention.linear_qkv      cat(q_proj, k_proj, v_proj) rows    (fuse rows)
    decoder.layers.{i}.mlp.linear_fc1                 cat(gate_proj, up_proj) rows        (fuse rows)
    output_layer.weight                   [v_pad, h]  lm_head.weight             [v, h]   (vocab pad)

RoPE uses the HF half-rotation layout on both sides, so q/k need no permutation.

Mistral's ``sliding_window`` maps to the decoder's ``sliding_window``; per-layer
windows (HF ``layer_types``, Qwen2's ``use_sliding_window`` with
``max_window_layers``) map to ``--sliding-window-pattern`` or
``--full-attention-layers``.

Usage::

    family = get_family("llama3")
    cfg = TransformerConfig(**family.to_config(json.load(open("config.json"))))
    hf_config = family.to_hf_config(cfg, original_hf_config)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from core.transformer.config import TransformerConfig, parse_layer_frequency
from mindspeed_llm.models.qkv_layout import (blocked_to_ours, interleaved_to_ours, ours_to_blocked,
                                             ours_to_interleaved)


class RegistryError(ValueError):
    """An HF config or family name the registry cannot map (message is one line)."""


# --------------------------------------------------------------------------- weight map


@dataclass(frozen=True)
class WeightRule:
    """One of our parameters (``ours``, ``{i}`` = layer) made of HF tensors ``hf`` by ``transform``.

    ``layer_stride`` / ``layer_offset``: our layer ``i`` is HF layer ``(i - layer_offset) / layer_stride``, and the
    rule maps only our layers of that remainder (a family whose HF layer is two of our pattern letters, a mixer
    and an MLP, maps its mixer with stride 2 offset 0 and its MLP with stride 2 offset 1).
    """

    ours: str
    hf: Tuple[str, ...]
    transform: str = "copy"
    layer_stride: int = 1
    layer_offset: int = 0

    def pattern(self) -> "re.Pattern[str]":
        return re.compile("^" + re.escape(self.ours).replace(r"\{i\}", r"(?P<i>\d+)") + "$")


@dataclass(frozen=True)
class TensorContext:
    """What a transform needs: row split sizes of a fused weight, vocab sizes, the model's config (head
    counts and sizes)."""

    split_sizes: Tuple[int, ...] = ()
    vocab_size: int = 0
    padded_vocab_size: int = 0
    config: Optional[TransformerConfig] = None


def _copy_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return tensors[0]


def _copy_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor]


def _fuse_rows_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    sizes = tuple(t.size(0) for t in tensors)
    if ctx.split_sizes and sizes != ctx.split_sizes:
        raise RegistryError(f"fused tensors have rows {sizes}, the model expects {ctx.split_sizes}")
    if tensors[0].is_meta:  # shapes only (the converter's header check): torch.cat's meta kernel is Python that
        # imports torch._dynamo on its first call, seconds of a conversion; the C++ empty gives the same shape
        if len({t.shape[1:] for t in tensors}) > 1:
            raise RegistryError(f"fused tensors have shapes {[tuple(t.shape) for t in tensors]}; only their rows "
                                "may differ")
        return tensors[0].new_empty((sum(sizes), *tensors[0].shape[1:]))
    return torch.cat(list(tensors), dim=0)  # [q; k; v] or [gate; up] rows


def _fuse_rows_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [piece.contiguous() for piece in tensor.split(list(ctx.split_sizes), dim=0)]


def _vocab_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    full = tensors[0]  # [v, h]
    if full.size(0) != ctx.vocab_size:
        raise RegistryError(f"vocabulary tensor has {full.size(0)} rows, config vocab_size is {ctx.vocab_size}")
    if ctx.padded_vocab_size == ctx.vocab_size:
        return full
    padded = full.new_zeros((ctx.padded_vocab_size,) + tuple(full.shape[1:]))  # [v_pad, h]
    padded[:ctx.vocab_size] = full
    return padded


def _vocab_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor[:ctx.vocab_size].contiguous()]  # [v_pad, h] -> [v, h]


def _qkv_shape(ctx: TensorContext) -> Tuple[int, int, int]:
    cfg = ctx.config
    return cfg.num_attention_heads, cfg.num_query_groups, cfg.kv_channels


def _qkv_interleaved_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return interleaved_to_ours(tensors[0], *_qkv_shape(ctx))  # per-group [q.., k, v] rows -> [Q; K; V]


def _qkv_interleaved_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [ours_to_interleaved(tensor, *_qkv_shape(ctx))]


CODEGEN_QKV_BLOCKS = 4  # CodeGen's mp_num: fixed in its modeling code, not a config key


def _qkv_codegen_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return blocked_to_ours(tensors[0], CODEGEN_QKV_BLOCKS)  # mp_num blocks of [q, v, k] slices -> [Q; K; V]


def _qkv_codegen_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [ours_to_blocked(tensor, CODEGEN_QKV_BLOCKS)]


def _conv1d_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return tensors[0].t().contiguous()  # GPT-2's Conv1D [in, out] -> our linear [out, in]


def _conv1d_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor.t().contiguous()]  # [out, in] -> [in, out]


def _stack_experts_gated_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    gates, ups = tensors[0::2], tensors[1::2]  # per expert [ffn, h] each
    return torch.stack([torch.cat([g, u], dim=0) for g, u in zip(gates, ups)])  # [experts, 2 ffn, h]


def _stack_experts_gated_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [piece.contiguous() for expert in tensor for piece in expert.chunk(2, dim=0)]  # gate, up per expert


def _stack_experts_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return torch.stack(list(tensors))  # per expert [out, in] -> [experts, out, in]


def _stack_experts_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [expert.contiguous() for expert in tensor]


def _experts_transposed_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return tensors[0].transpose(1, 2).contiguous()  # [experts, in, out] -> [experts, out, in]


def _experts_transposed_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [tensor.transpose(1, 2).contiguous()]  # [experts, out, in] -> [experts, in, out]


def _vocab_copies_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """The word embeddings (or output layer) stored once more per MTP layer (DeepSeek-V3): the copies must agree."""
    first = tensors[0]
    for copy in tensors[1:]:
        if not first.is_meta and not torch.equal(first, copy):
            raise RegistryError("an MTP layer's copy of the word embeddings / output layer differs from the main one; "
                                "the model holds one shared tensor")
    return _vocab_to_ours([first], ctx)


def _vocab_copies_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return _vocab_to_hf(tensor, ctx) * (1 + ctx.config.mtp_num_layers)  # the main tensor, then one per MTP layer


def _experts_gate_up_interleaved_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    """HF fused experts with gate/up interleaved along the last dim (GPT-OSS): weight [experts, h, 2 ffn]
    (transposed) or bias [experts, 2 ffn] -> ours [experts, 2 ffn(, h)] with [gate; up] rows."""
    fused = tensors[0].transpose(1, 2) if tensors[0].dim() == 3 else tensors[0]  # [experts, 2 ffn(, h)]
    return torch.cat([fused[:, 0::2], fused[:, 1::2]], dim=1).contiguous()


def _experts_gate_up_interleaved_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    gate, up = tensor.chunk(2, dim=1)  # [experts, ffn(, h)] each
    interleaved = torch.stack([gate, up], dim=2).flatten(1, 2)  # [experts, 2 ffn(, h)]: g0, u0, g1, u1, ...
    return [(interleaved.transpose(1, 2) if interleaved.dim() == 3 else interleaved).contiguous()]


def _column_halves_to_ours(tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    if tensors[0].is_meta:  # shapes only (see _fuse_rows_to_ours)
        return tensors[0].new_empty((tensors[0].size(0), sum(t.size(1) for t in tensors)))
    return torch.cat(list(tensors), dim=1)  # [out, in_1 + in_2]


def _column_halves_to_hf(tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return [piece.contiguous() for piece in tensor.chunk(2, dim=1)]


# name -> (HF tensors -> ours, ours -> HF tensors)
TRANSFORMS: Dict[str, Tuple[Callable[..., torch.Tensor], Callable[..., List[torch.Tensor]]]] = {
    "copy": (_copy_to_ours, _copy_to_hf),
    "fuse_rows": (_fuse_rows_to_ours, _fuse_rows_to_hf),
    "vocab": (_vocab_to_ours, _vocab_to_hf),
    # one fused tensor, interleaved per KV group (GPT-NeoX, Bloom, Falcon; mindspeed_llm/models/qkv_layout.py)
    "qkv_interleaved": (_qkv_interleaved_to_ours, _qkv_interleaved_to_hf),
    # CodeGen's fused qkv_proj: mp_num blocks, each with a slice of q, v and k (qkv_layout.blocked_to_ours)
    "qkv_codegen": (_qkv_codegen_to_ours, _qkv_codegen_to_hf),
    # GPT-2's Conv1D weights are stored transposed, [in, out]; fused c_attn columns are [q; k; v]
    "conv1d": (_conv1d_to_ours, _conv1d_to_hf),
    # MoE experts stored one tensor per expert: (gate, up) pairs -> [experts, 2 ffn, h]; down -> [experts, h, ffn]
    "stack_experts_gated": (_stack_experts_gated_to_ours, _stack_experts_gated_to_hf),
    "stack_experts": (_stack_experts_to_ours, _stack_experts_to_hf),
    # all experts in one 3-D tensor stored [experts, in, out] (Llama 4, Aria): gate_up_proj [e, h, 2 ffn] with
    # [gate | up] columns -> [e, 2 ffn, h]; down_proj [e, ffn, h] -> [e, h, ffn]
    "experts_transposed": (_experts_transposed_to_ours, _experts_transposed_to_hf),
    # a vocabulary tensor (padded like "vocab") and its identical copies in each MTP layer (DeepSeek-V3)
    "vocab_copies": (_vocab_copies_to_ours, _vocab_copies_to_hf),
    # MoE experts stored fused and transposed, [experts, in, out], gate/up interleaved along the last dim
    # (GPT-OSS's gate_up_proj [experts, h, 2 ffn] and its bias [experts, 2 ffn]) -> [experts, 2 ffn(, h)]
    "experts_gate_up_interleaved": (_experts_gate_up_interleaved_to_ours, _experts_gate_up_interleaved_to_hf),
    # two HF matrices reading the two halves of our input, as our columns [first | second] (DeepSeek-V4's MTP e_proj
    # and h_proj, our eh_proj over [embeddings; hidden])
    "column_halves": (_column_halves_to_ours, _column_halves_to_hf),
}


def _layer(ours: str, hf: Sequence[str], transform: str = "copy") -> WeightRule:
    return WeightRule("decoder.layers.{i}." + ours, tuple("model.layers.{i}." + n for n in hf), transform)


LLAMA_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    _layer("input_layernorm.weight", ["input_layernorm.weight"]),
    _layer("self_attention.linear_qkv.weight",
           ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"], "fuse_rows"),
    _layer("self_attention.linear_qkv.bias",
           ["self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"], "fuse_rows"),
    _layer("self_attention.linear_proj.weight", ["self_attn.o_proj.weight"]),
    _layer("self_attention.linear_proj.bias", ["self_attn.o_proj.bias"]),
    _layer("pre_mlp_layernorm.weight", ["post_attention_layernorm.weight"]),
    _layer("mlp.linear_fc1.weight", ["mlp.gate_proj.weight", "mlp.up_proj.weight"], "fuse_rows"),
    _layer("mlp.linear_fc1.bias", ["mlp.gate_proj.bias", "mlp.up_proj.bias"], "fuse_rows"),
    _layer("mlp.linear_fc2.weight", ["mlp.down_proj.weight"]),
    _layer("mlp.linear_fc2.bias", ["mlp.down_proj.bias"]),
    WeightRule("decoder.final_layernorm.weight", ("model.norm.weight",)),
    WeightRule("output_layer.weight", ("lm_head.weight",), "vocab"),
    # LayerNorm biases (StableLM); no parameter of ours matches them under RMSNorm
    _layer("input_layernorm.bias", ["input_layernorm.bias"]),
    _layer("pre_mlp_layernorm.bias", ["post_attention_layernorm.bias"]),
    WeightRule("decoder.final_layernorm.bias", ("model.norm.bias",)),
    # per-head q/k norms (Qwen3, --qk-norm per_head)
    _layer("self_attention.q_layernorm.weight", ["self_attn.q_norm.weight"]),
    _layer("self_attention.k_layernorm.weight", ["self_attn.k_norm.weight"]),
)


def _renamed(rules: Sequence[WeightRule], hf_names: Dict[str, str], extra: Sequence[WeightRule] = ()
             ) -> Tuple[WeightRule, ...]:
    """``rules`` with our parameters remapped to other HF layer tensors (``hf_names``: ours -> HF suffix)."""
    out = []
    for rule in rules:
        suffix = rule.ours.replace("decoder.layers.{i}.", "")
        out.append(_layer(suffix, [hf_names[suffix]]) if suffix in hf_names else rule)
    return tuple(out) + tuple(extra)


# Gemma2's sandwich norms: four per layer
GEMMA2_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"pre_mlp_layernorm.weight": "pre_feedforward_layernorm.weight"}, (
    _layer("post_self_attn_layernorm.weight", ["post_attention_layernorm.weight"]),
    _layer("post_mlp_layernorm.weight", ["post_feedforward_layernorm.weight"]),
))

# Olmo2's post-only norms take the names of Gemma2's output norms; there are no norms before attention/MLP
OLMO2_WEIGHTS = GEMMA2_WEIGHTS

# Phi-3 stores q/k/v and gate/up already fused in our row order
PHI3_WEIGHTS = _renamed(LLAMA_WEIGHTS, {"self_attention.linear_qkv.weight": "self_attn.qkv_proj.weight",
                                        "mlp.linear_fc1.weight": "mlp.gate_up_proj.weight"})

# A reward model's score head (--stage orm): HF ...ForSequenceClassification's ``score`` (no bias, one label)
VALUE_HEAD_RULE = WeightRule("value_head.weight", ("score.weight",))

# HF tensors that carry no weights, neither read nor written (old checkpoints store the RoPE buffer).
# Old GPT-NeoX/GPT-J checkpoints also store their causal-mask buffers (attention.bias, attn.masked_bias);
# transformers' MiniMax saves the fixed decays of its lightning layers (recomputed from the config on load).
IGNORED_HF_TENSORS = (re.compile(r".*rotary_emb\.inv_freq$"), re.compile(r".*\.(attention|attn)\.(bias|masked_bias)$"),
                      re.compile(r".*\.self_attn\.(slope_rate|query_decay|key_decay|diagonal_decay)$"))


MTP_OWN_TENSORS = (("enorm", "enorm"), ("hnorm", "hnorm"), ("eh_proj", "eh_proj"),
                   ("final_layernorm", "shared_head.norm"))  # ours -> HF, under mtp.layers.{k} / model.layers.{L + k}


def mtp_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``num_nextn_predict_layers`` (DeepSeek-V3, GLM-4.5) as ``--mtp-num-layers`` (none when 0 or absent)."""
    depth = int(hf.get("num_nextn_predict_layers") or 0)
    return {"mtp_num_layers": depth} if depth else {}


def mtp_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    """``--mtp-num-layers`` as ``num_nextn_predict_layers``; without MTP the original config's value stays (a
    checkpoint saved by transformers keeps its count though its MTP tensors were dropped)."""
    return {"num_nextn_predict_layers": cfg.mtp_num_layers} if cfg.mtp_num_layers else {}


def with_mtp_weights(weights_for: Callable[[TransformerConfig], Tuple[WeightRule, ...]]
                     ) -> Callable[[TransformerConfig], Tuple[WeightRule, ...]]:
    """A family's ``weights_for`` plus its MTP layers' rules (first: the first matching rule wins)."""
    def rules(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
        base = tuple(weights_for(cfg))
        return mtp_weight_rules(cfg, base) + base
    return rules


def mtp_weight_rules(cfg: TransformerConfig, rules: Sequence[WeightRule] = LLAMA_WEIGHTS) -> Tuple[WeightRule, ...]:
    """The weight map of ``cfg``'s MTP modules in DeepSeek-V3's HF layout; put these rules before ``rules``.

    MTP module k (0-based) is HF layer ``num_layers + k``: ``enorm``, ``hnorm``, ``eh_proj`` and
    ``shared_head.norm`` (our ``final_layernorm``) are its own; its transformer layer's tensors
    carry the decoder layers' names (``rules``' ``decoder.layers.{i}.*`` rules, layer filled in);
    ``embed_tokens`` and ``shared_head.head`` are copies of the word embeddings and the output
    layer, which the returned embedding and output rules read (checked equal) and write.
    """
    if not cfg.mtp_num_layers:
        return ()
    if not cfg.untie_embeddings_and_output_weights:
        raise RegistryError("MTP layers with tied word embeddings have no DeepSeek-V3 weight layout; untie them")
    hf_layers = [f"model.layers.{cfg.num_layers + k}." for k in range(cfg.mtp_num_layers)]
    out: List[WeightRule] = []
    for ours_name, suffix in (("embedding.word_embeddings.weight", "embed_tokens.weight"),
                              ("output_layer.weight", "shared_head.head.weight")):
        rule, main = find_rule(rules, ours_name)
        if rule.transform != "vocab" or len(main) != 1:
            raise RegistryError(f"MTP layers need {ours_name} mapped from one HF tensor by 'vocab', not {rule}")
        out.append(WeightRule(ours_name, main + tuple(layer + suffix for layer in hf_layers), "vocab_copies"))
    layer_rules = [r for r in rules if r.ours.startswith("decoder.layers.{i}.")]
    for k, hf_layer in enumerate(hf_layers):
        ours = f"mtp.layers.{k}."
        for name, hf_name in MTP_OWN_TENSORS:
            out.extend(WeightRule(f"{ours}{name}.{kind}", (f"{hf_layer}{hf_name}.{kind}",)) for kind in ("weight", "bias"))
        for rule in layer_rules:
            out.append(WeightRule(rule.ours.replace("decoder.layers.{i}.", ours + "transformer_layer."),
                                  tuple(n.replace("model.layers.{i}.", hf_layer) for n in rule.hf), rule.transform))
    return tuple(out)


def find_rule(rules: Sequence[WeightRule], name: str) -> Tuple[WeightRule, Tuple[str, ...]]:
    """The rule for our parameter ``name`` and its HF tensor names (layer filled in)."""
    for rule in rules:
        match = rule.pattern().match(name)
        if not match:
            continue
        layer = match.groupdict().get("i")
        if layer is None:
            return rule, rule.hf
        hf_layer, remainder = divmod(int(layer) - rule.layer_offset, rule.layer_stride)
        if remainder == 0 and hf_layer >= 0:
            return rule, tuple(n.replace("{i}", str(hf_layer)) for n in rule.hf)
    raise RegistryError(f"no weight rule maps parameter {name!r}")


def to_ours(rule: WeightRule, tensors: Sequence[torch.Tensor], ctx: TensorContext) -> torch.Tensor:
    return TRANSFORMS[rule.transform][0](tensors, ctx)


def to_hf(rule: WeightRule, tensor: torch.Tensor, ctx: TensorContext) -> List[torch.Tensor]:
    return TRANSFORMS[rule.transform][1](tensor, ctx)


# --------------------------------------------------------------------------- configs

ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters")
DTYPE_KEYS = ("torch_dtype", "dtype")
QUANTIZATION_KEYS = ("quantization_config",)  # an export writes the dequantised weights


def _rope_settings(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Our rope kwargs from ``rope_theta``/``rope_scaling`` (4.x) or ``rope_parameters`` (5.x)."""
    params = dict(hf.get("rope_scaling") or {})
    new_style = hf.get("rope_parameters") or {}
    if new_style and not any(k in new_style for k in ("rope_type", "type", "rope_theta")):
        raise RegistryError(f"per-layer-type rope_parameters {sorted(new_style)} are not supported")
    params.update(new_style)
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type")) or "default"
    out: Dict[str, Any] = {"rotary_base": float(theta)}
    partial = params.get("partial_rotary_factor", hf.get("partial_rotary_factor"))
    if partial is not None:
        out["rotary_percent"] = float(partial)
    if kind == "default":
        return out
    if kind == "linear":
        return {**out, "rope_scaling_type": "linear", "rope_scaling_factor": float(params["factor"])}
    if kind == "llama3":
        return {**out, "rope_scaling_type": "llama3", "rope_scaling_factor": float(params["factor"]),
                "rope_low_freq_factor": float(params["low_freq_factor"]),
                "rope_high_freq_factor": float(params["high_freq_factor"]),
                "rope_original_max_position_embeddings": int(params["original_max_position_embeddings"])}
    if kind == "yarn":
        return {**out, **_yarn_settings(hf, params)}
    raise RegistryError(f"rope scaling type {kind!r} is not supported (supported: default, linear, llama3, yarn)")


def _yarn_settings(hf: Dict[str, Any], params: Dict[str, Any]) -> Dict[str, Any]:
    """YaRN kwargs as transformers reads them: the original context from the top level (Phi-3 style), the
    rope parameters or ``max_position_embeddings``; the factor, when absent, their ratio."""
    if params.get("attention_factor") is not None:
        raise RegistryError(f"yarn rope attention_factor={params['attention_factor']!r} is not supported")
    original = int(hf.get("original_max_position_embeddings") or params.get("original_max_position_embeddings")
                   or hf["max_position_embeddings"])
    factor = params.get("factor") or int(hf["max_position_embeddings"]) / original
    return {"rope_scaling_type": "yarn", "rope_scaling_factor": float(factor),
            "rope_original_max_position_embeddings": original,
            "rope_scaling_beta_fast": float(params.get("beta_fast") or 32.0),
            "rope_scaling_beta_slow": float(params.get("beta_slow") or 1.0),
            "rope_scaling_mscale": float(params.get("mscale") or 0.0),
            "rope_scaling_mscale_all_dim": float(params.get("mscale_all_dim") or 0.0),
            "yarn_correction_range_round_to_int": bool(params.get("truncate", True))}


def _rope_to_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    """``rope_theta`` + ``rope_scaling``: read by transformers 4.x and 5.x alike."""
    out: Dict[str, Any] = {"rope_theta": cfg.rotary_base, "rope_scaling": None}
    if cfg.rotary_percent != 1.0:
        out["partial_rotary_factor"] = cfg.rotary_percent
    if cfg.rope_scaling_type == "linear":
        out["rope_scaling"] = {"rope_type": "linear", "factor": cfg.rope_scaling_factor}
    elif cfg.rope_scaling_type == "llama3":
        out["rope_scaling"] = {"rope_type": "llama3", "factor": cfg.rope_scaling_factor,
                               "low_freq_factor": cfg.rope_low_freq_factor,
                               "high_freq_factor": cfg.rope_high_freq_factor,
                               "original_max_position_embeddings": cfg.rope_original_max_position_embeddings}
    elif cfg.rope_scaling_type == "yarn":
        out["rope_scaling"] = {"rope_type": "yarn", "factor": cfg.rope_scaling_factor,
                               "original_max_position_embeddings": cfg.rope_original_max_position_embeddings,
                               "beta_fast": cfg.rope_scaling_beta_fast, "beta_slow": cfg.rope_scaling_beta_slow}
        for key, value in (("mscale", cfg.rope_scaling_mscale), ("mscale_all_dim", cfg.rope_scaling_mscale_all_dim)):
            if value:  # transformers reads an absent or zero weight alike
                out["rope_scaling"][key] = value
        if not cfg.yarn_correction_range_round_to_int:
            out["rope_scaling"]["truncate"] = False
    return out


def _dtype_name(hf: Dict[str, Any]) -> Optional[str]:
    value = hf.get("torch_dtype") or hf.get("dtype")
    return value if isinstance(value, str) and hasattr(torch, value) else None


# HF gated-MLP activation -> our --activation (the MLP is gated: act(gate) * up)
GATED_ACTIVATIONS: Dict[str, str] = {
    "silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu_tanh", "gelu_new": "geglu_tanh",
}


# HF activation of a non-gated MLP -> our --activation (the non-gated default is exact GELU)
PLAIN_ACTIVATIONS: Dict[str, str] = {
    "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",  # the same tanh formula, its constant written out
    "relu": "relu", "relu2": "squared_relu", "xielu": "xielu",
}


def plain_activation(hf: Dict[str, Any], family: str, key: str = "hidden_act", default: str = "gelu",
                     supported: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """Our ``activation`` for a non-gated HF MLP from ``hf[key]`` (``default`` when absent), one of
    ``supported`` (default: every name of ``PLAIN_ACTIVATIONS``); a one-line error names the others."""
    name = hf.get(key) or default
    allowed = list(supported or PLAIN_ACTIVATIONS)
    if name not in allowed:
        raise RegistryError(f"{family} {key}={name!r} is not supported (supported: {', '.join(allowed)})")
    return {"activation": PLAIN_ACTIVATIONS[name]}


def plain_activation_to_hf(cfg: TransformerConfig, family: str, tanh_name: str = "gelu_pytorch_tanh") -> str:
    """The HF name of a non-gated MLP's activation (``tanh_name`` for GELU's tanh form: families spell it
    differently)."""
    if cfg.gated_linear_unit:
        raise RegistryError(f"{family} cannot express this model's gated MLP (activation={cfg.activation}): its MLP "
                            "is not gated")
    return {"xielu": "xielu", "squared_relu": "relu2", "relu": "relu", "gelu_tanh": tanh_name}.get(cfg.mlp_function,
                                                                                                   "gelu")


def _gated_activation(hf: Dict[str, Any]) -> Dict[str, str]:
    name = hf.get("hidden_activation") or hf.get("hidden_act") or "silu"
    if name not in GATED_ACTIVATIONS:
        raise RegistryError(f"hidden_act {name!r} is not supported (supported: {', '.join(GATED_ACTIVATIONS)})")
    return {"activation": GATED_ACTIVATIONS[name]}


def _activation_to_hf(cfg: TransformerConfig) -> str:
    if cfg.activation == "swiglu":
        return "silu"
    return "gelu_pytorch_tanh" if cfg.mlp_function == "gelu_tanh" else "gelu"


def _common_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """The Llama-style fields every registered family shares."""
    heads = int(hf["num_attention_heads"])
    kwargs: Dict[str, Any] = dict(
        num_layers=int(hf["num_hidden_layers"]), hidden_size=int(hf["hidden_size"]),
        ffn_hidden_size=int(hf["intermediate_size"]), num_attention_heads=heads,
        num_query_groups=int(hf.get("num_key_value_heads") or heads),
        kv_channels=int(hf.get("head_dim") or int(hf["hidden_size"]) // heads),
        vocab_size=int(hf["vocab_size"]), max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        normalization="RMSNorm", norm_epsilon=float(hf.get("rms_norm_eps", 1e-6)), position_embedding_type="rope",
        add_bias_linear=False, add_qkv_bias=False,
        untie_embeddings_and_output_weights=not hf.get("tie_word_embeddings", False),
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=float(hf.get("initializer_range", 0.02)),
        make_vocab_size_divisible_by=1)
    kwargs.update(_gated_activation(hf))
    kwargs.update(_rope_settings(hf))
    dtype = _dtype_name(hf)
    if dtype is not None:
        kwargs["params_dtype"] = getattr(torch, dtype)
    return kwargs


def _common_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out: Dict[str, Any] = dict(
        hidden_size=cfg.hidden_size, intermediate_size=cfg.ffn_hidden_size, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_query_groups,
        head_dim=cfg.kv_channels, vocab_size=cfg.vocab_size, max_position_embeddings=cfg.max_position_embeddings,
        rms_norm_eps=cfg.norm_epsilon, hidden_act=_activation_to_hf(cfg),
        tie_word_embeddings=not cfg.untie_embeddings_and_output_weights, attention_dropout=0.0,
        initializer_range=cfg.init_method_std, use_cache=True,
        torch_dtype=str(cfg.params_dtype).replace("torch.", ""))
    out.update(_rope_to_hf(cfg))
    return out


def _llama_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    kwargs = _common_config(hf)
    attention_bias, mlp_bias = bool(hf.get("attention_bias", False)), bool(hf.get("mlp_bias", False))
    if attention_bias and mlp_bias:
        kwargs["add_bias_linear"] = True
    elif attention_bias or mlp_bias:
        raise RegistryError(f"attention_bias={attention_bias} with mlp_bias={mlp_bias} is not supported: the "
                            "decoder has biases on all linears (add_bias_linear) or on q/k/v only (add_qkv_bias)")
    return kwargs


def _llama_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_qkv_bias and not cfg.add_bias_linear:
        raise RegistryError("a q/k/v-only bias (add_qkv_bias) has no Llama equivalent; use --model-type-hf qwen2")
    return {**_common_hf_config(cfg), "attention_bias": cfg.add_bias_linear, "mlp_bias": cfg.add_bias_linear,
            "pretraining_tp": 1}


def _mistral_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_config(hf), "sliding_window": hf.get("sliding_window")}


def _mistral_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "mistral")
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window}


def _qwen_windows(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Qwen2/Qwen3 windows: with ``use_sliding_window``, layers ``i >= max_window_layers`` slide (or those
    ``layer_types`` names), as transformers' ``Qwen2Config`` builds them; without it no layer does."""
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    layers, first_sliding = int(hf["num_hidden_layers"]), int(hf.get("max_window_layers", 28))
    types = hf.get("layer_types") or ["sliding_attention" if window and i >= first_sliding else "full_attention"
                                      for i in range(layers)]
    return _layer_windows(types, window, layers)


def _qwen_windows_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    """``layer_types`` (which transformers reads first) and the switches; ``max_window_layers`` only when a
    layer slides (otherwise it has no effect and the original config's value is kept)."""
    types = _layer_types(cfg)
    sliding = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
    out = {"use_sliding_window": bool(sliding), "sliding_window": cfg.sliding_window if sliding else None,
           "layer_types": types}
    return {**out, "max_window_layers": sliding[0]} if sliding else out


def _qwen2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_config(hf), "add_qkv_bias": True, **_qwen_windows(hf)}  # Qwen2/2.5: q/k/v bias only


def _qwen2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear or not cfg.add_qkv_bias:
        raise RegistryError("qwen2 needs add_qkv_bias=True and add_bias_linear=False")
    return {**_common_hf_config(cfg), **_qwen_windows_hf(cfg)}


def _qwen3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    if hf.get("attention_bias", False):
        raise RegistryError("qwen3 attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    return {**_common_config(hf), "qk_norm": "per_head", **_qwen_windows(hf)}


def _qwen3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "qwen3")
    return {**_common_hf_config(cfg), "attention_bias": False, **_qwen_windows_hf(cfg)}


def _gemma_activation(hf: Dict[str, Any]) -> str:
    """transformers reads the official Gemma configs' legacy ``hidden_act: gelu`` as the tanh approximation."""
    act = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    return "gelu_pytorch_tanh" if act == "gelu" else act


def _gemma_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Gemma: RMSNorm scaled by (1 + w), embeddings times sqrt(hidden), tied by default."""
    if hf.get("attention_bias", False):
        raise RegistryError("gemma attention_bias=True is not supported")
    hf = {**hf, "hidden_act": _gemma_activation(hf)}
    return {**_common_config(hf), "apply_layernorm_1p": True, "input_embeds_norm": True,
            "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True)}


def _gemma_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "gemma")
    out = _common_hf_config(cfg)
    return {**out, "hidden_activation": out["hidden_act"], "attention_bias": False}


def _sliding_window_pattern(hf: Dict[str, Any]) -> Dict[str, Any]:
    """``sliding_window`` and ``sliding_window_pattern`` from HF ``layer_types`` (every Nth layer full)."""
    types = hf.get("layer_types") or []
    window = hf.get("sliding_window")
    if not window or "sliding_attention" not in types:
        return {"sliding_window": None, "sliding_window_pattern": None}
    if "full_attention" not in types:
        return {"sliding_window": int(window), "sliding_window_pattern": None}
    pattern = types.index("full_attention") + 1
    expected = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(len(types))]
    if types != expected:
        raise RegistryError(f"layer_types {types} are not 'every {pattern}th layer full' (sliding_window_pattern)")
    return {"sliding_window": int(window), "sliding_window_pattern": pattern}


def _layer_windows(types: Sequence[str], window: Optional[int], num_layers: int) -> Dict[str, Any]:
    """``sliding_window`` and which layers attend fully, from HF ``layer_types``: every Nth layer full as
    ``sliding_window_pattern``, any other choice as ``full_attention_layers``."""
    types = list(types)
    if len(types) != num_layers or set(types) - {"sliding_attention", "full_attention"}:
        raise RegistryError(f"layer_types {types} must name 'sliding_attention' or 'full_attention' for each of "
                            f"the {num_layers} layers")
    if not window or "sliding_attention" not in types:
        return {"sliding_window": None, "sliding_window_pattern": None, "full_attention_layers": ()}
    try:
        return {**_sliding_window_pattern({"layer_types": types, "sliding_window": window}),
                "full_attention_layers": ()}
    except RegistryError:  # not "every Nth layer full"
        return {"sliding_window": int(window), "sliding_window_pattern": None,
                "full_attention_layers": tuple(i for i, kind in enumerate(types) if kind == "full_attention")}


def _window_layers(types: List[str], window: Optional[int], name: str) -> Dict[str, Any]:
    """``sliding_window`` and ``full_attention_layers`` from HF ``layer_types`` (any pattern)."""
    unknown = sorted(set(types) - {"sliding_attention", "full_attention"})
    if unknown:
        raise RegistryError(f"{name} layer_types {unknown} are not supported (sliding_attention, full_attention)")
    full = tuple(i for i, kind in enumerate(types) if kind == "full_attention")
    if len(full) == len(types):
        return {"sliding_window": None, "full_attention_layers": ()}
    if not window:
        raise RegistryError(f"{name} has sliding_attention layers but no sliding_window")
    return {"sliding_window": int(window), "full_attention_layers": full}


def _layer_types(cfg: TransformerConfig) -> List[str]:
    return ["sliding_attention" if cfg.layer_window(i) is not None else "full_attention"
            for i in range(cfg.num_layers)]


def _gemma2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Gemma2: Gemma plus sandwich norms, softcaps, query_pre_attn_scalar and alternating windows
    (every second layer full when ``layer_types`` is absent, as transformers assumes)."""
    alternating = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(hf["num_hidden_layers"])]
    hf = {**hf, "layer_types": hf.get("layer_types") or alternating}
    return {**_gemma_config(hf), "post_norm": True, "attn_logit_softcapping": hf.get("attn_logit_softcapping"),
            "output_logit_softcapping": hf.get("final_logit_softcapping"),
            "query_pre_attn_scalar": float(hf.get("query_pre_attn_scalar") or int(hf["head_dim"])),
            **_sliding_window_pattern(hf)}


def _gemma2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_gemma_hf_config(cfg), "attn_logit_softcapping": cfg.attn_logit_softcapping,
            "final_logit_softcapping": cfg.output_logit_softcapping,
            "query_pre_attn_scalar": int(cfg.query_pre_attn_scalar or cfg.kv_channels),  # an int in HF's config
            "sliding_window": cfg.sliding_window, "layer_types": _layer_types(cfg)}


def _phi3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    return {**_common_config(hf), "sliding_window": hf.get("sliding_window")}


def _phi3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "phi3")
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "resid_pdrop": 0.0,
            "embd_pdrop": 0.0, "original_max_position_embeddings": cfg.max_position_embeddings}


def _stablelm_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """StableLM: LayerNorm with bias, partial rotary, optional q/k/v bias."""
    for key in ("qk_layernorm", "use_parallel_residual"):
        if hf.get(key, False):
            raise RegistryError(f"stablelm {key}=True is not supported")
    return {**_common_config(hf), "normalization": "LayerNorm", "norm_epsilon": float(hf.get("layer_norm_eps", 1e-5)),
            "add_qkv_bias": bool(hf.get("use_qkv_bias", False))}


def _stablelm_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear or cfg.normalization != "LayerNorm":
        raise RegistryError("stablelm needs --normalization LayerNorm and no --add-bias-linear")
    out = _common_hf_config(cfg)
    del out["rms_norm_eps"]
    return {**out, "layer_norm_eps": cfg.norm_epsilon, "use_qkv_bias": cfg.add_qkv_bias, "qk_layernorm": False,
            "use_parallel_residual": False, "partial_rotary_factor": cfg.rotary_percent}


def _helium_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Helium: Llama with interleaved RoPE; ``attention_bias`` is on q/k/v only."""
    if hf.get("mlp_bias", False):
        raise RegistryError("helium mlp_bias=True is not supported")
    return {**_common_config(hf), "rope_interleaved": True, "add_qkv_bias": bool(hf.get("attention_bias", False))}


def _helium_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.add_bias_linear or not cfg.rope_interleaved:
        raise RegistryError("helium needs --rope-interleaved and no --add-bias-linear")
    return {**_common_hf_config(cfg), "attention_bias": cfg.add_qkv_bias, "mlp_bias": False}


def _ministral_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Ministral: Mistral with per-layer sliding/full attention (``layer_types``)."""
    return {**_common_config(hf), **_sliding_window_pattern(hf)}


def _ministral_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "ministral")
    return {**_common_hf_config(cfg), "sliding_window": cfg.sliding_window, "layer_types": _layer_types(cfg)}


def _olmo2_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Olmo2: norms only after attention and MLP; q/k RMSNorm over all heads' channels, before RoPE."""
    if hf.get("attention_bias", False):
        raise RegistryError("olmo2 attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    return {**_common_config(hf), "norm_epsilon": float(hf.get("rms_norm_eps", 1e-5)), "qk_norm": "full_width",
            "post_norm_only": True}


def _olmo3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Olmo3: Olmo2 with sliding-window layers (every Nth full) whose RoPE may have its own base."""
    hf = {"sliding_window": 4096, **hf}
    without_rope = {k: v for k, v in hf.items() if k not in ROPE_KEYS}
    out = {**_olmo2_config(without_rope), **_sliding_window_pattern(hf)}
    rope = _gemma3_rope({"rope_theta": 10000.0, "rope_local_base_freq": hf.get("rope_theta", 10000.0), **hf})
    if out["sliding_window"] is None:
        rope["local_rotary_base"] = None
    return {**out, **rope}


def _olmo3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = {**_olmo2_hf_config(cfg), "sliding_window": cfg.sliding_window, "layer_types": _layer_types(cfg)}
    if cfg.local_rotary_base is not None:
        full = {k: v for k, v in (out.pop("rope_scaling") or {"rope_type": "default"}).items()}
        out["rope_parameters"] = {"full_attention": {**full, "rope_theta": out.pop("rope_theta")},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": cfg.local_rotary_base}}
    return out


def _olmo2_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "olmo2")
    if not (cfg.qk_norm == "full_width" and cfg.post_norm_only) or cfg.post_norm:
        raise RegistryError("olmo2 needs --qk-layernorm --qk-layernorm-full-width --post-norm-only (no --post-norm)")
    return {**_common_hf_config(cfg), "attention_bias": False}


def _granite_scales(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Granite's embedding, residual and attention multipliers and logit divisor as our scale flags."""
    return {"embedding_multiplier": float(hf.get("embedding_multiplier", 1.0)),
            "residual_multiplier": float(hf.get("residual_multiplier", 1.0)),
            "softmax_scale": float(hf.get("attention_multiplier", 1.0)),
            "output_multiplier_scale": 1.0 / float(hf.get("logits_scaling", 1.0))}


def _granite_scales_hf(cfg: TransformerConfig) -> Dict[str, Any]:
    return {"embedding_multiplier": cfg.embedding_multiplier or 1.0,
            "residual_multiplier": cfg.residual_multiplier or 1.0,
            "attention_multiplier": cfg.attention_scale or cfg.kv_channels ** -0.5,
            "logits_scaling": 1.0 / (cfg.output_multiplier_scale or 1.0)}


def _granite_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Granite: Llama with embedding, residual and attention multipliers and a logit divisor."""
    return {**_llama_config(hf), **_granite_scales(hf)}


def _granite_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_llama_hf_config(cfg), **_granite_scales_hf(cfg)}


def _smollm3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """SmolLM3: Llama with NoPE layers (``no_rope_layers[i] == 0``), tied by default."""
    if hf.get("use_sliding_window", False) and hf.get("sliding_window"):
        raise RegistryError("smollm3 use_sliding_window=True is not supported")
    layers = int(hf["num_hidden_layers"])
    interval = int(hf.get("no_rope_layer_interval", 4))
    uses_rope = hf.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    return {**_llama_config(hf), "untie_embeddings_and_output_weights": not hf.get("tie_word_embeddings", True),
            "no_rope_layers": tuple(i for i, rope in enumerate(uses_rope) if not rope)}


def _smollm3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    return {**_llama_hf_config(cfg), "use_sliding_window": False, "sliding_window": None, "layer_types": None,
            "no_rope_layers": [int(i not in cfg.no_rope_layers) for i in range(cfg.num_layers)]}


def _olmo_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Olmo: LayerNorm without weight or bias (eps 1e-5), optional q/k/v clipping."""
    if hf.get("attention_bias", False):
        raise RegistryError("olmo attention_bias=True (q/k/v/o bias without MLP bias) is not supported")
    clip = hf.get("clip_qkv")
    return {**_common_config(hf), "normalization": "LayerNorm", "norm_epsilon": 1e-5, "non_parametric_norm": True,
            "qkv_clip": float(clip) if clip is not None else None}


def _olmo_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    _reject_biases(cfg, "olmo")
    if not cfg.non_parametric_norm or cfg.normalization != "LayerNorm" or cfg.norm_epsilon != 1e-5:
        raise RegistryError("olmo needs --normalization LayerNorm --non-parametric-norm --norm-epsilon 1e-5")
    out = _common_hf_config(cfg)
    del out["rms_norm_eps"]
    return {**out, "attention_bias": False, "clip_qkv": cfg.qkv_clip}


GEMMA3_DEFAULTS = dict(hidden_activation="gelu_pytorch_tanh", head_dim=256, query_pre_attn_scalar=256,
                       sliding_window=4096, rope_theta=1_000_000.0, rope_local_base_freq=10_000.0)


def _gemma3_rope(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Global rope (scaled) from ``rope_parameters['full_attention']`` (5.x) or ``rope_theta``/``rope_scaling``
    (4.x); the local base from ``rope_parameters['sliding_attention']`` or ``rope_local_base_freq``."""
    params = hf.get("rope_parameters") or {}
    if "full_attention" in params or "sliding_attention" in params:
        full = _rope_settings({"rope_parameters": params.get("full_attention") or
                               {"rope_type": "default", "rope_theta": GEMMA3_DEFAULTS["rope_theta"]}})
        local = params.get("sliding_attention") or {}
        if local.get("rope_type", "default") != "default":
            raise RegistryError(f"gemma3_text sliding_attention rope_type {local.get('rope_type')!r} is not supported")
        return {**full, "local_rotary_base": float(local.get("rope_theta", GEMMA3_DEFAULTS["rope_local_base_freq"]))}
    flat = {"rope_theta": hf.get("rope_theta", GEMMA3_DEFAULTS["rope_theta"]), "rope_scaling": hf.get("rope_scaling")}
    return {**_rope_settings(flat),
            "local_rotary_base": float(hf.get("rope_local_base_freq", GEMMA3_DEFAULTS["rope_local_base_freq"]))}


def _gemma3_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    """Gemma3 text: Gemma2's layout (softcaps off by default), per-head q/k norms scaled by (1 + w) and a
    separate unscaled RoPE base for sliding-window layers."""
    if hf.get("use_bidirectional_attention", False):
        raise RegistryError("gemma3_text use_bidirectional_attention=True is not supported")
    hf = {**GEMMA3_DEFAULTS, **hf}
    if not hf.get("layer_types"):  # Hub configs keep the legacy int: every Nth layer full (6 by default)
        pattern = int(hf.get("sliding_window_pattern") or 6)
        hf["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                             for i in range(hf["num_hidden_layers"])]
    without_rope = {k: v for k, v in hf.items() if k not in ROPE_KEYS}  # per-layer-type rope: _gemma3_rope
    return {**_gemma2_config(without_rope), "qk_norm": "per_head", **_gemma3_rope(hf)}


def _gemma3_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    out = _gemma2_hf_config(cfg)
    if cfg.qk_norm != "per_head" or cfg.local_rotary_base is None:
        raise RegistryError("gemma3_text needs --qk-layernorm and --local-rotary-base")
    return {**out, "rope_local_base_freq": cfg.local_rotary_base, "use_bidirectional_attention": False}


def require_config(cfg: TransformerConfig, family: str, fix: str = "", **expected: Any) -> None:
    """A one-line RegistryError naming every field of ``cfg`` that differs from its value in ``expected`` (what
    the HF config of ``family`` can express), with ``fix``, the flags that set them, when given."""
    wrong = [f"{key}={getattr(cfg, key)!r} (needs {value!r})" for key, value in expected.items()
             if getattr(cfg, key) != value]
    if wrong:
        raise RegistryError(f"{family} cannot express {', '.join(wrong)}" + (f": it needs {fix}" if fix else ""))


def _reject_biases(cfg: TransformerConfig, name: str) -> None:
    if cfg.add_bias_linear or cfg.add_qkv_bias:
        raise RegistryError(f"{name} has no linear biases; the config sets add_bias_linear/add_qkv_bias")


# Fields that describe how a model is trained or laid out, not what it computes.
RUNTIME_FIELDS = frozenset({
    "tensor_model_parallel_size", "sequence_parallel", "noop_layers", "recompute_granularity", "recompute_method",
    "recompute_num_layers", "recompute_activation_function", "attention_dropout", "hidden_dropout", "params_dtype",
    "make_vocab_size_divisible_by", "init_method_std", "swap_attention", "swap_modules"})
BIAS_FIELDS = ("add_bias_linear", "add_qkv_bias", "add_dense_bias", "add_mlp_bias")


def _bias_places(values: Dict[str, Any]) -> Dict[str, bool]:
    """Where the linears have biases, whichever flags say so."""
    every = bool(values.get("add_bias_linear", True))
    return {"qkv": every or bool(values.get("add_qkv_bias")), "dense": every or bool(values.get("add_dense_bias")),
            "mlp": every or bool(values.get("add_mlp_bias"))}


def _architecture(values: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of a config (dict) that change the model's math; biases as places, and the linear layers'
    marks as one per layer, however ``--linear-attention-freq`` spells them (``4``, ``[1,1,1,0]``, ``[1, 1, 1, 0]``)."""
    arch = {k: v for k, v in values.items() if k not in RUNTIME_FIELDS and k not in BIAS_FIELDS}
    arch["bias_places"] = _bias_places(values)
    if values.get("linear_attention_freq") is not None:
        arch["linear_attention_freq"] = parse_layer_frequency(values["linear_attention_freq"], values["num_layers"],
                                                              "--linear-attention-freq")
    return arch


def _checked(name: str, to_config: Callable[[Dict[str, Any]], Dict[str, Any]],
             hf_config: Callable[[TransformerConfig], Dict[str, Any]]) -> Callable[[TransformerConfig], Dict[str, Any]]:
    """``hf_config`` refusing (one line, naming the fields) a model the written config would not reproduce."""

    def convert(cfg: TransformerConfig) -> Dict[str, Any]:
        out = hf_config(cfg)
        rebuilt = TransformerConfig.from_dict({**cfg.to_dict(), **to_config(out)}).to_dict()
        ours, theirs = _architecture(cfg.to_dict()), _architecture(rebuilt)
        differ = sorted(k for k in ours if ours[k] != theirs[k])
        if differ:
            raise RegistryError(f"{name} cannot express this model's {', '.join(f'{k}={ours[k]!r}' for k in differ)} "
                                f"(the family has {', '.join(f'{k}={theirs[k]!r}' for k in differ)})")
        return out

    return convert


# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class Family:
    """One HF architecture family: config maps both ways and the weight map."""

    name: str
    model_type: str
    architecture: str
    to_config_fn: Callable[[Dict[str, Any]], Dict[str, Any]]
    to_hf_config_fn: Callable[[TransformerConfig], Dict[str, Any]]
    weights: Tuple[WeightRule, ...] = LLAMA_WEIGHTS
    preserved_keys: Tuple[str, ...] = ()  # HF keys our config does not model, kept for the inverse
    # HF key that switches sliding-window attention on ("" when ``sliding_window`` alone does)
    sliding_window_switch: str = ""
    # the weight map of a config, when HF names a tensor by the variant (Falcon's norms); else ``weights``
    weights_for: Optional[Callable[[TransformerConfig], Tuple[WeightRule, ...]]] = None
    # (regex, replacement): another spelling of a tensor name that checkpoints of the family also use, read as the
    # name the weight map gives (Kimi Linear's dense MLPs, which transformers saves under block_sparse_moe)
    hf_tensor_aliases: Tuple[Tuple[str, str], ...] = ()
    # prefixes of the HF tensors transformers does not load either (its _keys_to_ignore_on_load_unexpected: the
    # MTP layer of Qwen3-Next and Qwen3.5): the converter leaves them out with a note
    unloaded_hf_prefixes: Tuple[str, ...] = ()
    # the same prefixes where config.json places them (Bailing's MTP layers: model.layers.{num_hidden_layers + j}.)
    unloaded_hf_prefixes_for: Optional[Callable[[Dict[str, Any]], Tuple[str, ...]]] = None
    # HF tensors (name -> tensor) as transformers' save_pretrained writes them, given config.json -> as the published
    # checkpoints and the converter lay them out, where the two differ (OLMo-Hybrid's q/k/v convs: transformers
    # saves even chunks of the fused conv); idempotent, for the round-trip checks
    published_layout: Optional[Callable[[Dict[str, torch.Tensor], Dict[str, Any]], Dict[str, torch.Tensor]]] = None
    # groups of HF keys that spell one of our fields in more than one way (xLSTM's MLP width: a factor rounded up to
    # a multiple); an export keeps the original's values of a group where they give the same config as ours
    equivalent_keys: Tuple[Tuple[str, ...], ...] = ()

    def rules(self, cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
        """The weight map of the model built from ``cfg`` (a reward model's score head included)."""
        rules = self.weights_for(cfg) if self.weights_for is not None else self.weights
        return tuple(rules) + (VALUE_HEAD_RULE,) if cfg.value_head else rules

    def unloaded_prefixes(self, hf_config: Dict[str, Any]) -> Tuple[str, ...]:
        """The prefixes of the checkpoint's tensors transformers does not load (``unloaded_hf_prefixes``, and those
        ``unloaded_hf_prefixes_for`` finds in ``hf_config``)."""
        placed = self.unloaded_hf_prefixes_for(hf_config) if self.unloaded_hf_prefixes_for is not None else ()
        return self.unloaded_hf_prefixes + tuple(placed)

    def canonical_hf_name(self, name: str) -> str:
        """The weight map's name of the checkpoint's tensor ``name`` (itself unless an alias spells it)."""
        for pattern, replacement in self.hf_tensor_aliases:
            name = re.sub(pattern, replacement, name)
        return name

    def to_config(self, hf: Dict[str, Any]) -> Dict[str, Any]:
        """:class:`TransformerConfig` kwargs from an HF ``config.json`` dict; a quantised checkpoint is refused."""
        try:
            kwargs = self.to_config_fn(hf)
        except KeyError as missing:
            raise RegistryError(f"config.json lacks {missing} needed by family {self.name!r}") from None
        refuse_quantized(hf, self.name)
        return kwargs

    def to_hf_config(self, cfg: TransformerConfig, original: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """An HF ``config.json`` dict equivalent to ``cfg``.

        Keys of ``original`` that our config does not model (token ids,
        ``preserved_keys``) are kept; the
        architecture fields always come from ``cfg``.
        """
        base = {k: v for k, v in (original or {}).items() if k not in ROPE_KEYS + DTYPE_KEYS + QUANTIZATION_KEYS}
        base.update(self.to_hf_config_fn(cfg))
        for key in self.preserved_keys:
            if original and key in original:
                base[key] = original[key]
        # the groups are judged for the model exported: one whose MTP layers were dropped (transformers' saves keep
        # num_nextn_predict_layers) without them, or a field only they read would tell the spellings apart
        judged = {"num_nextn_predict_layers": cfg.mtp_num_layers or 0} if "num_nextn_predict_layers" in base else {}
        for group in self.equivalent_keys:
            if original and all(key in original for key in group):
                spelled = {**base, **{key: original[key] for key in group}}
                if self.to_config({**spelled, **judged}) == self.to_config({**base, **judged}):
                    base = spelled
        base["model_type"], base["architectures"] = self.model_type, [self.architecture]
        if cfg.value_head:  # a reward model: HF's sequence classifier with one label (the score)
            base["architectures"] = [self.architecture.replace("ForCausalLM", "ForSequenceClassification")]
            base["id2label"], base["label2id"] = {"0": "LABEL_0"}, {"LABEL_0": 0}
        return dict(sorted(base.items()))


def _checked_family(name: str, model_type: str, architecture: str,
                    to_config: Callable[[Dict[str, Any]], Dict[str, Any]],
                    to_hf: Callable[[TransformerConfig], Dict[str, Any]], weights: Tuple[WeightRule, ...]) -> Family:
    """A family whose exports are checked: ``to_hf`` refuses a model that mapping its result back would not
    rebuild (:func:`_checked`)."""
    return Family(name, model_type, architecture, to_config, _checked(name, to_config, to_hf), weights)


_LLAMA = Family("llama2", "llama", "LlamaForCausalLM", _llama_config, _llama_hf_config)
_MISTRAL = Family("mistral", "mistral", "MistralForCausalLM", _mistral_config, _mistral_hf_config)
_QWEN2 = Family("qwen2", "qwen2", "Qwen2ForCausalLM", _qwen2_config, _qwen2_hf_config)
_QWEN3 = Family("qwen3", "qwen3", "Qwen3ForCausalLM", _qwen3_config, _qwen3_hf_config)
_GEMMA = Family("gemma", "gemma", "GemmaForCausalLM", _gemma_config, _gemma_hf_config)
_GEMMA2 = Family("gemma2", "gemma2", "Gemma2ForCausalLM", _gemma2_config, _gemma2_hf_config, GEMMA2_WEIGHTS)
_PHI3 = Family("phi3", "phi3", "Phi3ForCausalLM", _phi3_config, _phi3_hf_config, PHI3_WEIGHTS)
_HELIUM = Family("helium", "helium", "HeliumForCausalLM", _helium_config, _helium_hf_config)
_MINISTRAL = Family("ministral", "ministral", "MinistralForCausalLM", _ministral_config, _ministral_hf_config)
_OLMO2 = Family("olmo2", "olmo2", "Olmo2ForCausalLM", _olmo2_config, _olmo2_hf_config, OLMO2_WEIGHTS)
_OLMO3 = Family("olmo3", "olmo3", "Olmo3ForCausalLM", _olmo3_config, _olmo3_hf_config, OLMO2_WEIGHTS)
_GRANITE = Family("granite", "granite", "GraniteForCausalLM", _granite_config, _granite_hf_config)
_SMOLLM3 = Family("smollm3", "smollm3", "SmolLM3ForCausalLM", _smollm3_config, _smollm3_hf_config)
_OLMO = Family("olmo", "olmo", "OlmoForCausalLM", _olmo_config, _olmo_hf_config)
_GEMMA3 = Family("gemma3", "gemma3_text", "Gemma3ForCausalLM", _gemma3_config, _gemma3_hf_config, GEMMA2_WEIGHTS)
_STABLELM = Family("stablelm", "stablelm", "StableLmForCausalLM", _stablelm_config, _stablelm_hf_config)

FAMILIES: Dict[str, Family] = {"llama2": _LLAMA, "llama": _LLAMA, "llama3": _LLAMA,
                               "mistral": _MISTRAL, "qwen2": _QWEN2, "qwen3": _QWEN3, "gemma": _GEMMA,
                               "gemma2": _GEMMA2, "phi3": _PHI3, "phi3.5": _PHI3, "stablelm": _STABLELM,
                               "helium": _HELIUM, "ministral": _MINISTRAL, "olmo2": _OLMO2,
                               "granite": _GRANITE, "smollm3": _SMOLLM3,
                               "olmo": _OLMO, "gemma3": _GEMMA3,
                               "olmo3": _OLMO3}


# MindSpeed-LLM ``--model-type-hf`` names that are neither a family's name nor its HF ``model_type``.
ALIASES: Dict[str, str] = {"qwen": "qwen2", "qwen25": "qwen2", "llama3": "llama2", "magistral": "mistral",
                           "bloom_3b": "bloom"}


# HF families the one decoder cannot express: name or model_type -> why (get_family and
# family_for_hf_config raise it as a one-line RegistryError instead of "unknown")
REFUSED: Dict[str, str] = {}


def refuse(name: str, reason: str, *aliases: str) -> None:
    """Record family ``name`` (and ``aliases``) as refused for ``reason``."""
    for key in (name,) + aliases:
        REFUSED[key] = f"{name} is not supported: {reason}"


def register(family: Family, *aliases: str) -> Family:
    """Add ``family`` under its name, plus ``aliases`` (MindSpeed's ``--model-type-hf`` spellings).

    The modules of ``mindspeed_llm/models/families/`` call this at import; the
    registry imports every such module (:func:`_load_family_modules`), so a new
    module of families needs no edit here.
    """
    if family.name in FAMILIES and FAMILIES[family.name] is not family:
        raise RegistryError(f"family {family.name!r} is registered twice")
    FAMILIES[family.name] = family
    for alias in aliases:
        ALIASES[alias] = family.name
    return family


def _load_family_modules() -> None:
    """Import every module of ``mindspeed_llm/models/families/`` (each registers its families)."""
    import importlib
    import pkgutil

    package = __name__.rsplit(".", 1)[0] + ".families"
    folder = os.path.join(os.path.dirname(__file__), "families")
    for module in sorted(m.name for m in pkgutil.iter_modules([folder])):
        importlib.import_module(f"{package}.{module}")


def _names() -> Dict[str, Family]:
    """Every accepted ``--model-type-hf`` value: ``FAMILIES`` keys, each family's name and HF
    ``model_type``, and ``ALIASES`` (so a family added to ``FAMILIES`` resolves by both names)."""
    names: Dict[str, Family] = {}
    for family in FAMILIES.values():
        names.setdefault(family.model_type, family)
    for key, family in FAMILIES.items():
        names[family.name] = family
        names[key] = family
    for alias, target in ALIASES.items():
        if target in names:
            names.setdefault(alias, names[target])
    return names


def known_families() -> List[str]:
    """The accepted ``--model-type-hf`` values, sorted."""
    return sorted(_names())


def supported_model_types() -> List[str]:
    """The HF ``config.json`` ``model_type`` values the registry converts, sorted."""
    return sorted({family.model_type for family in FAMILIES.values()})


def get_family(name: str) -> Family:
    """The family of a ``--model-type-hf`` value (MindSpeed name or HF ``model_type``); a one-line error
    lists the known ones."""
    family = _names().get(name)
    if family is None and name in REFUSED:
        raise RegistryError(REFUSED[name])
    if family is None:
        raise RegistryError(f"--model-type-hf {name!r} is unknown; known: {', '.join(known_families())}")
    return family


# the quant_method values whose checkpoints the converter dequantises on import (mindspeed_llm/convert/quantized.py)
DEQUANTIZED_METHODS = ("fp8", "mxfp4")
DEFAULT_FP8_BLOCK = (128, 128)


def quantization_method(hf: Dict[str, Any]) -> Optional[str]:
    """``quantization_config``'s ``quant_method`` (None: the checkpoint holds plain weights)."""
    quantization = hf.get("quantization_config")
    if not quantization:
        return None
    return quantization.get("quant_method") if isinstance(quantization, dict) else str(quantization)


def fp8_block(hf: Dict[str, Any]) -> Tuple[int, ...]:
    """``weight_block_size`` of an FP8 checkpoint: (rows, columns) per scale."""
    return tuple(hf["quantization_config"].get("weight_block_size") or DEFAULT_FP8_BLOCK)


def refuse_quantized(hf: Dict[str, Any], family: str) -> None:
    """A ``quantization_config`` whose tensors the converter cannot turn back into weights: DeepSeek's and GLM-5's
    block FP8 (E4M3 with 2-D blocks) and gpt-oss's MXFP4 experts are dequantised on import, any other is refused."""
    method = quantization_method(hf)
    if method is None:
        return
    quantization = hf["quantization_config"]
    if method == "mxfp4" or (method == "fp8" and quantization.get("fmt", "e4m3") == "e4m3"
                             and len(fp8_block(hf)) == 2):
        return
    raise RegistryError(f"{family} config.json has a quantization_config (quant_method {method!r}) the converter "
                        "does not dequantise (it reads 'fp8' with fmt e4m3 and 2-D weight_block_size, and 'mxfp4'); "
                        "convert a bf16 copy (transformers: load with dequantize=True, then save_pretrained)")


def family_for_hf_config(hf: Dict[str, Any], where: str = "config.json") -> Family:
    """The family of an HF ``config.json`` dict, from its ``model_type``; a one-line error lists the
    supported model types."""
    model_type = hf.get("model_type")
    for family in FAMILIES.values():
        if family.model_type == model_type:
            return family
    if model_type in REFUSED:
        raise RegistryError(f"{where}: {REFUSED[model_type]}")
    raise RegistryError(f"{where}: model_type {model_type!r} is not supported; supported model types: "
                        f"{', '.join(supported_model_types())} (or pass --model-type-hf)")


def config_from_hf(hf: Dict[str, Any], name: str, **overrides: Any) -> TransformerConfig:
    """Our :class:`TransformerConfig` for an HF ``config.json`` dict of family ``name``."""
    kwargs = get_family(name).to_config(hf)
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


_load_family_modules()

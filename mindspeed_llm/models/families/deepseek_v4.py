"""DeepSeek-V4 (``deepseek_v4``; MindSpeed-style name ``deepseek4``): every piece is a config field.

* Attention (``core/transformer/compressed_attention.py``): ``layer_types`` -> ``--compressed-attention-pattern``
  (``sliding_attention`` S, ``compressed_sparse_attention`` C, ``heavily_compressed_attention`` H),
  ``compress_rates`` -> ``--csa-compress-ratio`` / ``--hca-compress-ratio``, one KV head of ``head_dim``
  (``--kv-channels``, ``--num-query-groups 1``), ``q_lora_rank``, ``sliding_window``, the grouped output
  projection (``o_groups``, ``o_lora_rank`` -> ``--o-groups``, ``--o-lora-rank``), the CSA indexer
  (``index_n_heads``, ``index_head_dim``, ``index_topk`` -> ``--dsa-indexer-*``). RoPE is interleaved on the
  trailing ``partial_rotary_factor`` of each head (``--rotary-percent``): the ``main`` rope parameters (sliding
  layers) are ``--local-rotary-base``, the ``compress`` ones (CSA/HCA layers and their entries) ``--rotary-base``
  with their YaRN, whose attention factor transformers fixes at 1 (``--rope-scaling-mscale`` = ``-all-dim``).
* Hyper-connections (``core/transformer/hyper_connection.py``): ``hc_mult``, ``hc_sinkhorn_iters``, ``hc_eps`` ->
  ``--enable-mhc-connections --mhc-num-residual-streams/--mhc-sinkhorn-iterations/--mhc-eps``.
* MoE in every layer: ``scoring_func`` (sqrtsoftplus or sigmoid) -> ``--moe-router-score-function``, the
  ``e_score_correction_bias`` buffer (``--moe-router-enable-expert-bias``), the weights always renormalised
  (``--norm-topk-prob``) and times ``routed_scaling_factor``; the leading ``hash_moe`` layers of
  ``mlp_layer_types`` route by the ``tid2eid`` table (``--moe-hash-layers``); ``swiglu_limit`` clamps the experts'
  and the shared expert's gate and up (``--activation-func-clamp-value``). Experts are saved fused
  (``gate_up_proj`` [E, 2f, h], ``down_proj`` [E, h, f]), as our stacked layout.

* MTP (``num_nextn_predict_layers`` -> ``--mtp-num-layers``): transformers does not build it; the converter carries
  DeepSeek's ``mtp.{k}.*`` tensors both ways (:func:`_mtp_weights`): ``enorm``, ``hnorm``, ``e_proj`` and
  ``h_proj`` (the columns of our ``eh_proj``), ``norm`` (our ``final_layernorm``), ``hc_head_{fn,base,scale}`` and
  the layer's tensors under the decoder layers' names. A checkpoint without them (transformers drops them when it
  saves) converts without MTP. The published checkpoints are FP8/FP4 (``quantization_config``): the
converter dequantises them on import (mindspeed_llm/convert/quantized.py).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from core.transformer.config import CSA_LETTER, HCA_LETTER, SLIDING_LETTER, TransformerConfig
from mindspeed_llm.models.registry import (Family, RegistryError, WeightRule, _common_config,
                                           _common_hf_config, _layer, _rope_settings, mtp_config, mtp_hf_config,
                                           register, require_config)

FAMILY = "deepseek_v4"
LAYER_TYPE_LETTERS = {"sliding_attention": SLIDING_LETTER, "compressed_sparse_attention": CSA_LETTER,
                      "heavily_compressed_attention": HCA_LETTER}
LEGACY_RATIO_TYPES = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
SCORE_FUNCTIONS = ("sqrtsoftplus", "sigmoid")
# transformers' defaults of the keys read below (a config.json may omit them)
_DEFAULTS: Dict[str, Any] = dict(
    num_key_value_heads=1, head_dim=512, q_lora_rank=1024, num_experts_per_tok=6, n_routed_experts=256,
    n_shared_experts=1, scoring_func="sqrtsoftplus", routed_scaling_factor=1.5, moe_intermediate_size=2048,
    rope_theta=10000.0, compress_rope_theta=160000.0, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6,
    swiglu_limit=10.0, sliding_window=128, o_groups=8, o_lora_rank=1024, index_n_heads=64, index_head_dim=128,
    index_topk=512, router_aux_loss_coef=0.001, tie_word_embeddings=False, rms_norm_eps=1e-6,
    partial_rotary_factor=64 / 512)
_DEFAULT_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
# keys our config does not model, kept for the inverse
_PRESERVED = ("output_router_logits", "router_jitter_noise", "bos_token_id", "eos_token_id", "pad_token_id")


# --------------------------------------------------------------------------- HF -> ours


def _layer_types(hf: Dict[str, Any], layers: int) -> List[str]:
    """``layer_types`` as transformers derives it: given, or from the legacy ``compress_ratios``, or V4-Pro's
    default (two HCA layers, then CSA and HCA alternating)."""
    if hf.get("layer_types"):
        return list(hf["layer_types"])[:layers]
    if hf.get("compress_ratios"):
        return [LEGACY_RATIO_TYPES[int(r)] for r in hf["compress_ratios"]][:layers]
    rest = ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(max(layers - 2, 0))]
    return (["heavily_compressed_attention"] * min(layers, 2) + rest)[:layers]


def _hash_layers(hf: Dict[str, Any], layers: int) -> int:
    """The leading ``hash_moe`` layers of ``mlp_layer_types`` (default: ``num_hash_layers``, else 3)."""
    types = hf.get("mlp_layer_types")
    if not types:
        hashed = min(int(hf.get("num_hash_layers", 3)), layers)
        return hashed
    types = list(types)[:layers]
    hashed = next((i for i, kind in enumerate(types) if kind != "hash_moe"), len(types))
    if types != ["hash_moe"] * hashed + ["moe"] * (len(types) - hashed):
        raise RegistryError(f"{FAMILY} mlp_layer_types={types} is not supported: only a leading run of hash_moe "
                            "layers then moe ones (--moe-hash-layers)")
    return hashed


def _rope_config(hf: Dict[str, Any], pattern: str) -> Dict[str, Any]:
    """``main`` -> the sliding layers' --local-rotary-base; ``compress`` -> --rotary-base with its scaling. A flat
    config (DeepSeek's release: ``rope_theta``, ``compress_rope_theta``, ``rope_scaling`` and ``qk_rope_head_dim``)
    means the same: its scaling is the compressed layers'."""
    params = hf.get("rope_parameters") or {}
    partial = hf.get("partial_rotary_factor")
    if partial is None:
        partial = int(hf["qk_rope_head_dim"]) / int(hf["head_dim"]) if hf.get("qk_rope_head_dim") else \
            _DEFAULTS["partial_rotary_factor"]
    main = params.get("main") or {"rope_theta": hf["rope_theta"]}
    compress = params.get("compress")
    if compress is None:  # a flat config: its rope parameters are the compressed layers'
        flat = {**(hf.get("rope_scaling") or {}), **params}
        compress = {**{k: v for k, v in flat.items() if k not in ("main", "compress", "rope_theta")},
                    "rope_theta": hf["compress_rope_theta"]}
    if main.get("rope_type", main.get("type", "default")) != "default":
        raise RegistryError(f"{FAMILY} main rope_type={main.get('rope_type', main.get('type'))!r} is not supported "
                            "(the sliding layers' RoPE is plain)")
    compress = {k: v for k, v in compress.items() if k != "partial_rotary_factor"}
    factor = compress.pop("attention_factor", None)
    yarn = compress.get("rope_type", compress.get("type")) == "yarn"
    if factor is not None and (not yarn or float(factor) != 1.0):
        raise RegistryError(f"{FAMILY} compress rope attention_factor={factor!r} is not supported (1.0 with yarn)")
    kwargs = _rope_settings({"max_position_embeddings": hf["max_position_embeddings"], "rope_parameters": compress})
    if yarn:  # transformers' V4 applies no YaRN attention factor: mscale / mscale_all_dim = 1
        kwargs.update(rope_scaling_mscale=1.0, rope_scaling_mscale_all_dim=1.0)
    sliding = SLIDING_LETTER in pattern or mtp_config(hf)  # the 'S' layers, and the MTP layers (sliding too)
    local = {"local_rotary_base": float(main["rope_theta"])} if sliding else {}
    return {**kwargs, "rotary_percent": float(partial), **local}


def _moe_config(hf: Dict[str, Any], layers: int) -> Dict[str, Any]:
    score = hf["scoring_func"]
    if score not in SCORE_FUNCTIONS:
        raise RegistryError(f"{FAMILY} scoring_func={score!r} is not supported ({', '.join(SCORE_FUNCTIONS)})")
    if float(hf.get("router_jitter_noise") or 0.0):
        raise RegistryError(f"{FAMILY} router_jitter_noise={hf['router_jitter_noise']} is not supported; set it to 0")
    moe_ffn, shared = int(hf["moe_intermediate_size"]), int(hf.get("n_shared_experts") or 0)
    scaling = float(hf["routed_scaling_factor"])
    hashed = _hash_layers(hf, layers)
    limit = hf.get("swiglu_limit")
    return dict(num_experts=int(hf["n_routed_experts"]), moe_router_topk=int(hf["num_experts_per_tok"]),
                moe_ffn_hidden_size=moe_ffn, ffn_hidden_size=moe_ffn,
                moe_shared_expert_intermediate_size=shared * moe_ffn if shared else None,
                moe_router_score_function=score, moe_router_enable_expert_bias=True, norm_topk_prob=True,
                moe_router_topk_scaling_factor=scaling if scaling != 1.0 else None,
                moe_aux_loss_coeff=float(hf.get("router_aux_loss_coef") or 0.0),
                activation_func_clamp_value=float(limit) if limit else None,
                **({"moe_hash_layers": hashed} if hashed else {}))


def _deepseek_v4_config(hf: Dict[str, Any]) -> Dict[str, Any]:
    hf = {**_DEFAULTS, **hf}
    layers = int(hf["num_hidden_layers"])
    if int(hf["num_key_value_heads"]) != 1:
        raise RegistryError(f"{FAMILY} num_key_value_heads={hf['num_key_value_heads']}: its attention shares one "
                            "key/value head")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise RegistryError(f"{FAMILY} attention_bias / mlp_bias are not supported")
    if hf.get("hidden_act", "silu") != "silu":
        raise RegistryError(f"{FAMILY} hidden_act={hf['hidden_act']!r} is not supported (silu)")
    types = _layer_types(hf, layers)
    unknown = sorted(set(types) - set(LAYER_TYPE_LETTERS))
    if unknown or len(types) != layers:
        raise RegistryError(f"{FAMILY} layer_types needs one of {sorted(LAYER_TYPE_LETTERS)} per layer; got {types}")
    rates = {**_DEFAULT_RATES, **(hf.get("compress_rates") or {})}
    common = _common_config({**hf, "intermediate_size": hf["moe_intermediate_size"], "rope_parameters": None,
                             "rope_scaling": None, "partial_rotary_factor": None})
    pattern = "".join(LAYER_TYPE_LETTERS[t] for t in types)
    indexer = {"dsa_indexer_n_heads": int(hf["index_n_heads"]), "dsa_indexer_head_dim": int(hf["index_head_dim"]),
               "dsa_indexer_topk": int(hf["index_topk"])} if CSA_LETTER in pattern else {}
    for key in ("rotary_base", "rotary_percent", "rope_scaling_type"):
        common.pop(key, None)
    return {**common, **_rope_config(hf, pattern), **_moe_config(hf, layers),
            "num_query_groups": 1, "kv_channels": int(hf["head_dim"]), "q_lora_rank": int(hf["q_lora_rank"]),
            "rope_interleaved": True, "sliding_window": int(hf["sliding_window"]),
            "compressed_attention_pattern": pattern, **indexer,
            **_compress_ratios(pattern, rates),
            "o_groups": int(hf["o_groups"]), "o_lora_rank": int(hf["o_lora_rank"]), "enable_mhc_connections": True,
            "mhc_num_residual_streams": int(hf["hc_mult"]), "mhc_sinkhorn_iterations": int(hf["hc_sinkhorn_iters"]),
            "mhc_eps": float(hf["hc_eps"]), "attention_dropout": float(hf.get("attention_dropout") or 0.0),
            **mtp_config(hf)}


def _compress_ratios(pattern: str, rates: Dict[str, Any]) -> Dict[str, int]:
    """``compress_rates`` of the layer kinds the pattern has (an absent kind's rate sizes nothing)."""
    fields = (("csa_compress_ratio", CSA_LETTER, "compressed_sparse_attention"),
              ("hca_compress_ratio", HCA_LETTER, "heavily_compressed_attention"))
    return {name: int(rates[kind]) for name, letter, kind in fields if letter in pattern}


# --------------------------------------------------------------------------- ours -> HF


def _rope_hf(cfg: TransformerConfig, out: Dict[str, Any]) -> Dict[str, Any]:
    """The ``main`` / ``compress`` rope parameters from ours (see :func:`_rope_config`)."""
    scaling = out.pop("rope_scaling") or {"rope_type": "default"}
    compress_theta = out.pop("rope_theta")
    out.pop("partial_rotary_factor", None)
    if scaling["rope_type"] == "yarn":
        if (cfg.rope_scaling_mscale, cfg.rope_scaling_mscale_all_dim) != (1.0, 1.0):
            raise RegistryError(f"{FAMILY} applies no YaRN attention factor: set --rope-scaling-mscale 1 and "
                                "--rope-scaling-mscale-all-dim 1")
        scaling = {k: v for k, v in scaling.items() if k not in ("mscale", "mscale_all_dim")}
        scaling["attention_factor"] = 1.0
    elif scaling["rope_type"] != "default":
        raise RegistryError(f"{FAMILY} scales the compressed layers' RoPE with yarn only")
    main_theta = cfg.local_rotary_base if cfg.local_rotary_base is not None else compress_theta
    partial = cfg.rotary_percent
    return {"rope_theta": main_theta, "compress_rope_theta": compress_theta, "partial_rotary_factor": partial,
            "rope_parameters": {
                "main": {"rope_type": "default", "rope_theta": main_theta, "partial_rotary_factor": partial},
                "compress": {**scaling, "rope_theta": compress_theta, "partial_rotary_factor": partial}}}


def _deepseek_v4_hf_config(cfg: TransformerConfig) -> Dict[str, Any]:
    if cfg.compressed_attention_pattern is None or not cfg.enable_mhc_connections or cfg.num_experts is None:
        raise RegistryError(f"{FAMILY} needs --compressed-attention-pattern, --enable-mhc-connections and "
                            "--num-experts")
    require_config(cfg, FAMILY, "--moe-router-enable-expert-bias with --norm-topk-prob, --rope-interleaved, and "
                   "MoE in every layer", moe_router_enable_expert_bias=True, norm_topk_prob=True,
                   rope_interleaved=True, moe_layer_freq=1, first_k_dense_replace=0, moe_router_num_groups=None,
                   moe_expert_capacity_factor=None, shared_expert_gate=False, moe_router_pre_softmax=False)
    if cfg.moe_router_score_function not in SCORE_FUNCTIONS:
        raise RegistryError(f"{FAMILY} scores experts with {' or '.join(SCORE_FUNCTIONS)}, not "
                            f"{cfg.moe_router_score_function}")
    moe_ffn, shared = cfg.moe_expert_ffn_hidden_size, cfg.moe_shared_expert_intermediate_size or 0
    if shared % moe_ffn:
        raise RegistryError(f"{FAMILY} sizes the shared expert as n_shared_experts x moe_intermediate_size; "
                            f"{shared} is not a multiple of {moe_ffn}")
    out = _common_hf_config(cfg)
    out.pop("intermediate_size")
    letters = {letter: kind for kind, letter in LAYER_TYPE_LETTERS.items()}
    rope = _rope_hf(cfg, out)  # takes the flat rope keys out of ``out``
    return {**out, **rope, "q_lora_rank": cfg.q_lora_rank, "sliding_window": cfg.sliding_window,
            "layer_types": [letters[c] for c in cfg.compressed_attention_pattern],
            "compress_rates": {"compressed_sparse_attention": cfg.csa_compress_ratio,
                               "heavily_compressed_attention": cfg.hca_compress_ratio},
            "o_groups": cfg.o_groups, "o_lora_rank": cfg.o_lora_rank,
            "index_n_heads": cfg.dsa_indexer_n_heads or _DEFAULTS["index_n_heads"],
            "index_head_dim": cfg.dsa_indexer_head_dim or _DEFAULTS["index_head_dim"],
            "index_topk": cfg.dsa_indexer_topk or _DEFAULTS["index_topk"], "hc_mult": cfg.mhc_num_residual_streams,
            "hc_sinkhorn_iters": cfg.mhc_sinkhorn_iterations, "hc_eps": cfg.mhc_eps,
            "n_routed_experts": cfg.num_experts, "num_experts_per_tok": cfg.moe_router_topk,
            "moe_intermediate_size": moe_ffn, "n_shared_experts": shared // moe_ffn,
            "scoring_func": cfg.moe_router_score_function, "norm_topk_prob": True,
            "routed_scaling_factor": cfg.moe_router_topk_scaling_factor or 1.0,
            "mlp_layer_types": ["hash_moe" if cfg.is_hash_routed(i) else "moe" for i in range(cfg.num_layers)],
            "swiglu_limit": cfg.activation_func_clamp_value, "router_aux_loss_coef": cfg.moe_aux_loss_coeff,
            "attention_bias": False, "mlp_bias": False, **mtp_hf_config(cfg)}


# --------------------------------------------------------------------------- weights
# Checkpoints keep DeepSeek's own tensor names (transformers renames them on load and back on save): ``attn.wq_a``,
# ``attn.wkv``, ``attn.wo_a``/``wo_b``, ``attn.attn_sink``, ``attn.compressor.{wkv, wgate, ape, norm}``, the
# indexer's ``attn.indexer.{compressor.*, wq_b, weights_proj}``, ``hc_attn_*``/``hc_ffn_*``, ``ffn.gate.{weight,
# bias, tid2eid}``, the experts one tensor each (``w1`` gate, ``w3`` up, ``w2`` down) and ``head.weight``. Under
# ``model.`` as transformers saves them; DeepSeek's release drops the prefix (``embed.weight``, ``layers.N.``,
# ``hc_head_fn``): read as aliases.


def _attention_rule(ours: str, hf: str) -> WeightRule:
    return _layer(f"self_attention.{ours}", [f"attn.{hf}"])


_COMPRESSOR_NAMES = (("linear_kv.weight", "wkv.weight"), ("linear_gate.weight", "wgate.weight"),
                     ("position_bias", "ape"), ("kv_layernorm.weight", "norm.weight"))
_ATTENTION_WEIGHTS: Tuple[WeightRule, ...] = tuple(_attention_rule(ours, hf) for ours, hf in (
    ("linear_q_down_proj.weight", "wq_a.weight"), ("q_layernorm.weight", "q_norm.weight"),
    ("linear_q_up_proj.weight", "wq_b.weight"), ("linear_kv_proj.weight", "wkv.weight"),
    ("kv_layernorm.weight", "norm.weight"), ("o_group_proj", "wo_a.weight"), ("linear_proj.weight", "wo_b.weight"),
    ("sinks", "attn_sink"),
    *((f"compressor.{ours}", f"compressor.{hf}") for ours, hf in _COMPRESSOR_NAMES),
    *((f"indexer.compressor.{ours}", f"indexer.compressor.{hf}") for ours, hf in _COMPRESSOR_NAMES),
    ("indexer.linear_q_up_proj.weight", "indexer.wq_b.weight"),
    ("indexer.linear_weights_proj.weight", "indexer.weights_proj.weight")))
_GLOBAL_WEIGHTS: Tuple[WeightRule, ...] = (
    WeightRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    WeightRule("decoder.final_layernorm.weight", ("model.norm.weight",)),
    WeightRule("output_layer.weight", ("head.weight",), "vocab"),
    *(WeightRule(f"decoder.hc_head.{name}", (f"model.hc_head.hc_{name}",)) for name in ("fn", "base", "scale")))
_LAYER_WEIGHTS: Tuple[WeightRule, ...] = (
    _layer("input_layernorm.weight", ["attn_norm.weight"]),
    _layer("pre_mlp_layernorm.weight", ["ffn_norm.weight"]),
    *(_layer(f"{ours}.{name}", [f"{hf}_{name}"]) for ours, hf in (("attn_hc", "hc_attn"), ("mlp_hc", "hc_ffn"))
      for name in ("fn", "base", "scale")),
    _layer("mlp.router.weight", ["ffn.gate.weight"]),
    _layer("mlp.router.expert_bias", ["ffn.gate.bias"]),
    _layer("mlp.router.tid2eid", ["ffn.gate.tid2eid"]),
    _layer("mlp.shared_experts.linear_fc1.weight", ["ffn.shared_experts.w1.weight", "ffn.shared_experts.w3.weight"],
           "fuse_rows"),
    _layer("mlp.shared_experts.linear_fc2.weight", ["ffn.shared_experts.w2.weight"]))
TENSOR_ALIASES = ((r"^embed\.weight$", "model.embed_tokens.weight"), (r"^norm\.weight$", "model.norm.weight"),
                  (r"^hc_head_(fn|base|scale)$", r"model.hc_head.hc_\1"), (r"^layers\.", "model.layers."),
                  (r"^model\.mtp\.", "mtp."))


def _weights(cfg: TransformerConfig) -> Tuple[WeightRule, ...]:
    experts = range(cfg.num_experts)
    gated = [f"ffn.experts.{e}.{name}.weight" for e in experts for name in ("w1", "w3")]
    rules = _GLOBAL_WEIGHTS + _LAYER_WEIGHTS + _ATTENTION_WEIGHTS + (
        _layer("mlp.experts.linear_fc1.weight", gated, "stack_experts_gated"),
        _layer("mlp.experts.linear_fc2.weight", [f"ffn.experts.{e}.w2.weight" for e in experts], "stack_experts"))
    return _mtp_weights(cfg, rules) + rules


def _mtp_weights(cfg: TransformerConfig, rules: Tuple[WeightRule, ...]) -> Tuple[WeightRule, ...]:
    """The MTP modules in DeepSeek's layout, ``mtp.{k}.*``: their own tensors, and their layer's under the decoder
    layers' names (the embeddings and the output layer are the model's, not copied)."""
    layer_rules = [rule for rule in rules if rule.ours.startswith("decoder.layers.{i}.")]
    out: List[WeightRule] = []
    for k in range(cfg.mtp_num_layers or 0):
        ours, hf = f"mtp.layers.{k}.", f"mtp.{k}."
        out += [WeightRule(ours + "enorm.weight", (hf + "enorm.weight",)),
                WeightRule(ours + "hnorm.weight", (hf + "hnorm.weight",)),
                WeightRule(ours + "eh_proj.weight", (hf + "e_proj.weight", hf + "h_proj.weight"), "column_halves"),
                WeightRule(ours + "final_layernorm.weight", (hf + "norm.weight",)),
                *(WeightRule(ours + f"hc_head.{name}", (hf + f"hc_head_{name}",)) for name in ("fn", "base", "scale"))]
        out += [WeightRule(rule.ours.replace("decoder.layers.{i}.", ours + "transformer_layer."),
                           tuple(name.replace("model.layers.{i}.", hf) for name in rule.hf), rule.transform)
                for rule in layer_rules]
    return tuple(out)


DEEPSEEK_V4 = register(Family(FAMILY, FAMILY, "DeepseekV4ForCausalLM", _deepseek_v4_config, _deepseek_v4_hf_config,
                              _GLOBAL_WEIGHTS + _LAYER_WEIGHTS + _ATTENTION_WEIGHTS, preserved_keys=_PRESERVED,
                              weights_for=_weights, hf_tensor_aliases=TENSOR_ALIASES,
                              # an absent kind's rate; the indexer sizes of a model without CSA layers; YaRN's mscale
                              # keys (read as 1) and the sliding layers' base of a model without them
                              equivalent_keys=(("compress_rates",), ("index_n_heads", "index_head_dim", "index_topk"),
                                               ("rope_parameters", "rope_theta"))), "deepseek4")

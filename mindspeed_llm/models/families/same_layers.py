"""Families whose ``transformers`` model class is another family's: a ``model_type`` of its own, the same layers.

transformers maps these model types to an existing model class (its ``MODEL_FOR_CAUSAL_LM_MAPPING``), with a
config class of the same fields: they convert by that family's rules, and the exported ``config.json`` keeps
their own ``model_type`` beside the shared ``architectures``. Where their checkpoints keep the original tensor
names (transformers renames them when it loads and back when it saves: its ``conversion_mapping``), our weight
map uses those names, so files round-trip as published:

* ``internlm3`` (InternLM3), ``iquestcoder`` (IQuest-Coder): Llama's layers and names (``LlamaForCausalLM``);
* ``exaone`` (EXAONE 3.5): Llama's layers under EXAONE's names (``transformer.wte``, ``transformer.h.{i}``'s
  ``ln_1`` / ``attn.attention.{q,k,v,out}_proj`` / ``ln_2`` / ``mlp.c_fc_0`` (gate), ``c_fc_1`` (up), ``c_proj``,
  ``transformer.ln_f``);
* ``sarvam_mla`` (Sarvam's MLA models): DeepSeek-V3's layers and names (``DeepseekV3ForCausalLM``);
* ``param2moe`` (Param-2 MoE), ``sarvam_moe`` (Sarvam's MoE models): GLM-4.5's layers (``Glm4MoeForCausalLM``)
  under their names (``model.word_embeddings``, ``attention.query_key_value`` holding [q; k; v] rows,
  ``attention.dense``, ``attention.query_layernorm`` / ``key_layernorm``, the router bias ``mlp.gate.expert_bias``).

GPT-SW3 (``gpt-sw3``) needs no entry: its checkpoints' ``config.json`` says ``model_type`` gpt2 (the ``gpt2``
family).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional, Sequence, Tuple

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import Family, WeightRule, get_family, register

Renames = Sequence[Tuple[str, str]]  # (regex over a standard HF name, the checkpoint's spelling)
EXAONE_NAMES: Renames = (
    (r"^model\.embed_tokens\.", "transformer.wte."), (r"^model\.norm\.", "transformer.ln_f."),
    (r"^model\.layers\.\{i\}\.", "transformer.h.{i}."), (r"\.input_layernorm\.", ".ln_1."),
    (r"\.post_attention_layernorm\.", ".ln_2."), (r"\.self_attn\.o_proj\.", ".attn.attention.out_proj."),
    (r"\.self_attn\.", ".attn.attention."), (r"\.mlp\.gate_proj\.", ".mlp.c_fc_0."),
    (r"\.mlp\.up_proj\.", ".mlp.c_fc_1."), (r"\.mlp\.down_proj\.", ".mlp.c_proj."))
SARVAM_NAMES: Renames = (
    (r"^model\.embed_tokens\.", "model.word_embeddings."), (r"\.self_attn\.o_proj\.", ".attention.dense."),
    (r"\.self_attn\.q_norm\.", ".attention.query_layernorm."), (r"\.self_attn\.k_norm\.", ".attention.key_layernorm."),
    (r"\.mlp\.gate\.e_score_correction_bias$", ".mlp.gate.expert_bias"), (r"\.self_attn\.", ".attention."))
FUSED_QKV = "self_attention.linear_qkv."  # ours; Sarvam's one ``query_key_value`` holds its [q; k; v] rows


def _spelled(name: str, renames: Renames) -> str:
    for pattern, replacement in renames:
        name = re.sub(pattern, replacement, name)
    return name


def _renamed_rule(rule: WeightRule, renames: Renames, fused_qkv: bool) -> WeightRule:
    """``rule`` over the checkpoint's names; with ``fused_qkv`` our q/k/v rows come from one tensor."""
    if fused_qkv and FUSED_QKV in rule.ours:
        field = rule.ours.rsplit(".", 1)[1]
        fused = rule.hf[0].replace(f"self_attn.q_proj.{field}", f"self_attn.query_key_value.{field}")
        return dataclasses.replace(rule, hf=(_spelled(fused, renames),), transform="copy")
    return dataclasses.replace(rule, hf=tuple(_spelled(name, renames) for name in rule.hf))


def _renamed(rules: Sequence[WeightRule], renames: Renames, fused_qkv: bool) -> Tuple[WeightRule, ...]:
    return tuple(_renamed_rule(rule, renames, fused_qkv) for rule in rules)


def same_layers_family(model_type: str, base: str, architecture: str, renames: Renames = (),
                       fused_qkv: bool = False) -> Family:
    """``base``'s family under ``model_type``'s name and ``config.json`` identity, its tensors spelled by
    ``renames``."""
    family = get_family(base)
    weights_for: Optional[Callable[[TransformerConfig], Tuple[WeightRule, ...]]] = family.weights_for
    if renames and weights_for is not None:
        base_rules = weights_for
        weights_for = lambda cfg: _renamed(base_rules(cfg), renames, fused_qkv)  # noqa: E731
    return dataclasses.replace(family, name=model_type, model_type=model_type, architecture=architecture,
                               weights=_renamed(family.weights, renames, fused_qkv), weights_for=weights_for)


register(same_layers_family("internlm3", "llama2", "LlamaForCausalLM"))
register(same_layers_family("iquestcoder", "llama2", "LlamaForCausalLM"))
register(same_layers_family("exaone", "llama2", "LlamaForCausalLM", EXAONE_NAMES))
register(same_layers_family("sarvam_mla", "deepseek_v3", "DeepseekV3ForCausalLM"))
register(same_layers_family("param2moe", "glm4_moe", "Glm4MoeForCausalLM", SARVAM_NAMES, fused_qkv=True))
register(same_layers_family("sarvam_moe", "glm4_moe", "Glm4MoeForCausalLM", SARVAM_NAMES, fused_qkv=True))

"""Parity cases of the model types whose transformers model class is another family's (merged into
``test_zoo_parity.CASES``): each type's own config class with the overrides of the family it shares layers with
(``mindspeed_llm/models/families/same_layers.py``), so the exported ``config.json`` must load as that type.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from tests.models.cases_mla_moe import CASES as MLA_MOE
from tests.models.cases_moe_sigmoid import CASES as MOE_SIGMOID

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "exaone": ("ExaoneConfig", "LlamaForCausalLM", dict(head_dim=16), "exaone"),
    "internlm3": ("InternLM3Config", "LlamaForCausalLM", dict(head_dim=16, tie_word_embeddings=True), "internlm3"),
    "iquestcoder": ("IQuestCoderConfig", "LlamaForCausalLM", dict(head_dim=24, rms_norm_eps=1e-6), "iquestcoder"),
    "sarvam_mla": ("SarvamMLAConfig", "DeepseekV3ForCausalLM", MLA_MOE["deepseek_v3"][2], "sarvam_mla"),
    "param2moe": ("Param2MoeConfig", "Glm4MoeForCausalLM", MOE_SIGMOID["glm4_moe"][2], "param2moe"),
    "sarvam_moe": ("SarvamMoEConfig", "Glm4MoeForCausalLM", MOE_SIGMOID["glm4_moe_ungrouped"][2], "sarvam_moe"),
}

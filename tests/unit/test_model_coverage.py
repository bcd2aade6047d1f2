"""Every causal-LM model type of the installed transformers has a status: a registered family or a refusal with
its reason (``tools/model_coverage.py``), and examples/README.md holds that table as the tool writes it.

    python -m pytest tests/unit/test_model_coverage.py -q
"""
from __future__ import annotations

import pytest

from mindspeed_llm.models.registry import RegistryError, family_for_hf_config
from tools import model_coverage

# the types issue 28 names, each must have a status in the table
NAMED = ("afmoe", "cohere2_moe", "exaone", "exaone_moe", "longcat_flash", "mimo_v2_flash", "hy_v4", "internlm3",
         "sarvam_mla", "sarvam_moe", "dots3_note_text", "laguna", "doge", "diffllama", "gemma3n_text",
         "apertus1p5_text", "llama4_text", "gemma3_text", "gemma4_text", "openai-gpt", "ctrl", "deepseek_v32",
         "glm_moe_dsa", "deepseek_v4")


def test_every_causal_lm_type_has_a_status() -> None:
    rows = model_coverage.coverage()
    missing = [model_type for model_type, kind, _ in rows if kind == "missing"]
    assert not missing, f"model types without a family or a refusal: {missing}"
    kinds = {model_type: kind for model_type, kind, _ in rows}
    assert all(name in kinds for name in NAMED), [name for name in NAMED if name not in kinds]
    assert kinds["deepseek_v32"] == kinds["glm_moe_dsa"] == kinds["exaone"] == kinds["deepseek_v4"] == "covered"
    assert kinds["gpt-sw3"] == "covered" and kinds["bert"] == "refused"
    assert len(rows) > 150 and sum(kind == "covered" for kind in kinds.values()) > 100


def test_readme_holds_the_generated_table() -> None:
    assert model_coverage.main(["--check"]) == 0, "run python tools/model_coverage.py --write"


@pytest.mark.parametrize("model_type, fragment", [("bert", "BERT-style bidirectional encoder"),
                                                  ("bart", "the decoder of an encoder-decoder"),
                                                  ("gemma3", "multimodal-only"),
                                                  ("diffllama", "differential attention"),
                                                  ("dots3_note_text", "indexer")])
def test_a_refused_type_says_why_in_one_line(model_type: str, fragment: str) -> None:
    with pytest.raises(RegistryError, match=fragment) as error:
        family_for_hf_config({"model_type": model_type})
    assert "\n" not in str(error.value)

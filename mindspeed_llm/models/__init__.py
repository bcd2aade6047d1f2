"""Architecture registry: HF family -> our config and a two-way weight map."""
from mindspeed_llm.models.registry import (
    FAMILIES,
    Family,
    RegistryError,
    TensorContext,
    WeightRule,
    config_from_hf,
    find_rule,
    get_family,
    known_families,
    to_hf,
    to_ours,
)

__all__ = ["FAMILIES", "Family", "RegistryError", "TensorContext", "WeightRule", "config_from_hf", "find_rule",
           "get_family", "known_families", "to_hf", "to_ours"]

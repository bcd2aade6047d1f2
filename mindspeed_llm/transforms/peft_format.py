"""LoRA adapters in PEFT's format: our fused adapters <-> PEFT's per-projection adapters, exactly.

PEFT (0.17) writes an adapter as two files in a directory:

* ``adapter_config.json``: ``peft_type`` LORA, ``r``, ``lora_alpha``, ``lora_dropout``, ``target_modules`` (HF
  module names: ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``gate_proj``, ``up_proj``, ``down_proj``),
  ``base_model_name_or_path``, ``task_type`` CAUSAL_LM, ...;
* ``adapter_model.safetensors``: ``base_model.model.<HF module>.lora_A.weight`` ``[r, in]`` and
  ``...lora_B.weight`` ``[out, r]``, e.g. ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``.

Our adapter of a fused projection (``linear_qkv`` = q/k/v rows, ``linear_fc1`` = gate/up rows) has one ``A``
and one ``B`` whose rows follow the fused weight's rows. Since ``B A x`` restricted to some rows of ``B`` is
the adapter of those rows, the registry's own split of the weight's rows (``to_hf`` of the weight's
:class:`WeightRule`: ``fuse_rows`` for Llama's q/k/v with GQA sizes, the per-group interleaving of
GPT-NeoX-style fused ``query_key_value``) applied to ``B`` gives each HF projection's ``B``; every projection
of the fused layer gets the same ``A``. Back (:func:`from_peft`), PEFT's adapters fuse exactly when the
projections of a fused layer share ``A`` (as ours exported do): ``B = to_ours(rule, [B_q, B_k, B_v])``.
Adapters trained elsewhere by PEFT have one ``A`` per projection; their exact fused form is the block form
``A = [A_q; A_k; A_v]`` (rank 3r) with a block-diagonal ``B`` (projection j's rows hold ``B_j`` in columns
``j r .. (j + 1) r``), with the scaling ``alpha / r`` unchanged. Our layers take a rank per target
(``LoraConfig.module_ranks``, found by :func:`fused_ranks` when ``--lora-load`` names a PEFT directory, and
recorded in the adapter checkpoints); such a module exports back to PEFT as a shared ``A`` of rank ``k r``
per projection with ``rank_pattern`` (and ``alpha_pattern`` keeping ``alpha / r``). A ``rank_pattern`` /
``alpha_pattern`` that changes the scaling of some projections is refused (ours is one ``alpha / r``).

A reward model (``--stage orm``, our ``value_head``) is HF's ``...ForSequenceClassification`` with one label:
PEFT (0.21) writes its adapter with ``task_type`` SEQ_CLS, ``modules_to_save`` ``["classifier", "score"]`` (added
by ``PeftModelForSequenceClassification``) and the trained score head as ``base_model.model.score.weight``
(:func:`module_key`; the ``modules_to_save.default`` of the live wrapper is dropped in the file). Such an adapter
loads back into a reward model with the score as its value head.

Only transforms that move whole rows of the weight are exact for ``B`` (``ROW_TRANSFORMS``); a family whose
weight map transposes (GPT-2's Conv1D) is refused.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from mindspeed_llm.models.registry import TensorContext, WeightRule, to_hf, to_ours

PEFT_CONFIG = "adapter_config.json"
PEFT_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
SEQ_CLS_MODULES = ["classifier", "score"]  # what PEFT adds to modules_to_save for task_type SEQ_CLS
ROW_TRANSFORMS = ("copy", "fuse_rows", "qkv_interleaved", "qkv_codegen")
FACTORS = ("lora_A", "lora_B")

RuleOf = Callable[[str], Tuple[WeightRule, Tuple[str, ...]]]  # our weight name -> (rule, HF weight names)
ContextOf = Callable[[str], TensorContext]  # our weight name -> what its transform needs


class PeftFormatError(ValueError):
    """A PEFT adapter that cannot be read or written exactly (one line)."""


def is_peft_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, PEFT_CONFIG))


def adapted_modules(names: Iterable[str]) -> List[str]:
    """Our adapted modules (``decoder.layers.0.self_attention.linear_qkv``) among parameter names."""
    suffix = ".lora_A.weight"
    return sorted(name[:-len(suffix)] for name in names if name.endswith(suffix))


def peft_key(hf_weight: str, factor: str) -> str:
    """``model.layers.0.self_attn.q_proj.weight`` -> ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``."""
    return f"{PEFT_PREFIX}{hf_weight[:-len('.weight')]}.{factor}.weight"


def module_key(hf_weight: str) -> str:
    """A module saved whole (a sequence classifier's ``score.weight``) -> ``base_model.model.score.weight``."""
    return f"{PEFT_PREFIX}{hf_weight}"


def is_sequence_classifier(config: Dict[str, Any]) -> bool:
    """An adapter of a sequence classifier (a reward model), with its score head."""
    return config.get("task_type") == "SEQ_CLS"


def _row_rule(module: str, rule_of: RuleOf) -> Tuple[WeightRule, Tuple[str, ...]]:
    rule, hf_names = rule_of(f"{module}.weight")
    if rule.transform not in ROW_TRANSFORMS:
        raise PeftFormatError(f"{module}: its Hugging Face weights are stored with the '{rule.transform}' transform, "
                              "which is not a split of rows; PEFT adapters of this family are not supported")
    return rule, hf_names


def hf_targets(modules: Iterable[str], rule_of: RuleOf) -> List[str]:
    """PEFT's ``target_modules`` for our adapted modules: the HF modules' leaf names (q_proj, k_proj, ...)."""
    return sorted({hf[:-len(".weight")].rsplit(".", 1)[-1] for module in modules
                   for hf in _row_rule(module, rule_of)[1]})


def to_peft(adapters: Dict[str, torch.Tensor], rule_of: RuleOf, context_of: ContextOf) -> Dict[str, torch.Tensor]:
    """Our full adapters (``<module>.lora_A.weight`` / ``lora_B``, every layer) -> PEFT's tensors."""
    out: Dict[str, torch.Tensor] = {}
    for module in adapted_modules(adapters):
        rule, hf_names = _row_rule(module, rule_of)
        a = adapters[f"{module}.lora_A.weight"]  # [r, in]
        b = adapters[f"{module}.lora_B.weight"]  # [out, r], rows as the fused weight's
        for hf_name, b_part in zip(hf_names, to_hf(rule, b, context_of(f"{module}.weight"))):
            out[peft_key(hf_name, "lora_A")] = a.clone().contiguous()  # shared A, one copy per projection
            out[peft_key(hf_name, "lora_B")] = b_part.contiguous()  # [out_k, r]
    return out


def from_peft(tensors: Dict[str, torch.Tensor], modules: Sequence[str], rule_of: RuleOf, context_of: ContextOf,
              rank_of: Callable[[str], int], where: str) -> Dict[str, torch.Tensor]:
    """PEFT's tensors -> our full adapters of ``modules`` (exact; one-line PeftFormatError otherwise).

    A module whose adapters have rank ``r`` takes the projections' shared ``A`` and their ``B`` rows; one of
    rank ``k r`` (``rank_of``; k the projections it fuses) takes ``A = [A_1; ...; A_k]`` and the block-diagonal
    ``B`` (projection ``j``'s rows hold its ``B_j`` in columns ``j r .. (j + 1) r``).
    """
    out: Dict[str, torch.Tensor] = {}
    for module in modules:
        rule, hf_names = _row_rule(module, rule_of)
        a_parts, b_parts = (_factors(tensors, hf_names, factor, module, where) for factor in FACTORS)
        r, rank = a_parts[0].shape[0], rank_of(module)
        if rank == r:
            if any(not torch.equal(a_parts[0], a) for a in a_parts[1:]):
                raise PeftFormatError(f"{where}: the {_projections(hf_names)} adapters of {module} have different "
                                      f"lora_A, which fuse exactly only with rank {len(hf_names)}r for this module")
            a = a_parts[0]  # [r, in], shared
        elif rank == len(hf_names) * r:
            a = torch.cat(a_parts, dim=0)  # [k r, in]
            b_parts = [_block_columns(b, index, r, rank) for index, b in enumerate(b_parts)]
        else:
            raise PeftFormatError(f"{where}: {module} has adapters of rank {rank}, PEFT's {_projections(hf_names)} "
                                  f"have rank {r}; the adapter's r differs from this run's")
        out[f"{module}.lora_A.weight"] = a
        out[f"{module}.lora_B.weight"] = to_ours(rule, b_parts, context_of(f"{module}.weight"))  # [out, rank]
    return out


def _factors(tensors: Dict[str, torch.Tensor], hf_names: Sequence[str], factor: str, module: str,
             where: str) -> List[torch.Tensor]:
    keys = [peft_key(hf, factor) for hf in hf_names]
    missing = [key for key in keys if key not in tensors]
    if missing:
        raise PeftFormatError(f"{where} has no {missing[0]} (needed by {module}); the adapter's targets or layers "
                              "differ from this model's")
    return [tensors[key] for key in keys]


def _projections(hf_names: Sequence[str]) -> str:
    return ", ".join(hf.rsplit(".", 2)[-2] for hf in hf_names)


def _block_columns(b: torch.Tensor, index: int, r: int, rank: int) -> torch.Tensor:
    """``b`` [out_j, r] as rows of a block-diagonal [out_j, rank]: columns index r .. (index + 1) r."""
    block = b.new_zeros((b.shape[0], rank))
    block[:, index * r:(index + 1) * r] = b
    return block


def fused_ranks(tensors: Dict[str, torch.Tensor], modules: Sequence[str], rule_of: RuleOf, r: int
                ) -> Tuple[Tuple[str, int], ...]:
    """(target, rank) for each of our targets (leaf names) whose adapters need another rank than ``r`` to hold
    PEFT's exactly: k r' where some layer's k fused projections have different ``lora_A`` (the block form),
    else r' (PEFT's own rank of those projections, from its ``rank_pattern``)."""
    ranks: Dict[str, int] = {}
    for module in modules:
        _, hf_names = _row_rule(module, rule_of)
        parts = [tensors.get(peft_key(hf, "lora_A")) for hf in hf_names]
        if any(p is None for p in parts):
            continue  # reported by from_peft
        own = any(not torch.equal(parts[0], p) for p in parts[1:])
        rank = (len(hf_names) if own else 1) * parts[0].shape[0]
        target = module.rsplit(".", 1)[-1]
        ranks[target] = max(rank, ranks.get(target, 0))
    return tuple(sorted((target, rank) for target, rank in ranks.items() if rank != r))


def adapter_config(r: int, alpha: float, dropout: float, targets: Sequence[str], base: str,
                   rank_pattern: Optional[Dict[str, int]] = None, sequence_classifier: bool = False
                   ) -> Dict[str, Any]:
    """PEFT's ``adapter_config.json`` for plain LoRA on a causal LM (a sequence classifier's, with its score
    head saved, for ``sequence_classifier``); ``rank_pattern`` (HF target -> rank) for projections of another
    rank, their alpha scaled so that every scaling stays ``alpha / r``."""
    rank_pattern = dict(rank_pattern or {})
    alpha_pattern = {target: alpha * rank / r for target, rank in rank_pattern.items()}
    task, saved = ("SEQ_CLS", list(SEQ_CLS_MODULES)) if sequence_classifier else ("CAUSAL_LM", None)
    return {"peft_type": "LORA", "task_type": task, "r": r, "lora_alpha": alpha, "lora_dropout": dropout,
            "target_modules": sorted(targets), "base_model_name_or_path": base, "bias": "none",
            "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "use_rslora": False,
            "use_dora": False, "modules_to_save": saved, "layers_to_transform": None, "layers_pattern": None,
            "rank_pattern": rank_pattern, "alpha_pattern": alpha_pattern, "revision": None}


# settings that change what an adapter computes, and the value our layers implement
PLAIN_LORA = {"peft_type": "LORA", "bias": "none", "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
              "modules_to_save": None, "layers_to_transform": None}


def read_config(path: str) -> Dict[str, Any]:
    """``adapter_config.json`` of a plain LoRA adapter; a setting our layers do not implement is refused."""
    with open(os.path.join(path, PEFT_CONFIG)) as handle:
        config = json.load(handle)
    for key, plain in PLAIN_LORA.items():
        value = config.get(key, plain)
        if key == "modules_to_save" and is_sequence_classifier(config) and set(value or ()) <= set(SEQ_CLS_MODULES):
            continue  # a sequence classifier's score head (PEFT's own), read as a reward model's value head
        if value != plain and not (plain is None and value in ([], {})) and not (plain == {} and value is None):
            raise PeftFormatError(f"{path}/{PEFT_CONFIG}: {key} {value!r} is not supported (our LoRA layers "
                                  f"implement {key} {plain!r}); export the adapter without it")
    _check_patterns(config, path)
    if not isinstance(config.get("target_modules"), list):
        raise PeftFormatError(f"{path}/{PEFT_CONFIG}: target_modules {config.get('target_modules')!r} is not a list "
                              "of module names; list them (q_proj, k_proj, ...)")
    return config


def _check_patterns(config: Dict[str, Any], path: str) -> None:
    """``rank_pattern`` / ``alpha_pattern`` are read only where every scaling stays ``lora_alpha / r`` (ours is
    one scaling for every module; the tensors give each projection's rank)."""
    r, alpha = config.get("r"), config.get("lora_alpha")
    ranks, alphas = config.get("rank_pattern") or {}, config.get("alpha_pattern") or {}
    for key in sorted(set(ranks) | set(alphas)):
        rank, key_alpha = ranks.get(key, r), alphas.get(key, alpha)
        if abs(key_alpha / rank - alpha / r) > 1e-12 * abs(alpha / r):
            raise PeftFormatError(f"{path}/{PEFT_CONFIG}: {key} has scaling {key_alpha}/{rank} by rank_pattern / "
                                  f"alpha_pattern, the others {alpha}/{r}; our LoRA layers scale every module by "
                                  "one alpha/r")


def read_weights(path: str) -> Dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    file = os.path.join(path, PEFT_WEIGHTS)
    if not os.path.isfile(file):
        raise PeftFormatError(f"{path} has {PEFT_CONFIG} but no {PEFT_WEIGHTS}; save the adapter with "
                              "safe_serialization (PEFT's default)")
    return load_file(file)


def write(path: str, tensors: Dict[str, torch.Tensor], config: Dict[str, Any]) -> None:
    """The adapter's tensors, then its config (the file PEFT looks for) last."""
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, PEFT_WEIGHTS), metadata={"format": "pt"})
    with open(os.path.join(path, PEFT_CONFIG), "w") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
        handle.write("\n")

"""The shell recipes under examples/<family>/, checked as a user and CI run them.

- every recipe passes ``bash -n``;
- every pretrain recipe's full-size flags pass the training entry's one validation pass at the
  recipe's world size (``DRY_RUN=argv`` prints them without training);
- ``SMOKE=1`` keeps every behaviour flag of the full-size recipe and shrinks only sizes and data;
- every MoE pretrain recipe lays its experts out with ``EP`` and its hf2mcore sibling converts to the same
  TP/PP/EP; ``SMOKE=1`` keeps EP above 1 where the two smoke processes leave a data-parallel pair;
- the long-context recipe (Llama-3-8B at 32k, CP 4) is valid with every ``CP_ALGO`` and keeps CP 2 under
  ``SMOKE=1``; so does DeepSeek-V3.2 at 128k (CP 8, DSA with MoE and EP); a recipe that does not pass
  ``CP_ARGS`` refuses ``CP`` > 1;
- every full fine-tuning recipe (``tune_*_full_ptd.sh``, posttrain_gpt.py --stage sft) passes validation at
  full size against a checkpoint with the architecture of its pretrain sibling (``--use-checkpoint-args``
  takes every architecture flag from it), loading what its hf2mcore sibling writes in that layout, training on
  what its data_convert sibling writes with the ``--prompt-type`` that recipe uses; ``SMOKE=1`` keeps its
  flags and shrinks only sizes, layout and data;
- every LoRA and QLoRA fine-tuning recipe (``tune_*_lora_ptd.sh``, ``tune_*_qlora_ptd.sh``) passes the same checks and
  differs from its full sibling only by the adapters (r 16, alpha 32 on linear_qkv linear_proj linear_fc1
  linear_fc2; ``--qlora`` for QLoRA), a higher learning rate and a save directory of its own;
- every DPO and reward-model recipe (``dpo_*_ptd.sh``, ``orm_*_ptd.sh``: --stage dpo / orm on a pairwise set) passes
  the same checks, loading what its family's full fine-tuning recipe saves (in that recipe's layout) and training on
  what its ``data_convert_*_pairwise.sh`` sibling writes with the same ``--prompt-type``; ``SMOKE=1`` keeps its flags;
- every family with a pretrain recipe has a generate recipe (``generate_*_ptd.sh``, inference.py) and an MMLU evaluate
  recipe (``evaluate_*_mmlu_ptd.sh``, evaluation.py) of the model its hf2mcore recipe converts, Llama-3.1-8B,
  Qwen2.5-7B and Qwen3-8B also GSM8K, BoolQ and HumanEval ones; each one's flags parse as inference.py /
  evaluation.py parse them (placeholders for the training-only flags) over a checkpoint of the pretraining
  recipe's architecture, loading what the hf2mcore recipe writes in its layout (evaluation at PP 1, a model with
  whole experts over TP at TP 1: the same conversion at that layout) with its tokenizer; the task's own checks pass
  (the benchmark read from its published layout); ``SMOKE=1`` keeps the flags;
- samples run end to end with ``SMOKE=1``: pretrain recipes (sliding window, GQA, TP=2 on two CPU
  processes; MoE with EP=2 and the alltoall dispatcher; ring CP=2 with full recompute), checkpoint round trips HF -> mcore (TP=2 PP=2,
  and EP=2 for an MoE model) -> HF, and Gemma 2's full fine-tuning (a tiny model of the family converted at
  TP=2, an instruction set tokenized by preprocess_data.py, 3 SFT steps with SP and variable lengths), Qwen2.5's
  LoRA fine-tuning (the same at TP=2, saving the adapters only), and one
  DPO and one reward-model recipe (a tiny model at TP=2, preference pairs tokenized by preprocess_data.py's
  pairwise handler, 3 steps with SP), one generate recipe (an MoE model at PP 2: a response printed and written)
  and one evaluate recipe per task written (MMLU, GSM8K, BoolQ, HumanEval on tiny benchmarks in their published
  layouts: the accuracy JSON written).
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import argparse

import pytest
import torch

from core.transformer.config import architecture_settings
from inference import check_task
from core.parallel_state import expert_dimension
from mindspeed_llm.arguments import (check_pretraining_data, parse_args,
                                     transformer_config_from_args, validate_args)
from mindspeed_llm.entry_flags import EVALUATION_TASKS, posttrain_entry
from mindspeed_llm.evaluation.runner import read_benchmark
from mindspeed_llm.inference.loading import validated_generation_args

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(REPO.glob("examples/*/*.sh"))
ACTIONS = sorted(REPO.glob("examples/common/actions/*.sh"))
PRETRAIN_RECIPES = [path for path in RECIPES if path.name.startswith("pretrain_")]
GENERATE_RECIPES = [path for path in RECIPES if path.name.startswith("generate_")]
EVALUATE_RECIPES = [path for path in RECIPES if path.name.startswith("evaluate_")]
INFERENCE_FAMILIES = {path.parent.name for path in GENERATE_RECIPES}
TUNE_RECIPES = [path for path in RECIPES if path.name.startswith("tune_")]
PREFERENCE_RECIPES = [path for path in RECIPES if path.name.startswith(("dpo_", "orm_"))]
GRPO_RECIPES = [path for path in RECIPES if path.name.startswith("grpo_")]
POSTTRAIN_RECIPES = TUNE_RECIPES + PREFERENCE_RECIPES
# Flags whose values SMOKE=1 may change: sizes, parallel layout, schedule, data and output.
SHRUNK_FLAGS = {"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--num-layers", "--hidden-size",
                "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups", "--seq-length", "--vocab-size",
                "--sliding-window", "--kv-channels", "--micro-batch-size", "--global-batch-size", "--train-iters",
                "--save-interval", "--eval-interval", "--eval-iters", "--save", "--tokenizer-type",
                "--no-rope-layers", "--full-attention-layers", "--dense-bias-layers",  # layer numbers: they
                "--hybrid-override-pattern",  # follow --num-layers, as the one-char-per-layer pattern does
                "--linear-attention-freq",  # as a list expression it has one 0/1 per layer: it follows them too
                "--first-k-dense-replace", "--moe-ffn-hidden-size", "--q-lora-rank", "--kv-lora-rank",
                "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim",  # MoE/MLA sizes
                "--dsa-indexer-n-heads", "--dsa-indexer-head-dim", "--dsa-indexer-topk",  # DSA indexer sizes
                # DeepSeek-V4: the pattern follows the layers, the output groups the heads, one hash-routed layer
                "--compressed-attention-pattern", "--o-groups", "--o-lora-rank", "--hca-compress-ratio",
                "--moe-hash-layers",
                "--mamba-head-dim",  # Zamba's Mamba1 SSMs are each expand x hidden / heads wide: they follow it
                # linear-attention heads where they follow the attention heads (MiniMax's lightning layers)
                "--linear-num-key-heads", "--linear-num-value-heads", "--linear-key-head-dim", "--linear-value-head-dim",
                "--expert-model-parallel-size", "--num-layer-list",  # layout: follows TP, PP and the layers
                "--context-parallel-size", "--ulysses-degree-in-cp"}  # CP fits the smoke processes
# Flags that only the full-size run (real data, bf16) or only the smoke run (mock data on the CPU) has.
FULL_ONLY_FLAGS = {"--data-path", "--split", "--tokenizer-name-or-path", "--bf16", "--load"}
SMOKE_ONLY_FLAGS = {"--mock-data", "--device", "--num-workers"}


def _recipe_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _run(recipe: Path, env: Dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(recipe)], cwd=REPO, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=timeout)


def _argv(recipe: Path, smoke: bool, env: Optional[Dict[str, str]] = None) -> Tuple[int, List[str]]:
    """The recipe's world size and pretrain_gpt.py flags, from DRY_RUN=argv (``env``: more variables)."""
    run = _run(recipe, {"DRY_RUN": "argv", "SMOKE": "1" if smoke else "0", **(env or {})})
    assert run.returncode == 0, run.stderr[-2000:]
    first, *argv = run.stdout.splitlines()
    return int(first.removeprefix("WORLD_SIZE=")), argv


def _entry(recipe: Path, argv: List[str]) -> str:
    """The entry the recipe runs, as mindspeed_llm/entry_flags.py names it: its flags are parsed by that
    entry's parser (a flag of another entry fails here as it would in the run)."""
    for prefix, entry in (("pretrain_", "pretrain_gpt.py"), ("generate_", "inference.py"),
                          ("evaluate_", "evaluation.py")):
        if recipe.name.startswith(prefix):
            return entry
    return posttrain_entry(argv[argv.index("--stage") + 1])


def _tool_flags(recipe: Path) -> Dict[str, List[str]]:
    """A data or checkpoint conversion recipe's flags (DRY_RUN=argv: printed, not run), flag -> its values."""
    run = _run(recipe, {"DRY_RUN": "argv"})
    assert run.returncode == 0, run.stderr[-2000:]
    return _flags(run.stdout.splitlines())


def _flags(argv: List[str]) -> Dict[str, List[str]]:
    """Flag -> its values, in order of appearance."""
    flags: Dict[str, List[str]] = {}
    current = None
    for token in argv:
        if token.startswith("--"):
            current = token
            flags[current] = []
        else:
            flags[current].append(token)
    return flags


def test_recipes_exist_for_every_family_and_action() -> None:
    names = {path.name for path in RECIPES}
    for family_recipe in ("llama3/pretrain_llama31_8b_ptd.sh", "mistral/pretrain_mistral_7b_ptd.sh",
                          "qwen2/pretrain_qwen25_7b_ptd.sh", "qwen2/ckpt_convert_qwen25_7b_hf2mcore.sh",
                          "qwen2/ckpt_convert_qwen25_7b_mcore2hf.sh", "qwen2/data_convert_qwen25_pretrain.sh",
                          "qwen2/data_convert_qwen25_instruction.sh", "llama3/pretrain_llama31_8b_32k_ptd.sh",
                          "llama3/tune_llama31_8b_full_ptd.sh", "qwen2/tune_qwen25_7b_full_ptd.sh",
                          "qwen3/tune_qwen3_8b_full_ptd.sh", "mistral/tune_mistral_7b_full_ptd.sh",
                          "gemma2/tune_gemma2_9b_full_ptd.sh"):
        assert Path(family_recipe).name in names, family_recipe
    for folder, model in (("llama3", "llama31_8b"), ("qwen2", "qwen25_7b"), ("qwen3", "qwen3_8b"),
                          ("mistral", "mistral_7b"), ("gemma2", "gemma2_9b")):
        for stage in ("dpo", "orm"):
            assert (REPO / "examples" / folder / f"{stage}_{model}_ptd.sh").is_file(), (folder, stage)
        assert (REPO / "examples" / folder / f"data_convert_{model.rsplit('_', 1)[0]}_pairwise.sh").is_file(), folder
        for method in ("full", "lora", "qlora"):
            assert (REPO / "examples" / folder / f"tune_{model}_{method}_ptd.sh").is_file(), (folder, method)
    for path in RECIPES:
        if path.parent.name != "common":
            assert re.fullmatch(r"(pretrain_\w+_ptd|ckpt_convert_\w+_(hf2mcore|mcore2hf)|data_convert_\w+_"
                                r"(pretrain|instruction|pairwise)|tune_\w+_(full|lora|qlora)_ptd|(dpo|orm|grpo)_\w+_ptd|"
                                rf"generate_\w+_ptd|evaluate_\w+_({'|'.join(EVALUATION_TASKS)})_ptd)\.sh",
                                path.name), path.name


def test_generate_and_evaluate_recipes_exist_for_every_family() -> None:
    """One generate and one MMLU evaluate recipe per family with a pretrain recipe, of a model the family's
    hf2mcore recipe converts (the Llama line's are llama3/'s: llama2/ holds Llama-2-7B's pretraining, conversion and
    data recipes only); GSM8K, BoolQ and HumanEval for Llama-3.1-8B, Qwen2.5-7B and Qwen3-8B."""
    families = {path.parent for path in PRETRAIN_RECIPES if path.parent.name != "llama2"}
    assert {folder.name for folder in families} == INFERENCE_FAMILIES and len(families) >= 80
    for folder in sorted(families):
        generate = [path.name for path in folder.glob("generate_*_ptd.sh")]
        assert len(generate) == 1, (folder.name, generate)
        model = generate[0].removeprefix("generate_").removesuffix("_ptd.sh")
        assert (folder / f"ckpt_convert_{model}_hf2mcore.sh").is_file(), generate[0]
        assert {path.name for path in folder.glob("evaluate_*_ptd.sh")} >= {f"evaluate_{model}_mmlu_ptd.sh"}
    for folder, model in (("llama3", "llama31_8b"), ("qwen2", "qwen25_7b"), ("qwen3", "qwen3_8b")):
        for task in ("mmlu", "gsm8k", "boolq", "human_eval"):
            assert (REPO / "examples" / folder / f"evaluate_{model}_{task}_ptd.sh").is_file(), (folder, task)


@pytest.mark.parametrize("recipe", RECIPES + ACTIONS, ids=_recipe_id)
def test_recipe_parses(recipe: Path) -> None:
    run = subprocess.run(["bash", "-n", str(recipe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


# The action a recipe's name calls for: (name pattern, the call that ends the recipe).
RECIPE_ACTIONS = ((r"pretrain_\w+_ptd", "recipe_pretrain"), (r"ckpt_convert_\w+_hf2mcore", "recipe_hf2mcore"),
                  (r"ckpt_convert_\w+_mcore2hf", "recipe_mcore2hf"),
                  (r"data_convert_\w+_(pretrain|instruction|pairwise)", r"recipe_data \1"),
                  (r"tune_\w+_(full|lora|qlora)_ptd", r"recipe_tune \1"), (r"(dpo|orm|grpo)_\w+_ptd", r"recipe_\1"),
                  (r"generate_\w+_ptd", "recipe_generate"),
                  (rf"evaluate_\w+?_({'|'.join(EVALUATION_TASKS)})_ptd", r"recipe_evaluate \1"))
FAMILY_RECIPES = [path for path in RECIPES if path.parent.name != "common"]


@pytest.mark.parametrize("recipe", FAMILY_RECIPES, ids=_recipe_id)
def test_recipe_is_its_variables_and_one_action(recipe: Path) -> None:
    """The header's three usage lines, the variables, then one call of the action of the recipe's kind; the
    action's body (the launch, the tool's flags) lives in examples/common/actions/ only."""
    lines = recipe.read_text().splitlines()
    expected = next(re.sub(pattern, call, recipe.stem) for pattern, call in RECIPE_ACTIONS
                    if re.fullmatch(pattern, recipe.stem))
    assert lines[-1] == expected, (lines[-1], expected)
    usage = f"bash examples/{recipe.parent.name}/{recipe.name}"
    for prefix in ("#   ", "#   SMOKE=1 ", "#   DRY_RUN=1 "):
        assert any(line.startswith(prefix + usage) for line in lines), prefix
    code = [line for line in lines if not line.lstrip().startswith("#")]
    assert not [line for line in code if re.match(r"\s*(python|torchrun)\b", line)]
    assert sum(1 for line in code if line.startswith("recipe_")) == 1


def test_conversion_recipe_dry_run_prints_the_command_only(tmp_path: Path) -> None:
    recipe = REPO / "examples" / "llama3" / "ckpt_convert_llama31_8b_hf2mcore.sh"
    run = subprocess.run(["bash", str(recipe)], cwd=tmp_path, env={**os.environ, "DRY_RUN": "1", "TP": "2"},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ("python tools/convert_ckpt.py --load-model-type hf --save-model-type mg --model-type-hf llama2"
                          " --target-tensor-parallel-size 2 --target-pipeline-parallel-size 1 --load-dir"
                          " ./model_from_hf/Llama-3.1-8B --save-dir ./model_weights/llama31-8b-mcore-tp8pp1\n")
    assert not list(tmp_path.iterdir())  # nothing converted, nothing written


@pytest.mark.parametrize("recipe", PRETRAIN_RECIPES, ids=_recipe_id)
def test_pretrain_recipe_flags_pass_validation(recipe: Path) -> None:
    world_size, argv = _argv(recipe, smoke=False)
    args = parse_args(argv, _entry(recipe, argv))
    validate_args(args, world_size)
    check_pretraining_data(args)
    model_parallel = args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size
    assert args.data_parallel_size * model_parallel == world_size
    assert args.bf16 and args.tokenizer_type == "PretrainedFromHF"


@pytest.mark.parametrize("recipe", PRETRAIN_RECIPES, ids=_recipe_id)
def test_smoke_keeps_behaviour_flags_and_shrinks_sizes(recipe: Path) -> None:
    _, full_argv = _argv(recipe, smoke=False)
    world_size, smoke_argv = _argv(recipe, smoke=True)
    full, smoke = _flags(full_argv), _flags(smoke_argv)
    assert set(full) - FULL_ONLY_FLAGS == set(smoke) - SMOKE_ONLY_FLAGS
    kept = {flag: values for flag, values in full.items() if flag not in SHRUNK_FLAGS | FULL_ONLY_FLAGS}
    assert kept == {flag: smoke[flag] for flag in kept}
    assert smoke["--device"] == ["cpu"] and "--mock-data" in smoke and world_size <= 2
    for size in ("--num-layers", "--hidden-size", "--seq-length", "--vocab-size", "--train-iters"):
        assert int(smoke[size][0]) < int(full[size][0]), size
    args = parse_args(smoke_argv, _entry(recipe, smoke_argv))
    validate_args(args, world_size)


def _layout_defaults(recipe: Path) -> Dict[str, str]:
    """The recipe's default layout variables (``TP=${TP:-8} PP=${PP:-1} EP=${EP:-4}`` -> {"TP": "8", ...})."""
    return dict(re.findall(r"\b(TP|PP|EP)=\$\{\1:-(\d+)\}", recipe.read_text()))


MOE_PRETRAIN_RECIPES = [path for path in PRETRAIN_RECIPES if "--num-experts" in path.read_text()]


@pytest.mark.parametrize("recipe", MOE_PRETRAIN_RECIPES, ids=_recipe_id)
def test_moe_recipe_lays_out_experts_as_its_checkpoint(recipe: Path) -> None:
    _, full_argv = _argv(recipe, smoke=False)
    full = _flags(full_argv)
    layout = {"TP": full["--tensor-model-parallel-size"][0], "PP": full["--pipeline-model-parallel-size"][0],
              "EP": full["--expert-model-parallel-size"][0]}
    sibling = recipe.with_name(recipe.name.replace("pretrain_", "ckpt_convert_").replace("_ptd", "_hf2mcore"))
    if sibling.is_file():
        text = sibling.read_text()
        assert '--target-expert-parallel-size "$EP"' in text or layout["EP"] == "1", sibling.name
        assert {**{"EP": "1"}, **_layout_defaults(sibling)} == layout, sibling.name
    _, smoke_argv = _argv(recipe, smoke=True)
    smoke = _flags(smoke_argv)
    tp, pp = int(smoke["--tensor-model-parallel-size"][0]), int(smoke["--pipeline-model-parallel-size"][0])
    expert_tp = smoke.get("--expert-tensor-parallel-size", ["0"])[0]
    cp = int(smoke.get("--context-parallel-size", ["1"])[0])  # CP 2 takes both smoke processes: no DP pair
    if int(layout["EP"]) > 1 and cp == 1 and (tp * pp == 1 or expert_tp == "1"):
        assert int(smoke["--expert-model-parallel-size"][0]) == 2


@functools.lru_cache(maxsize=None)
def _full_size_args(recipe: Path) -> argparse.Namespace:
    """``recipe``'s full-size flags, parsed (not to be modified: the result is shared)."""
    argv = _argv(recipe, smoke=False)[1]
    return parse_args(argv, _entry(recipe, argv))


def _architecture_checkpoint(pretrain_recipe: Path, root: Path) -> Path:
    """A checkpoint holding only the settings of ``pretrain_recipe``'s full-size model (what
    ``--use-checkpoint-args`` reads; no weights), as a converter would write them."""
    args = _full_size_args(pretrain_recipe)
    rank_dir = root / "release" / "mp_rank_00"
    rank_dir.mkdir(parents=True)
    torch.save({"args": argparse.Namespace(), "transformer_config": transformer_config_from_args(args).to_dict()},
               rank_dir / "model_optim_rng.pt")
    (root / "latest_checkpointed_iteration.txt").write_text("release")
    return root


def _sibling(recipe: Path, comment_of: str) -> Path:
    """The recipe named in the comment after ``comment_of=...`` (``DATA_PATH=... # data_convert_x.sh``)."""
    return recipe.with_name(re.search(rf"^{comment_of}=.*#\s*(\S+\.sh)", recipe.read_text(), re.M).group(1))


def _default(recipe: Path, variable: str) -> str:
    """A recipe's default of ``variable`` (``CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./x}`` -> ``./x``)."""
    return re.search(rf"\b{variable}=\$\{{{variable}:-([^}}]*)\}}", recipe.read_text()).group(1)


def _validated_on_pretrain_architecture(recipe: Path, pretrain: Path, tmp_path: Path) -> Tuple[int, argparse.Namespace]:
    """``recipe``'s world size and flags, validated over a checkpoint of ``pretrain``'s architecture (what
    --use-checkpoint-args reads); the architecture the recipe then trains is the pretraining recipe's."""
    checkpoint = _architecture_checkpoint(pretrain, tmp_path / "mg")
    world_size, argv = _argv(recipe, smoke=False, env={"CKPT_LOAD_DIR": str(checkpoint)})
    args = parse_args(argv, _entry(recipe, argv))
    validate_args(args, world_size)
    _assert_architecture_of(args, pretrain)
    return world_size, args


def _assert_architecture_of(args: argparse.Namespace, pretrain: Path) -> None:
    """The model ``args`` build is the one of the pretraining recipe ``pretrain``."""
    reference = _full_size_args(pretrain)
    architecture = [architecture_settings(transformer_config_from_args(a).to_dict()) for a in (args, reference)]
    assert architecture[0] == architecture[1] and architecture[0]["num_layers"] == reference.num_layers


@pytest.mark.parametrize("recipe", TUNE_RECIPES, ids=_recipe_id)
def test_tune_recipe_flags_pass_validation(recipe: Path, tmp_path: Path) -> None:
    pretrain = recipe.with_name(re.sub(r"^tune_(\w+)_(full|lora|qlora)_ptd", r"pretrain_\1_ptd", recipe.name))
    world_size, args = _validated_on_pretrain_architecture(recipe, pretrain, tmp_path)
    assert args.stage == "sft" and args.is_instruction_dataset and args.finetune and args.use_checkpoint_args
    assert args.variable_seq_lengths and args.sequence_parallel and args.bf16 and world_size == 8
    layout = {"TP": str(args.tensor_model_parallel_size), "PP": str(args.pipeline_model_parallel_size)}
    assert _layout_defaults(_sibling(recipe, "CKPT_LOAD_DIR")) == layout  # the converted checkpoint's layout
    for variable, sibling_variable in (("CKPT_LOAD_DIR", "CKPT_SAVE_DIR"), ("DATA_PATH", "OUTPUT_PREFIX")):
        assert _default(recipe, variable) == _default(_sibling(recipe, variable), sibling_variable)  # what it writes
    data_flags = _tool_flags(_sibling(recipe, "DATA_PATH"))
    assert [args.prompt_type] == data_flags["--prompt-type"]  # the template the data was written with
    method = recipe.stem.split("_")[-2]
    assert bool(args.lora_target_modules) == (method != "full") and args.qlora == (method == "qlora")
    if method != "full":
        _check_adapter_recipe(recipe, args)


LORA_TARGETS = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]


def _check_adapter_recipe(recipe: Path, args: argparse.Namespace) -> None:
    """A LoRA/QLoRA recipe is its full sibling plus the adapters, a higher lr and a save directory of its own."""
    full_recipe = recipe.with_name(re.sub(r"_q?lora_ptd", "_full_ptd", recipe.name))
    assert (args.lora_r, args.lora_alpha, args.lora_target_modules) == (16, 32.0, LORA_TARGETS)
    assert args.lora_dropout is None and not args.lora_load and not args.lora_modules_to_save
    adapter_flags = {"--lora-r", "--lora-alpha", "--lora-target-modules", "--qlora"}
    schedule_flags = {"--lr", "--min-lr", "--save"}
    flags, full = _flags(_argv(recipe, smoke=False)[1]), _flags(_argv(full_recipe, smoke=False)[1])
    assert set(flags) - adapter_flags == set(full)
    assert {flag: values for flag, values in flags.items() if flag not in adapter_flags | schedule_flags} == {
        flag: values for flag, values in full.items() if flag not in schedule_flags}
    for rate in ("--lr", "--min-lr"):
        assert float(flags[rate][0]) >= 10 * float(full[rate][0]), rate
    saves = {_default(path, "CKPT_SAVE_DIR") for path in (recipe, full_recipe, recipe.with_name(
        re.sub(r"_(q?lora)_ptd", lambda match: "_qlora_ptd" if match.group(1) == "lora" else "_lora_ptd", recipe.name)))}
    assert len(saves) == 3  # full, LoRA and QLoRA runs write to their own directories


@pytest.mark.parametrize("recipe", PREFERENCE_RECIPES, ids=_recipe_id)
def test_preference_recipe_flags_pass_validation(recipe: Path, tmp_path: Path) -> None:
    stage = recipe.name.split("_")[0]
    pretrain = recipe.with_name(re.sub(r"^(dpo|orm)_", "pretrain_", recipe.name))
    world_size, args = _validated_on_pretrain_architecture(recipe, pretrain, tmp_path)
    assert transformer_config_from_args(args).value_head == (stage == "orm")  # the reward model's score head
    assert args.stage == stage and args.is_pairwise_dataset and not args.is_instruction_dataset
    assert args.finetune and args.use_checkpoint_args and args.sequence_parallel and args.bf16 and world_size == 8
    tune = _sibling(recipe, "CKPT_LOAD_DIR")  # the SFT run it starts from, in that run's layout
    assert tune.name.startswith("tune_") and _default(recipe, "CKPT_LOAD_DIR") == _default(tune, "CKPT_SAVE_DIR")
    layout = {"TP": str(args.tensor_model_parallel_size), "PP": str(args.pipeline_model_parallel_size)}
    assert _layout_defaults(tune) == layout
    data = _sibling(recipe, "DATA_PATH")
    data_flags = _tool_flags(data)
    assert data.name.endswith("_pairwise.sh") and data_flags["--handler-name"] == ["AlpacaStylePairwiseHandler"]
    assert _default(recipe, "DATA_PATH") == _default(data, "OUTPUT_PREFIX")
    assert [args.prompt_type] == data_flags["--prompt-type"] == [_default(tune, "PROMPT_TYPE")]
    if stage == "dpo":
        assert (args.dpo_loss_type, args.dpo_beta, args.ref_model, args.precompute_ref_log_probs) == ("sigmoid", 0.1,
                                                                                                      None, False)
        checkpoint = args.load  # the architecture checkpoint, also a reference model
        world_size, argv = _argv(recipe, smoke=False, env={"CKPT_LOAD_DIR": checkpoint, "PRECOMPUTE_REF": "1",
                                                           "REF_MODEL": checkpoint})
        args = parse_args(argv, _entry(recipe, argv))
        validate_args(args, world_size)
        assert args.ref_model == checkpoint and args.precompute_ref_log_probs


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny benchmarks of SMOKE=1 evaluate recipes (smoke.py's writers), one folder per task."""
    spec = importlib.util.spec_from_file_location("recipe_smoke", REPO / "examples" / "common" / "smoke.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    root = tmp_path_factory.mktemp("benchmarks")
    for task, write in smoke.BENCHMARKS.items():
        write(str(root / task))
    return root


INFERENCE_RECIPE_NAME = re.compile(rf"(generate|evaluate)_(\w+?)(?:_({'|'.join(EVALUATION_TASKS)}))?_ptd\.sh")
# flags SMOKE=1 may change in a generate/evaluate recipe: the layout, the model and tokenizer, outputs and data;
# expert TP and the uneven stage split go with expert parallelism (EP 1 in the smoke run); fp32 on the CPU
INFERENCE_SHRUNK_FLAGS = {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                          "--expert-model-parallel-size", "--load", "--tokenizer-name-or-path", "--max-new-tokens",
                          "--task-data-path", "--output-file"}
INFERENCE_FULL_ONLY_FLAGS = {"--bf16", "--expert-tensor-parallel-size", "--num-layer-list"}


@pytest.mark.parametrize("recipe", GENERATE_RECIPES + EVALUATE_RECIPES, ids=_recipe_id)
def test_inference_recipe_flags_pass_validation(recipe: Path, tmp_path: Path, benchmarks: Path) -> None:
    """Parsed as inference.py / evaluation.py parse them (placeholders for the training-only flags) over a
    checkpoint of the pretraining recipe's architecture: the model of the family's hf2mcore recipe, loaded in
    its layout (evaluation: PP 1), with its tokenizer; the task's own checks pass; SMOKE=1 keeps the flags."""
    action, model, task = INFERENCE_RECIPE_NAME.fullmatch(recipe.name).groups()
    assert (task is None) == (action == "generate"), recipe.name
    pretrain = recipe.with_name(f"pretrain_{model}_ptd.sh")
    convert = recipe.with_name(f"ckpt_convert_{model}_hf2mcore.sh")
    env = {"CKPT_LOAD_DIR": str(_architecture_checkpoint(pretrain, tmp_path / "mg"))}
    if task:
        env.update(TASK_DATA_PATH=str(benchmarks / task), MAX_EVAL_SAMPLES="1")
    world_size, argv = _argv(recipe, smoke=False, env=env)
    args = validated_generation_args(argv, _entry(recipe, argv), world_size)
    _assert_architecture_of(args, pretrain)
    assert args.use_checkpoint_args and args.bf16 and args.tokenizer_type == "PretrainedFromHF"
    assert args.tokenizer_name_or_path == _default(convert, "CKPT_LOAD_DIR")  # the HF directory it converts
    assert _sibling(recipe, "CKPT_LOAD_DIR") == convert
    converted = {"EP": "1", **_layout_defaults(convert)}
    expected = dict(converted)
    if re.search(r"\bETP=1\b", convert.read_text()):  # whole experts over TP need SP, which decoding cannot split
        expected["TP"] = "1"
        assert args.expert_tensor_parallel_size == 1
    if action == "evaluate":  # evaluation.py runs at PP 1
        expected["PP"] = "1"
    layout = {"TP": str(args.tensor_model_parallel_size), "PP": str(args.pipeline_model_parallel_size),
              "EP": str(args.expert_model_parallel_size)}
    assert layout == expected
    saved = _default(convert, "CKPT_SAVE_DIR")
    if expected == converted:  # what the hf2mcore recipe writes
        assert _default(recipe, "CKPT_LOAD_DIR") == saved
    else:  # the same conversion at another TP/PP, saved beside the other; the comment says how
        for key in ("TP", "PP"):
            saved = re.sub(rf"{key.lower()}\d+", f"{key.lower()}{expected[key]}", saved)
        assert _default(recipe, "CKPT_LOAD_DIR") == saved
        assert f"# {convert.name} run with " in recipe.read_text() and f" CKPT_SAVE_DIR={saved}" in recipe.read_text()
    # one model replica, with as many data-parallel ranks as the expert-parallel layout needs
    assert args.data_parallel_size == expert_dimension(
        args.tensor_model_parallel_size, args.expert_model_parallel_size, args.expert_tensor_parallel_size)
    if action == "generate":
        assert args.task == "greedy" and args.prompt == ["The capital of France is"]
        assert args.max_new_tokens == 256 and args.prompt_file is None
        check_task(args)
    else:
        assert args.task == task and args.max_eval_samples == 1 and args.evaluation_batch_size >= 1
        assert args.allow_code_execution == (task == "human_eval") and args.output_file
        questions = read_benchmark(args)  # the layout (PP 1) and the benchmark's files
        assert len(questions) == len({question.subject for question in questions})  # the first of each subject
    full = _flags(argv)
    smoke_world_size, smoke_argv = _argv(recipe, smoke=True, env={"MAX_EVAL_SAMPLES": "1"} if task else None)
    smoke = _flags(smoke_argv)
    assert set(full) - INFERENCE_FULL_ONLY_FLAGS == set(smoke) - {"--device"}
    changed = INFERENCE_SHRUNK_FLAGS | INFERENCE_FULL_ONLY_FLAGS
    kept = {flag: values for flag, values in full.items() if flag not in changed}
    assert kept == {flag: smoke[flag] for flag in kept}
    tp, pp = int(smoke["--tensor-model-parallel-size"][0]), int(smoke["--pipeline-model-parallel-size"][0])
    assert smoke["--device"] == ["cpu"] and smoke_world_size == tp * pp <= 2
    assert smoke.get("--expert-model-parallel-size", ["1"]) == ["1"]


TUNE_SHRUNK_FLAGS = {"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--seq-length",
                     "--micro-batch-size", "--global-batch-size", "--train-iters", "--save-interval", "--eval-interval",
                     "--eval-iters", "--save", "--load", "--data-path", "--tokenizer-name-or-path"}


@pytest.mark.parametrize("recipe", POSTTRAIN_RECIPES, ids=_recipe_id)
def test_smoke_tune_keeps_its_flags_and_shrinks_sizes(recipe: Path) -> None:
    full, (world_size, smoke_argv) = _flags(_argv(recipe, smoke=False)[1]), _argv(recipe, smoke=True)
    smoke = _flags(smoke_argv)
    assert set(full) - {"--bf16"} == set(smoke) - SMOKE_ONLY_FLAGS
    kept = {flag: values for flag, values in full.items() if flag not in TUNE_SHRUNK_FLAGS | {"--bf16"}}
    assert kept == {flag: smoke[flag] for flag in kept}
    assert smoke["--device"] == ["cpu"] and world_size <= 2
    for size in ("--seq-length", "--train-iters", "--tensor-model-parallel-size"):
        assert int(smoke[size][0]) < int(full[size][0]), size


LONG_CONTEXT_RECIPE = REPO / "examples" / "llama3" / "pretrain_llama31_8b_32k_ptd.sh"
RING_ALGORITHMS = ("megatron_cp_algo", "hybrid_cp_algo")


@pytest.mark.parametrize("algo", ["megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo", "kvallgather_cp_algo"])
def test_long_context_recipe_runs_every_cp_algorithm(algo: str) -> None:
    env = {} if algo == "megatron_cp_algo" else {"CP_ALGO": algo}  # the ring is the recipe's default
    world_size, argv = _argv(LONG_CONTEXT_RECIPE, smoke=False, env=env)
    args = parse_args(argv, _entry(LONG_CONTEXT_RECIPE, argv))
    validate_args(args, world_size)
    assert (args.seq_length, args.context_parallel_size, args.context_parallel_algo) == (32768, 4, algo)
    assert args.use_cp_send_recv_overlap == (algo in RING_ALGORITHMS)
    assert args.ulysses_degree_in_cp == (2 if algo == "hybrid_cp_algo" else None)
    assert (args.recompute_granularity, args.recompute_method, args.recompute_num_layers) == ("full", "uniform", 1)
    assert (args.rotary_base, args.rope_scaling_type, args.num_query_groups) == (500000, "llama3", 8)
    world_size, smoke_argv = _argv(LONG_CONTEXT_RECIPE, smoke=True, env=env)
    smoke = parse_args(smoke_argv, _entry(LONG_CONTEXT_RECIPE, smoke_argv))
    validate_args(smoke, world_size)
    assert (world_size, smoke.context_parallel_size, smoke.context_parallel_algo) == (2, 2, algo)
    assert smoke.use_cp_send_recv_overlap == args.use_cp_send_recv_overlap


def test_sparse_attention_long_context_recipe_keeps_context_parallelism() -> None:
    """DeepSeek-V3.2 at 128k: CP 8 with the MoE layers, DSA and expert parallelism; CP 2 under SMOKE=1."""
    recipe = REPO / "examples" / "deepseek32" / "pretrain_deepseek32_671b_128k_ptd.sh"
    for smoke, expected in ((False, (131072, 8, 32)), (True, (32, 2, 1))):
        world_size, argv = _argv(recipe, smoke=smoke)
        args = parse_args(argv, _entry(recipe, argv))
        validate_args(args, world_size)
        assert (args.seq_length, args.context_parallel_size, args.expert_model_parallel_size) == expected
        assert args.experimental_attention_variant == "dsa" and args.num_experts == 256


def test_recipe_without_cp_args_refuses_cp() -> None:
    run = _run(REPO / "examples" / "mistral" / "pretrain_mistral01_7b_ptd.sh", {"DRY_RUN": "argv", "CP": "2"})
    assert run.returncode != 0 and "CP_ARGS" in run.stderr, run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mistral/pretrain_mistral01_7b_ptd",  # sliding window, GQA, TP=2
                                  "olmoe/pretrain_olmoe_1b_7b_ptd",  # MoE, EP=2, alltoall, grouped GEMM
                                  "llama3/pretrain_llama31_8b_32k_ptd",  # ring CP=2, overlap, full recompute
                                  "deepseek32/pretrain_deepseek32_671b_128k_ptd"])  # DSA + MoE at CP=2
def test_smoke_pretrain_recipe_trains_and_saves(tmp_path: Path, name: str) -> None:
    recipe = REPO / "examples" / f"{name}.sh"
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    losses = [float(loss) for loss in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", log)]
    assert len(losses) == 3 and all(0 < loss < 10 for loss in losses), log[-2000:]
    assert (tmp_path / "smoke" / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


@pytest.mark.slow
@pytest.mark.parametrize("name, files", [("qwen2/ckpt_convert_qwen25_05b_mcore2hf", 4),  # tied, qkv bias: TP2 x PP2
                                         ("mixtral/ckpt_convert_mixtral_8x7b_mcore2hf", 8)])  # TP2 x PP2 x EP2
def test_smoke_checkpoint_round_trip_is_exact(tmp_path: Path, name: str, files: int) -> None:
    recipe = REPO / "examples" / f"{name}.sh"
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "round trip exact" in run.stdout
    mcore = tmp_path / "smoke" / "source" / "mg"
    assert len(list(mcore.rglob("model_optim_rng.pt"))) == files
    assert (tmp_path / "smoke" / "hf" / "config.json").is_file()


@pytest.mark.slow
def test_smoke_tune_recipe_fine_tunes_and_saves(tmp_path: Path) -> None:
    recipe = REPO / "examples" / "gemma2" / "tune_gemma2_9b_full_ptd.sh"  # softcapping, windows, tied, head dim
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    losses = [float(loss) for loss in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", log)]
    assert len(losses) == 3 and all(0 < loss < 10 for loss in losses), log[-2000:]  # assistant tokens trained
    assert "loaded checkpoint" in log and "task sft" in log and "(TP=2, PP=1, CP=1, DP=1)" in log
    assert (tmp_path / "smoke" / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


@pytest.mark.slow
def test_smoke_lora_recipe_trains_and_saves_adapters(tmp_path: Path) -> None:
    recipe = REPO / "examples" / "qwen2" / "tune_qwen25_7b_lora_ptd.sh"  # qkv bias; adapters on TP-split linears
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    losses = [float(loss) for loss in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", log)]
    assert len(losses) == 3 and all(0 < loss < 10 for loss in losses), log[-2000:]
    assert "loaded checkpoint" in log and "task sft" in log and "(TP=2, PP=1, CP=1, DP=1)" in log
    ckpt = tmp_path / "smoke" / "ckpt"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    saved = [torch.load(path, map_location="cpu", weights_only=False) for path in ckpt.rglob("model_optim_rng.pt")]
    assert len(saved) == 2  # one file per TP rank
    for payload in saved:
        names = list(payload["model"])
        assert len(names) == 2 * 4 * 2 and all(".lora_" in name for name in names), names  # A and B, no base
        assert (payload["lora"]["r"], payload["lora"]["alpha"], sorted(payload["lora"]["target_modules"])) == (
            16, 32.0, sorted(LORA_TARGETS))
    # LORA_LOAD resumes the adapters' run (iteration 3 of 3: nothing left) instead of starting over (--finetune)
    env = {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs"), "LORA_LOAD": str(ckpt)}
    resumed = _run(recipe, env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "already at iteration 3 of --train-iters 3" in (tmp_path / "logs" / f"{recipe.stem}.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2/dpo_qwen25_7b_ptd",  # qkv bias; the policy starts as its reference
                                  "llama3/orm_llama31_8b_ptd"])  # llama3 rope scaling; a value head
def test_smoke_preference_recipe_trains_and_saves(tmp_path: Path, name: str) -> None:
    recipe = REPO / "examples" / f"{name}.sh"
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    stage = recipe.name.split("_")[0]
    losses = [float(loss) for loss in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", log)]
    assert len(losses) == 3 and all(0 < loss < 2 for loss in losses), log[-2000:]
    metric = {"dpo": "rewards/accuracies", "orm": "accuracy"}[stage]
    assert len(re.findall(rf"\| {metric}: ([0-9.E+-]+) \|", log)) == 3, log[-2000:]
    if stage == "dpo":
        assert abs(losses[0] - math.log(2)) < 1e-5  # step 1: the policy is its own reference
    assert "loaded checkpoint" in log and f"task {stage}" in log and "(TP=2, PP=1, CP=1, DP=1)" in log
    assert (tmp_path / "smoke" / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


@pytest.mark.slow
def test_smoke_generate_recipe_prints_a_response(tmp_path: Path) -> None:
    recipe = REPO / "examples" / "qwen3_moe" / "generate_qwen3_moe_30b_a3b_ptd.sh"  # MoE, PP 2: stage to stage
    env = {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs"),
           "OUTPUT_FILE": str(tmp_path / "out.jsonl")}
    run = _run(recipe, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    assert "[prompt 0] The capital of France is\n[response 0] " in log, log[-2000:]
    record = json.loads((tmp_path / "out.jsonl").read_text())
    assert record["prompt"] == "The capital of France is" and f"[response 0] {record['response']}" in log
    assert 1 <= len(record["token_ids"]) <= 8  # MAX_NEW_TOKENS 8 under SMOKE=1 (fewer on an end-of-text token)


@pytest.mark.slow
@pytest.mark.parametrize("name, questions", [("llama3/evaluate_llama31_8b_mmlu_ptd", 3),  # TP 2, log-likelihoods
                                             ("qwen2/evaluate_qwen25_7b_gsm8k_ptd", 2),  # TP 2, greedy answers
                                             ("qwen3/evaluate_qwen3_8b_boolq_ptd", 2),
                                             ("llama3/evaluate_llama31_8b_human_eval_ptd", 2)])  # runs the code
def test_smoke_evaluate_recipe_writes_accuracy(tmp_path: Path, name: str, questions: int) -> None:
    recipe = REPO / "examples" / f"{name}.sh"
    task = INFERENCE_RECIPE_NAME.fullmatch(recipe.name).group(3)
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    assert f"evaluating {task}: {questions} questions" in log, log[-2000:]
    report = json.loads((tmp_path / "smoke" / "results" / f"{task}.json").read_text())
    assert report["task"] == task and report["overall"]["total"] == questions
    assert report["overall"]["correct"] == sum(subject["correct"] for subject in report["subjects"].values())
    assert f"evaluation results: {json.dumps(report['overall'])}" in log


def test_grpo_recipes_exist() -> None:
    assert {path.name for path in GRPO_RECIPES} == {"grpo_qwen25_7b_ptd.sh", "grpo_qwen3_8b_ptd.sh"}


@pytest.mark.parametrize("recipe", GRPO_RECIPES, ids=_recipe_id)
def test_grpo_recipe_flags_pass_validation(recipe: Path, tmp_path: Path) -> None:
    """The flags validate over the family's pretrain architecture, in its converted checkpoint's layout,
    without sequence parallelism (rollouts decode one token a step)."""
    pretrain = recipe.with_name(re.sub(r"^grpo_", "pretrain_", recipe.name))
    world_size, args = _validated_on_pretrain_architecture(recipe, pretrain, tmp_path)
    assert args.stage == "grpo" and args.is_instruction_dataset and args.finetune and args.use_checkpoint_args
    assert not args.sequence_parallel and args.bf16 and world_size == 8 and args.num_generations == 8
    assert args.reward_funcs == ["gsm8k_accuracy"] and args.kl_coef > 0 and args.max_new_tokens < args.seq_length
    convert = _sibling(recipe, "CKPT_LOAD_DIR")
    assert convert.name.endswith("_hf2mcore.sh") and _layout_defaults(convert)["TP"] == str(
        args.tensor_model_parallel_size)


def test_smoke_grpo_recipe_trains_and_saves(tmp_path: Path) -> None:
    recipe = REPO / "examples" / "qwen3" / "grpo_qwen3_8b_ptd.sh"
    run = _run(recipe, {"SMOKE": "1", "SMOKE_DIR": str(tmp_path / "smoke"), "LOG_DIR": str(tmp_path / "logs")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    log = (tmp_path / "logs" / f"{recipe.stem}.log").read_text()
    for field in ("reward mean", "reward std", "kl", "clip fraction", "response length", "rollout tokens per second"):
        assert len(re.findall(rf"\| {field}: ([0-9.E+-]+) \|", log)) == 3, (field, log[-2000:])
    assert "task grpo" in log and "(TP=2, PP=1, CP=1, DP=1)" in log
    assert (tmp_path / "smoke" / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"

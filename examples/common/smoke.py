"""Helpers the shell recipes call (examples/common/recipe.sh); not a user entry point.

    python examples/common/smoke.py validate WORLD_SIZE <pretrain_gpt.py flags...>
        check the flags with the training entry's one validation pass (DRY_RUN=1)
    python examples/common/smoke.py hf-model MODEL_TYPE JSON OUT_DIR
        write a tiny random Hugging Face model: transformers' config class of MODEL_TYPE with tiny
        sizes, overridden by the recipe's behaviour fields in JSON (SMOKE=1 checkpoint conversion)
    python examples/common/smoke.py compare HF_DIR_A HF_DIR_B
        fail unless both directories hold the same tensors (names, shapes, values) and the same
        configuration once transformers has loaded it
    python examples/common/smoke.py corpus pretrain|instruction|pairwise OUT.jsonl
        write a tiny corpus (text records, Alpaca-style instruction records, or Alpaca-style preference
        pairs: instruction, input, chosen, rejected)
    python examples/common/smoke.py validate-posttrain WORLD_SIZE <posttrain_gpt.py flags...>
        check the flags with the training entry's validation pass and the stage's own checks (DRY_RUN=1)
    python examples/common/smoke.py posttrain-fixture MODEL_TYPE JSON PROMPT_TYPE TP PP SEQ_LENGTH OUT_DIR [KIND]
        what a SMOKE=1 fine-tuning recipe starts from, in OUT_DIR: a 300-token BPE tokenizer trained on the
        tiny corpus of KIND (instruction, the default, or pairwise) (tokenizer/), the tiny random model of
        hf-model with that vocabulary (hf/), converted to our layout at TP x PP (mg/), and the corpus
        tokenized with PROMPT_TYPE by preprocess_data.py: a packed instruction dataset of SEQ_LENGTH-token
        sequences (data/alpaca_packed_*) or, for pairwise, preference pairs whose replies are cut at
        SEQ_LENGTH tokens (data/pairs_packed_{chosen,rejected}_*), by the production tools
    python examples/common/smoke.py inference-fixture MODEL_TYPE JSON TP PP OUT_DIR [TASK]
        what a SMOKE=1 generate or evaluate recipe starts from, in OUT_DIR: the tokenizer and the tiny model of
        posttrain-fixture (tokenizer/, hf/, mg/ at TP x PP) and, with TASK (an evaluation.py --task), a tiny
        benchmark of that task in its published layout (TASK/: MMLU's {test,dev}/{subject}_{split}.csv, GSM8K's
        test.jsonl and train.jsonl with #### answers, BoolQ's dev.jsonl, HumanEval's HumanEval.jsonl)
    python examples/common/smoke.py validate-inference inference|evaluation WORLD_SIZE <flags...>
        check the flags as inference.py / evaluation.py do before building the model (DRY_RUN=1): the shared
        validation pass with the training-only flags given placeholders, the --load checkpoint's layout (its
        TP/PP/EP must be the flags'), then the entry's own checks (inference.py: the task and prompts;
        evaluation.py: the task, PP 1 and the benchmark's files)
"""
from __future__ import annotations

import csv
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

TINY_HF_SIZES = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
                 "max_position_embeddings": 256}


def validate(world_size: int, argv: List[str]) -> None:
    """parse_args + validate_args + the pretraining data check, as pretrain_gpt.py does before any process."""
    from mindspeed_llm.arguments import ArgumentError, check_pretraining_data, parse_args, validate_args

    try:
        args = parse_args(argv, "pretrain_gpt.py")
        validate_args(args, world_size)
        check_pretraining_data(args)
    except ArgumentError as error:
        sys.exit(f"error: {error}")
    print(f"flags valid: world size {args.world_size}, TP {args.tensor_model_parallel_size}, "
          f"PP {args.pipeline_model_parallel_size}, CP {args.context_parallel_size}, DP {args.data_parallel_size}, "
          f"{args.num_micro_batches} micro-batches per step")


def hf_model(model_type: str, behaviour_json: str, out_dir: str) -> None:
    """Save a seeded random ``AutoModelForCausalLM`` of ``model_type`` with tiny sizes to ``out_dir``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {**TINY_HF_SIZES, **json.loads(behaviour_json)}
    config = AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(0)
    if type(config) in AutoModelForCausalLM._model_mapping:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    else:  # a config class the auto map lacks (Emu3's text model): the registry family's architecture
        import transformers

        from mindspeed_llm.models.registry import family_for_hf_config

        architecture = family_for_hf_config({"model_type": model_type}).architecture
        model = getattr(transformers, architecture)._from_config(config, dtype=torch.float32)
    model.save_pretrained(out_dir)
    print(f"tiny random {model_type} model ({sum(p.numel() for p in model.parameters())} parameters) "
          f"in {out_dir}")


def _tensors(directory: str) -> Dict[str, "torch.Tensor"]:
    from safetensors.torch import load_file

    tensors = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(directory, name)))
    if not tensors:
        sys.exit(f"error: no .safetensors files in {directory}")
    return tensors


def _config_differences(dir_a: str, dir_b: str) -> List[str]:
    """Fields set in ``dir_a``'s config that ``dir_b``'s differs on, once transformers has loaded both
    (it normalises e.g. rope_scaling; a field left unset in ``dir_a``, e.g. a derived head_dim, is skipped)."""
    from transformers import AutoConfig

    a, b = (AutoConfig.from_pretrained(d).to_dict() for d in (dir_a, dir_b))
    ignored = {"_name_or_path", "dtype", "torch_dtype", "transformers_version"}
    return [f"{key}: {a.get(key)!r} != {b.get(key)!r}" for key in sorted(a.keys() | b.keys())
            if key not in ignored and a.get(key) is not None and a.get(key) != b.get(key)]


def compare(dir_a: str, dir_b: str) -> None:
    """Exit non-zero unless the two HF directories hold identical tensors and configurations (the tensors that
    carry no weights, such as MiniMax's stored decays, which the converter recomputes and does not write, aside)."""
    import torch

    from mindspeed_llm.models.registry import IGNORED_HF_TENSORS, family_for_hf_config

    def weights(directory: str) -> Dict[str, Any]:
        """The weights, laid out as the published checkpoints are (transformers saves some in its own layout)."""
        with open(os.path.join(directory, "config.json")) as handle:
            config = json.load(handle)
        tensors = {name: tensor for name, tensor in _tensors(directory).items()
                   if not any(pattern.match(name) for pattern in IGNORED_HF_TENSORS)}
        layout = family_for_hf_config(config).published_layout
        return layout(tensors, config) if layout is not None else tensors

    a, b = weights(dir_a), weights(dir_b)
    if a.keys() != b.keys():
        sys.exit(f"error: tensor names differ: only in {dir_a}: {sorted(a.keys() - b.keys())}; "
                 f"only in {dir_b}: {sorted(b.keys() - a.keys())}")
    different = [name for name in a if a[name].shape != b[name].shape or not torch.equal(a[name], b[name])]
    if different:
        sys.exit(f"error: {len(different)} tensors differ after the round trip, e.g. {different[0]}")
    config_differences = _config_differences(dir_a, dir_b)
    if config_differences:
        sys.exit(f"error: config.json differs after the round trip: {'; '.join(config_differences)}")
    print(f"round trip exact: {len(a)} tensors and the config identical ({dir_a} -> mcore -> {dir_b})")


PRETRAIN_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Tensor parallelism splits each weight matrix across devices.",
    "Pipeline parallelism places consecutive layers on different stages.",
    "A tokenizer turns text into integer ids and back.",
]
INSTRUCTIONS = [
    {"instruction": "Name a prime number.", "input": "", "output": "Seven is a prime number."},
    {"instruction": "Translate to French.", "input": "Good morning", "output": "Bonjour"},
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "2 plus 3 is 5."},
]
PAIRS = [
    {"instruction": "Name a prime number.", "input": "", "chosen": "Seven is a prime number.",
     "rejected": "Eight is a prime number."},
    {"instruction": "Translate to French.", "input": "Good morning", "chosen": "Bonjour", "rejected": "Buenos dias"},
    {"instruction": "Add the numbers.", "input": "2 and 3", "chosen": "2 plus 3 is 5.", "rejected": "2 plus 3 is 6."},
]
# posttrain-fixture per corpus kind: the handler, the dataset's name under data/, the fields the tokenizer learns
FIXTURE_DATA = {"instruction": ("AlpacaStyleInstructionHandler", "alpaca", ("instruction", "output")),
                "pairwise": ("AlpacaStylePairwiseHandler", "pairs", ("instruction", "chosen", "rejected"))}


def corpus(kind: str, out_path: str) -> None:
    """Write a tiny jsonl corpus of ``kind`` (pretrain: text records; instruction: Alpaca records; pairwise:
    Alpaca preference pairs)."""
    if kind == "pretrain":
        records = [{"text": f"{line} ({i})"} for i in range(25) for line in PRETRAIN_LINES]
    elif kind == "instruction":
        records = INSTRUCTIONS * 20
    elif kind == "pairwise":
        records = PAIRS * 20
    else:
        sys.exit(f"error: corpus kind {kind!r}: use pretrain, instruction or pairwise")
    _write_jsonl(out_path, records)


def validate_posttrain(world_size: int, argv: List[str]) -> None:
    """parse_args + validate_args + the stage task's checks, as posttrain.py does before any process."""
    from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
    from mindspeed_llm.posttrain import stage_task

    task_class = stage_task(argv)
    try:
        args = parse_args(argv, task_class.entry)
        validate_args(args, world_size)
        task_class(args).validate(args)
    except ArgumentError as error:
        sys.exit(f"error: {error}")
    print(f"flags valid: --stage {args.stage}, world size {args.world_size}, TP {args.tensor_model_parallel_size}, "
          f"PP {args.pipeline_model_parallel_size}, DP {args.data_parallel_size}, {args.num_layers} layers from "
          f"{args.load}")


def posttrain_fixture(model_type: str, behaviour_json: str, prompt_type: str, tp: int, pp: int, seq_length: int,
                      out_dir: str, kind: str = "instruction") -> None:
    """Tokenizer, tiny model (HF and converted) and instruction (or pairwise) dataset of a SMOKE=1 fine-tuning
    recipe."""
    from tools import preprocess_data

    if kind not in FIXTURE_DATA:
        sys.exit(f"error: posttrain-fixture data kind {kind!r}: use {' or '.join(FIXTURE_DATA)}")
    handler, dataset_name, _ = FIXTURE_DATA[kind]
    data, tokenizer_dir = model_fixture(model_type, behaviour_json, tp, pp, out_dir, kind)
    _checked("preprocess_data", preprocess_data.main(
        ["--input", data, "--handler-name", handler, "--prompt-type", prompt_type,
         "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", tokenizer_dir,
         "--output-prefix", os.path.join(out_dir, "data", dataset_name), "--seq-length", str(seq_length)]))


def model_fixture(model_type: str, behaviour_json: str, tp: int, pp: int, out_dir: str,
                  kind: str = "instruction") -> Tuple[str, str]:
    """The tiny corpus of ``kind`` (corpus.jsonl), a 300-token BPE tokenizer trained on it (tokenizer/), the tiny
    random model of ``model_type`` with that vocabulary (hf/) and its conversion to our layout at TP x PP (mg/),
    in ``out_dir``; (the corpus path, the tokenizer directory)."""
    from tools import convert_ckpt, train_tokenizer
    from transformers import AutoTokenizer

    data = os.path.join(out_dir, "corpus.jsonl")
    corpus(kind, data)
    tokenizer_dir = os.path.join(out_dir, "tokenizer")
    _checked("train_tokenizer", train_tokenizer.main(["--input", data, "--output-dir", tokenizer_dir,
                                                      "--vocab-size", "300", "--json-keys", *FIXTURE_DATA[kind][2]]))
    vocab = len(AutoTokenizer.from_pretrained(tokenizer_dir))
    hf_model(model_type, json.dumps({**json.loads(behaviour_json), "vocab_size": vocab}), os.path.join(out_dir, "hf"))
    _checked("convert_ckpt", convert_ckpt.main(
        ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", os.path.join(out_dir, "hf"),
         "--save-dir", os.path.join(out_dir, "mg"), "--target-tensor-parallel-size", str(tp),
         "--target-pipeline-parallel-size", str(pp), "--overwrite"]))  # the fixture's own mg/, rebuilt each run
    return data, tokenizer_dir


def _write_jsonl(path: str, records: List[Dict[str, Any]]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in records)


def _write_csv(path: str, rows: List[List[str]]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(rows)


def _mmlu(root: str) -> None:
    """MMLU's {test,dev}/{subject}_{split}.csv (question, four choices, answer letter; no header)."""
    for subject, rows in (("astronomy", [["Which body orbits the Earth?", "The Moon", "Mars", "The Sun", "Venus", "A"],
                                         ["Which planet is largest?", "Mars", "Jupiter", "Venus", "Earth", "B"]]),
                          ("arithmetic", [["What is 2 + 3?", "4", "6", "5", "7", "C"]])):
        _write_csv(os.path.join(root, "test", f"{subject}_test.csv"), rows)
        _write_csv(os.path.join(root, "dev", f"{subject}_dev.csv"), [["What is 1 + 1?", "2", "3", "4", "5", "A"]])


def _gsm8k(root: str) -> None:
    """GSM8K's test.jsonl and train.jsonl (the few-shot examples): question, reasoning ending in ``#### N``."""
    _write_jsonl(os.path.join(root, "test.jsonl"),
                 [{"question": "Tom has 3 apples and buys 4 more. How many apples does he have?",
                   "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
                  {"question": "A box holds 12 pens and 2 are sold. How many remain?",
                   "answer": "12 - 2 = 10\n#### 10"}])
    _write_jsonl(os.path.join(root, "train.jsonl"), [{"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}])


def _boolq(root: str) -> None:
    """BoolQ's dev.jsonl: question, passage, answer (true/false)."""
    _write_jsonl(os.path.join(root, "dev.jsonl"),
                 [{"question": "is the sky blue", "passage": "On a clear day the sky is blue.", "answer": True},
                  {"question": "is fire cold", "passage": "Fire is hot.", "answer": False}])


def _human_eval(root: str) -> None:
    """HumanEval's HumanEval.jsonl: task_id, prompt, test (a check function), entry_point."""
    _write_jsonl(os.path.join(root, "HumanEval.jsonl"),
                 [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n",
                   "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"},
                  {"task_id": "HumanEval/1", "prompt": "def negate(x):\n",
                   "test": "def check(candidate):\n    assert candidate(4) == -4\n", "entry_point": "negate"}])


# inference-fixture's benchmarks: evaluation.py --task -> the writer of a tiny copy in the published layout
BENCHMARKS: Dict[str, Callable[[str], None]] = {"mmlu": _mmlu, "gsm8k": _gsm8k, "boolq": _boolq,
                                                "human_eval": _human_eval}


def inference_fixture(model_type: str, behaviour_json: str, tp: int, pp: int, out_dir: str,
                      task: Optional[str] = None) -> None:
    """Tokenizer and tiny model (HF and converted) of a SMOKE=1 generate recipe; with ``task``, also the tiny
    benchmark of an evaluate recipe in ``out_dir``/``task``."""
    if task is not None and task not in BENCHMARKS:
        sys.exit(f"error: inference-fixture has no tiny benchmark of --task {task}; use {', '.join(BENCHMARKS)}")
    model_fixture(model_type, behaviour_json, tp, pp, out_dir)
    if task is not None:
        BENCHMARKS[task](os.path.join(out_dir, task))
        print(f"tiny {task} benchmark in {os.path.join(out_dir, task)}")


def validate_inference(entry: str, world_size: int, argv: List[str]) -> None:
    """The flag checks inference.py (``entry`` inference) or evaluation.py (evaluation) makes before it builds the
    model: the shared validation pass over the flags with placeholders for the training-only ones, then the
    entry's own (the task and prompts; the benchmark's layout and files)."""
    from core import checkpointing
    from mindspeed_llm.arguments import ArgumentError
    from mindspeed_llm.evaluation.errors import EvaluationError
    from mindspeed_llm.inference.loading import validated_generation_args

    if entry not in ("inference", "evaluation"):
        sys.exit(f"error: validate-inference {entry!r}: use inference or evaluation")
    try:
        args = validated_generation_args(argv, f"{entry}.py", world_size)
        path = checkpointing.read_checkpoint_settings(args.load)[0]  # the first rank's file, memory-mapped
        checkpointing.check_layout(checkpointing.map_file(path), path, args.tensor_model_parallel_size,
                                   args.pipeline_model_parallel_size, 1, args.expert_model_parallel_size,
                                   args.expert_tensor_parallel_size or args.tensor_model_parallel_size)
        if entry == "evaluation":
            from mindspeed_llm.evaluation.runner import read_benchmark

            questions = f", {len(read_benchmark(args))} questions of {args.task}"
        else:
            from inference import check_task

            check_task(args)
            questions = f", --task {args.task}"
    except (ArgumentError, EvaluationError, checkpointing.CheckpointError, ValueError) as error:
        sys.exit(f"error: {error}")
    print(f"flags valid: world size {args.world_size}, TP {args.tensor_model_parallel_size}, "
          f"PP {args.pipeline_model_parallel_size}, {args.num_layers} layers from {args.load}{questions}")


def _checked(tool: str, code: int) -> None:
    if code != 0:
        sys.exit(f"error: {tool} failed (exit code {code}); see above")


def main(argv: List[str]) -> None:
    commands = {"validate": lambda a: validate(int(a[0]), a[1:]),
                "hf-model": lambda a: hf_model(a[0], a[1], a[2]),
                "compare": lambda a: compare(a[0], a[1]),
                "corpus": lambda a: corpus(a[0], a[1]),
                "validate-posttrain": lambda a: validate_posttrain(int(a[0]), a[1:]),
                "posttrain-fixture": lambda a: posttrain_fixture(a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]),
                                                                 *a[6:8]),
                "inference-fixture": lambda a: inference_fixture(a[0], a[1], int(a[2]), int(a[3]), *a[4:6]),
                "validate-inference": lambda a: validate_inference(a[0], int(a[1]), a[2:])}
    if not argv or argv[0] not in commands:
        sys.exit(f"usage: smoke.py {{{'|'.join(commands)}}} ...")
    commands[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])

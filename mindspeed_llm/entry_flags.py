"""The flag groups each entry point reads besides the shared ones, and the table that composes them.

Every training and generation entry parses the shared groups of :mod:`mindspeed_llm.arguments` (the model
config table's groups, training, learning rate, checkpointing, precision, distributed, data, logging,
tokenizer, pipeline layout, torch.compile) plus its own row of :data:`ENTRY_GROUPS`:

======================================  ================================================================
``pretrain_gpt.py``                     LoRA
``posttrain.py --stage sft``            post-training data, prompt template, LoRA
``posttrain.py --stage dpo``            ... pairwise data, DPO, reference model, LoRA
``posttrain.py --stage simpo``          ... pairwise data, SimPO, LoRA
``posttrain.py --stage orm``            ... pairwise data, LoRA
``posttrain.py --stage grpo``           ... GRPO, sampling, reference model, LoRA
``inference.py``                        prompt template, sampling, generation
``evaluation.py``                       prompt template, sampling, generation, evaluation
======================================  ================================================================

A training task names its row (``TrainingTask.entry``). A flag of another entry is then argparse's
"unrecognized arguments", and :func:`flag_owners` (from this same table) names the entries that have it:
``error: unrecognized arguments: --temperature 0.7 (--temperature is a flag of inference.py, evaluation.py,
posttrain.py --stage grpo)``. The checks of these groups live with the code that reads them (the tasks,
``mindspeed_llm/inference/flags.py``, ``mindspeed_llm/evaluation/flags.py``).
"""
from __future__ import annotations

import argparse
import functools
from typing import Any, Callable, Dict, FrozenSet, Optional, Tuple

from mindspeed_llm.data.templates import PROMPT_TYPES
from mindspeed_llm.flags import FlagParser

FlagGroup = Callable[[argparse.ArgumentParser], None]  # adds one group of flags to a parser

PRETRAIN = "pretrain_gpt.py"
INFERENCE = "inference.py"
EVALUATION = "evaluation.py"
POSTTRAIN_STAGES = ("sft", "dpo", "simpo", "orm", "grpo")  # mindspeed_llm/posttrain STAGES
GRPO_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")  # the losses of mindspeed_llm/posttrain/grpo/loss.py
LORA_MODULES_TO_SAVE = ("word_embeddings", "output_layer")
INFERENCE_TASKS = ("greedy", "do_sample", "beam_search", "chat")
EVALUATION_TASKS = ("mmlu", "cmmlu", "ceval", "gsm8k", "boolq", "bbh", "agieval", "hellaswag", "human_eval")


def posttrain_entry(stage: str) -> str:
    """The table's name of a post-training stage: ``posttrain.py --stage dpo``."""
    return f"posttrain.py --stage {stage}"


def add_lora_args(parser: argparse.ArgumentParser) -> None:
    """LoRA's and QLoRA's flags (pretraining and every post-training stage)."""
    group = parser.add_argument_group("LoRA")
    group.add_argument("--lora-target-modules", nargs="*", default=[], metavar="NAME",
                       help="train LoRA adapters on these linears (linear_qkv linear_proj linear_fc1 linear_fc2), "
                            "the base frozen (core/tensor_parallel/lora.py)")
    group.add_argument("--lora-r", type=int, default=None, help="LoRA rank (default 16)")
    group.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha; scaling alpha/r (default 32)")
    group.add_argument("--lora-dropout", type=float, default=None, help="dropout on the adapters' input (default 0)")
    group.add_argument("--lora-load", type=str, default=None, metavar="DIR",
                       help="resume the adapters (and optimizer, iteration) from this adapter checkpoint")
    group.add_argument("--lora-modules-to-save", nargs="*", default=[], choices=LORA_MODULES_TO_SAVE,
                       help="modules trained fully beside the adapters (and saved with them)")
    group.add_argument("--qlora", action="store_true",
                       help="QLoRA: store the --lora-target-modules base linears as NF4 (blocksize 64, double "
                            "quantisation 256) once the base is loaded (mindspeed_llm/transforms/qlora.py)")
    group.add_argument("--qlora-save-dequantize", action="store_true",
                       help="QLoRA: --save writes the merged model (dequantised NF4 base plus the adapters) as a "
                            "plain checkpoint instead of the adapters")


def add_prompt_type_args(parser: argparse.ArgumentParser) -> None:
    """The prompt template (post-training checks it against the dataset's; generation wraps prompts in it)."""
    group = parser.add_argument_group("prompt template")
    group.add_argument("--prompt-type", choices=PROMPT_TYPES, default=None,
                       help="the template preprocess_data.py --prompt-type tokenized the data with; every stage "
                            "checks it against the one the dataset records (templates act at preprocessing only); "
                            "inference.py and evaluation.py wrap their prompts in it")


def add_posttrain_args(parser: argparse.ArgumentParser) -> None:
    """``--stage`` and the instruction-data flags every post-training stage parses."""
    group = parser.add_argument_group("post-training (posttrain.py)")
    group.add_argument("--stage", choices=POSTTRAIN_STAGES, default=None,
                       help="posttrain.py: what to train (sft: instruction tuning on packed data)")
    group.add_argument("--is-instruction-dataset", action="store_true",
                       help="--data-path is an instruction dataset (preprocess_data.py's instruction handlers)")
    group.add_argument("--no-pad-to-seq-lengths", action="store_true",
                       help="SFT: pad each micro-batch only to its longest sample, rounded up to "
                            "--pad-to-multiple-of (pipeline stages exchange shapes: implies --variable-seq-lengths)")
    group.add_argument("--pad-to-multiple-of", type=int, default=8,
                       help="SFT with --no-pad-to-seq-lengths or --variable-seq-lengths: round each micro-batch's "
                            "length up to a multiple of this (and of what CP and SP need)")
    group.add_argument("--full-shuffle-instruction-dataset", action="store_true",
                       help="SFT: shuffle the sample order across epochs too (default: one permutation per epoch)")


def add_pairwise_data_args(parser: argparse.ArgumentParser) -> None:
    """The preference-pair data of --stage dpo, simpo and orm."""
    group = parser.add_argument_group("pairwise data")
    group.add_argument("--is-pairwise-dataset", action="store_true",
                       help="--data-path is a pairwise (chosen/rejected) dataset (preprocess_data.py's pairwise "
                            "handlers); for --stage dpo, simpo and orm")


def add_reference_args(parser: argparse.ArgumentParser) -> None:
    """The frozen reference model of --stage dpo and grpo."""
    group = parser.add_argument_group("reference model")
    group.add_argument("--ref-model", type=str, default=None,
                       help="DPO (and GRPO with --kl-coef): the reference model's checkpoint directory (ours; "
                            "default: the initial policy)")


def add_dpo_args(parser: argparse.ArgumentParser) -> None:
    """DPO's flags (--stage dpo)."""
    group = parser.add_argument_group("DPO")
    group.add_argument("--dpo-loss-type", choices=("sigmoid", "hinge", "ipo"), default="sigmoid",
                       help="DPO loss: sigmoid (DPO), hinge (SLiC) or ipo (IPO, on length-normalised log-probs)")
    group.add_argument("--dpo-beta", type=float, default=0.1, help="DPO: the KL weight beta")
    group.add_argument("--dpo-label-smoothing", type=float, default=0.0,
                       help="DPO sigmoid loss: the assumed share of flipped preference labels (cDPO), in [0, 0.5)")
    group.add_argument("--pref-ftx", type=float, default=0.0,
                       help="DPO: add this weight times the chosen reply's mean token cross-entropy (an SFT term)")
    group.add_argument("--precompute-ref-log-probs", action="store_true",
                       help="DPO: compute the reference log-probs of the whole training set once, before training "
                            "(no reference forward during training)")


def add_simpo_args(parser: argparse.ArgumentParser) -> None:
    """SimPO's flags (--stage simpo)."""
    group = parser.add_argument_group("SimPO")
    group.add_argument("--simpo-beta", type=float, default=2.5, help="SimPO: the reward scale beta")
    group.add_argument("--gamma-beta-ratio", type=float, default=1.4,
                       help="SimPO: the target reward margin gamma divided by beta")
    group.add_argument("--simpo-loss-type", choices=("sigmoid", "hinge"), default="sigmoid", help="SimPO loss")
    group.add_argument("--simpo-label-smoothing", type=float, default=0.0,
                       help="SimPO sigmoid loss: the assumed share of flipped preference labels, in [0, 0.5)")


def add_grpo_args(parser: argparse.ArgumentParser) -> None:
    """GRPO's own flags (--stage grpo; its rollouts also read the sampling group)."""
    group = parser.add_argument_group("GRPO")
    group.add_argument("--num-generations", type=int, default=8,
                       help="GRPO: completions sampled per prompt (a group; advantages are relative within it)")
    group.add_argument("--num-iterations", type=int, default=1,
                       help="GRPO: optimizer steps on each rollout batch (the rollout policy's log-probs kept)")
    group.add_argument("--clip-ratio", type=float, default=0.2,
                       help="GRPO: the ratio is clipped to [1 - this, 1 + --clip-ratio-high]")
    group.add_argument("--clip-ratio-high", type=float, default=None,
                       help="GRPO: the upper clip epsilon (DAPO's decoupled clip; default --clip-ratio)")
    group.add_argument("--kl-coef", type=float, default=0.0,
                       help="GRPO: weight of the k3 KL to the reference (--ref-model, else the initial policy); "
                            "0 builds no reference")
    group.add_argument("--loss-type", choices=GRPO_LOSS_TYPES, default="grpo",
                       help="GRPO token aggregation: grpo (per sequence, then mean), bnpo (tokens of the "
                            "micro-batch), dr_grpo (/ rows x --max-new-tokens), dapo (tokens of the global batch)")
    group.add_argument("--reward-funcs", nargs="+", default=["gsm8k_accuracy"], metavar="NAME",
                       help="GRPO: rewards summed per completion: gsm8k_accuracy, format, or module:function")
    group.add_argument("--reward-weights", nargs="+", type=float, default=None, metavar="W",
                       help="GRPO: a weight per reward (--reward-funcs, then --reward-model); default 1 each")
    group.add_argument("--reward-model", type=str, default=None, metavar="DIR",
                       help="GRPO: a --stage orm checkpoint of the policy's architecture whose score of each "
                            "completion is one more reward")
    group.add_argument("--scale-rewards", choices=("group", "none"), default="group",
                       help="GRPO: divide each group's centred rewards by its std (group) or not (none: Dr. GRPO)")


class _Repeatable(argparse.Action):
    """A repeatable flag: every use adds its value to a new list (argparse's ``append`` would extend the
    placeholder :func:`_explicit_dests` probes with)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        current = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, (list(current) if isinstance(current, list) else []) + [values])


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    """How completions are sampled: inference.py, evaluation.py and GRPO's rollouts."""
    group = parser.add_argument_group("sampling")
    group.add_argument("--max-new-tokens", type=int, default=256,
                       help="generate at most this many tokens a prompt (evaluation.py: gsm8k, bbh, human_eval)")
    group.add_argument("--top-k", type=int, default=0, help="do_sample: keep the k most probable tokens (0: all)")
    group.add_argument("--top-p", type=float, default=1.0,
                       help="do_sample: keep the most probable tokens up to this probability mass, in (0, 1]")
    group.add_argument("--temperature", type=float, default=1.0, help="do_sample: divide the logits by this")


def add_generation_args(parser: argparse.ArgumentParser) -> None:
    """inference.py's flags (--task, --output-file also evaluation.py's)."""
    group = parser.add_argument_group("generation")
    group.add_argument("--task", type=str, default=None,
                       help=f"inference.py: {'|'.join(INFERENCE_TASKS)} (chat: an interactive loop over stdin); "
                            f"evaluation.py: the benchmark, {'|'.join(EVALUATION_TASKS)}")
    group.add_argument("--repetition-penalty", type=float, default=1.0,
                       help="divide (multiply when negative) the logits of tokens already in the row by this "
                            "(Hugging Face's rule; 1: off)")
    group.add_argument("--num-beams", type=int, default=4, help="beam_search: the beams kept per prompt")
    group.add_argument("--stop-strings", nargs="*", default=[], metavar="TEXT",
                       help="end a response at the first of these strings (besides the EOS token)")
    group.add_argument("--prompt", action=_Repeatable, default=[], metavar="TEXT",
                       help="a prompt to complete (repeatable)")
    group.add_argument("--prompt-file", type=str, default=None, metavar="FILE",
                       help="jsonl with a 'prompt' field per line: prompts to complete")
    group.add_argument("--output-file", type=str, default=None, metavar="FILE",
                       help="inference.py: write jsonl: prompt, response and token_ids (the generated ids) per "
                            "prompt; evaluation.py: the per-subject and overall accuracy as JSON (a directory: "
                            "{task}.json in it)")
    group.add_argument("--hf-chat-template", action="store_true",
                       help="wrap prompts in the tokenizer's own chat template (as --prompt-type hf)")
    group.add_argument("--history-turns", type=int, default=3,
                       help="chat: how many earlier turns the prompt keeps")


def add_evaluation_args(parser: argparse.ArgumentParser) -> None:
    """evaluation.py's own flags (it also reads --task, --max-new-tokens and --output-file)."""
    group = parser.add_argument_group("evaluation")
    group.add_argument("--task-data-path", nargs="*", default=[], metavar="DIR",
                       help="evaluation.py: the benchmark's directory (or files) in its published layout")
    group.add_argument("--evaluation-batch-size", type=int, default=1,
                       help="evaluation.py: prompts per forward pass")
    group.add_argument("--max-eval-samples", type=int, default=None,
                       help="evaluation.py: score at most this many samples per subject (file)")
    group.add_argument("--no-chat-template", action="store_true",
                       help="evaluation.py: plain prompts even when the tokenizer has a chat template")
    group.add_argument("--chain-of-thought", action="store_true",
                       help="evaluation.py: gsm8k and bbh prompts ask for step-by-step reasoning before the answer")
    group.add_argument("--eval-language", choices=("en", "zh"), default=None,
                       help="evaluation.py mmlu, cmmlu, ceval: the language of the exam's instruction and answer cue "
                            "(default: the benchmark's own, English for mmlu, Chinese for cmmlu and ceval)")
    group.add_argument("--allow-code-execution", action="store_true",
                       help="evaluation.py human_eval: run the generated code (a subprocess without network, "
                            "with a timeout)")


_POSTTRAIN = (add_posttrain_args, add_prompt_type_args)
# entry -> the groups it parses besides the shared ones (the one table: parsers and hints come from it)
ENTRY_GROUPS: Dict[str, Tuple[FlagGroup, ...]] = {
    PRETRAIN: (add_lora_args,),
    INFERENCE: (add_prompt_type_args, add_sampling_args, add_generation_args),
    EVALUATION: (add_prompt_type_args, add_sampling_args, add_generation_args, add_evaluation_args),
    posttrain_entry("sft"): _POSTTRAIN + (add_lora_args,),
    posttrain_entry("dpo"): _POSTTRAIN + (add_pairwise_data_args, add_dpo_args, add_reference_args, add_lora_args),
    posttrain_entry("simpo"): _POSTTRAIN + (add_pairwise_data_args, add_simpo_args, add_lora_args),
    posttrain_entry("orm"): _POSTTRAIN + (add_pairwise_data_args, add_lora_args),
    posttrain_entry("grpo"): _POSTTRAIN + (add_grpo_args, add_sampling_args, add_reference_args, add_lora_args),
}


def every_group() -> Tuple[FlagGroup, ...]:
    """The groups of all entries, each once, in the table's order (for callers that need every flag)."""
    return tuple(dict.fromkeys(group for groups in ENTRY_GROUPS.values() for group in groups))


@functools.lru_cache(maxsize=None)
def entry_options(entry: str) -> FrozenSet[str]:
    """The option strings ``entry``'s own groups add (the shared groups' are every entry's)."""
    scratch = FlagParser(add_help=False)
    for add in ENTRY_GROUPS[entry]:
        add(scratch)
    return frozenset(option for action in scratch._actions for option in action.option_strings)


def flag_owners(option: str) -> Optional[str]:
    """The entries that have ``option``, as a user types them (``inference.py, posttrain.py --stage grpo``;
    ``posttrain.py`` when every stage has it); None when no entry has it."""
    owners = [entry for entry in ENTRY_GROUPS if option in entry_options(entry)]
    stages = [entry.rsplit(" ", 1)[1] for entry in owners if entry.startswith("posttrain.py")]
    names = [entry for entry in owners if not entry.startswith("posttrain.py")]
    if stages:
        names.append("posttrain.py" if len(stages) == len(POSTTRAIN_STAGES)
                     else f"posttrain.py --stage {', '.join(stages)}")
    return ", ".join(names) or None

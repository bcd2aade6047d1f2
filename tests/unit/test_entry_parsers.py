"""Each entry point parses its own flags: the shared groups plus its row of ``entry_flags.ENTRY_GROUPS``.

A flag of another entry is argparse's "unrecognized arguments" with a hint naming the entries that have it,
on the command line and as a ``--yaml-cfg`` key; a flag no entry has keeps argparse's plain message. The
flags each entry accepts beyond the shared ones are written out below: they are the flags each entry took
without an error before the entries had parsers of their own (pretraining refused the post-training flags
and the stage flags needed their ``--stage``; training refused inference.py's and evaluation.py's except
GRPO's sampling flags), except that inference.py and evaluation.py no longer take, and ignore, the
post-training flags (``--stage``, ``--is-instruction-dataset``, ...), inference.py no longer takes
evaluation.py's, and LoRA's (which they refused by hand) are now another entry's.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Set

import pytest

from mindspeed_llm import entry_flags
from mindspeed_llm.arguments import ArgumentError, add_shared_args, all_flags_parser, build_parser, parse_args
from mindspeed_llm.entry_flags import ENTRY_GROUPS, EVALUATION, INFERENCE, PRETRAIN, posttrain_entry
from mindspeed_llm.flags import FlagParser

LORA = {"--lora-target-modules", "--lora-r", "--lora-alpha", "--lora-dropout", "--lora-load", "--lora-modules-to-save",
        "--qlora", "--qlora-save-dequantize"}
POSTTRAIN = {"--stage", "--is-instruction-dataset", "--no-pad-to-seq-lengths", "--pad-to-multiple-of",
             "--full-shuffle-instruction-dataset", "--prompt-type"}
PAIRWISE = {"--is-pairwise-dataset"}
DPO = {"--dpo-loss-type", "--dpo-beta", "--dpo-label-smoothing", "--pref-ftx", "--precompute-ref-log-probs",
       "--ref-model"}
SIMPO = {"--simpo-beta", "--gamma-beta-ratio", "--simpo-loss-type", "--simpo-label-smoothing"}
SAMPLING = {"--max-new-tokens", "--top-k", "--top-p", "--temperature"}
GRPO = {"--num-generations", "--num-iterations", "--clip-ratio", "--clip-ratio-high", "--kl-coef", "--loss-type",
        "--reward-funcs", "--reward-weights", "--reward-model", "--scale-rewards", "--ref-model"} | SAMPLING
GENERATION = {"--prompt-type", "--task", "--repetition-penalty", "--num-beams", "--stop-strings", "--prompt",
              "--prompt-file", "--output-file", "--hf-chat-template", "--history-turns"} | SAMPLING
EVALUATION_ONLY = {"--task-data-path", "--evaluation-batch-size", "--max-eval-samples", "--no-chat-template",
                   "--chain-of-thought", "--eval-language", "--allow-code-execution"}
# entry -> the flags it accepts besides the shared groups' (written out: the table must give exactly these)
EXPECTED_OWN_FLAGS: Dict[str, Set[str]] = {
    PRETRAIN: LORA,
    posttrain_entry("sft"): POSTTRAIN | LORA,
    posttrain_entry("dpo"): POSTTRAIN | PAIRWISE | DPO | LORA,
    posttrain_entry("simpo"): POSTTRAIN | PAIRWISE | SIMPO | LORA,
    posttrain_entry("orm"): POSTTRAIN | PAIRWISE | LORA,
    posttrain_entry("grpo"): POSTTRAIN | GRPO | LORA,
    INFERENCE: GENERATION,
    EVALUATION: GENERATION | EVALUATION_ONLY,
}


def _options(parser: argparse.ArgumentParser) -> Set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _shared_options() -> Set[str]:
    parser = FlagParser()
    add_shared_args(parser)
    return _options(parser)


def _example(action: argparse.Action) -> List[str]:
    """The flag with a value its type and choices accept."""
    if action.nargs == 0:
        return [action.option_strings[0]]
    if action.choices:
        return [action.option_strings[0], str(next(iter(action.choices)))]
    return [action.option_strings[0], {int: "3", float: "0.5"}.get(action.type, "somewhere")]


def _parses(entry: str, argv: List[str]) -> bool:
    try:
        build_parser(entry).parse_args(argv)
    except ArgumentError as error:
        assert str(error).startswith("unrecognized arguments: "), error
        return False
    return True


def test_the_table_gives_each_entry_exactly_its_flags() -> None:
    assert set(ENTRY_GROUPS) == set(EXPECTED_OWN_FLAGS)
    shared = _shared_options()
    for entry, own in EXPECTED_OWN_FLAGS.items():
        assert set(entry_flags.entry_options(entry)) - {"-h", "--help"} == own, entry
        assert _options(build_parser(entry)) == shared | own | {"-h", "--help"}, entry


def test_every_flag_parses_in_exactly_the_entries_that_have_it() -> None:
    """Each flag of any entry, given alone to each entry's parser: accepted where the expected list has it."""
    shared = _shared_options()
    union = all_flags_parser()
    for action in union._actions:
        if not action.option_strings or action.option_strings[0] in shared | {"-h"}:
            continue
        flag = action.option_strings[0]
        accepted = {entry for entry in EXPECTED_OWN_FLAGS if _parses(entry, _example(action))}
        assert accepted == {entry for entry, own in EXPECTED_OWN_FLAGS.items() if flag in own}, flag


def test_the_union_is_every_entry_flag_once() -> None:
    union = _options(all_flags_parser())
    assert union == _shared_options() | set().union(*EXPECTED_OWN_FLAGS.values()) | {"-h", "--help"}


def test_the_tasks_name_their_rows() -> None:
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.pretrain_task import PretrainTask

    assert tuple(STAGES) == entry_flags.POSTTRAIN_STAGES
    assert PretrainTask.entry == PRETRAIN
    for stage, task in STAGES.items():
        assert task.entry == posttrain_entry(stage), stage


@pytest.mark.parametrize("entry, argv, message", [
    (PRETRAIN, ["--dpo-beta", "0.2"], "unrecognized arguments: --dpo-beta 0.2 (--dpo-beta is a flag of posttrain.py "
                                      "--stage dpo)"),
    (PRETRAIN, ["--stage", "sft"], "unrecognized arguments: --stage sft (--stage is a flag of posttrain.py)"),
    (posttrain_entry("sft"), ["--temperature", "0.7"],
     "unrecognized arguments: --temperature 0.7 (--temperature is a flag of inference.py, evaluation.py, "
     "posttrain.py --stage grpo)"),
    (posttrain_entry("dpo"), ["--simpo-beta", "2"],
     "unrecognized arguments: --simpo-beta 2 (--simpo-beta is a flag of posttrain.py --stage simpo)"),
    (posttrain_entry("grpo"), ["--num-beams", "2", "--dpo-beta=0.2"],
     "unrecognized arguments: --num-beams 2 --dpo-beta=0.2 (--num-beams is a flag of inference.py, evaluation.py; "
     "--dpo-beta is a flag of posttrain.py --stage dpo)"),
    (posttrain_entry("orm"), ["--ref-model", "x"],
     "unrecognized arguments: --ref-model x (--ref-model is a flag of posttrain.py --stage dpo, grpo)"),
    (INFERENCE, ["--lora-r", "8", "--lora-alpha", "16"],
     "unrecognized arguments: --lora-r 8 --lora-alpha 16 (--lora-r, --lora-alpha are flags of pretrain_gpt.py, "
     "posttrain.py)"),
    (INFERENCE, ["--task-data-path", "mmlu"],
     "unrecognized arguments: --task-data-path mmlu (--task-data-path is a flag of evaluation.py)"),
    (EVALUATION, ["--kl-coef", "0.1"],
     "unrecognized arguments: --kl-coef 0.1 (--kl-coef is a flag of posttrain.py --stage grpo)"),
])
def test_a_flag_of_another_entry_names_that_entry(entry: str, argv: List[str], message: str) -> None:
    with pytest.raises(ArgumentError) as error:
        build_parser(entry).parse_args(argv)
    assert str(error.value) == message


def test_a_flag_no_entry_has_keeps_argparse_message() -> None:
    with pytest.raises(ArgumentError) as error:
        build_parser(PRETRAIN).parse_args(["--no-such-flag", "3", "--temperature", "1"])
    assert str(error.value) == ("unrecognized arguments: --no-such-flag 3 --temperature 1 (--temperature is a flag "
                                "of inference.py, evaluation.py, posttrain.py --stage grpo)")
    with pytest.raises(ArgumentError) as error:
        build_parser(INFERENCE).parse_args(["--no-such-flag"])
    assert str(error.value) == "unrecognized arguments: --no-such-flag"


def test_grpo_reads_the_sampling_flags_and_inference_the_training_placeholders() -> None:
    assert build_parser(posttrain_entry("grpo")).parse_args(["--temperature", "0.7"]).temperature == 0.7
    assert build_parser(INFERENCE).parse_args(["--lr", "0.0", "--train-iters", "1"]).lr == 0.0


def test_yaml_keys_of_another_entry_name_it(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("num-layers: 2\ntemperature: 0.7\n")
    with pytest.raises(ArgumentError) as error:
        parse_args(["--yaml-cfg", str(config)], posttrain_entry("sft"))
    assert str(error.value) == (f"--yaml-cfg {config}: unknown key 'temperature' (--temperature is a flag of "
                                "inference.py, evaluation.py, posttrain.py --stage grpo)")
    assert parse_args(["--yaml-cfg", str(config)], posttrain_entry("grpo")).temperature == 0.7
    config.write_text("dpo_beta: 0.2\n")
    with pytest.raises(ArgumentError) as error:
        parse_args(["--yaml-cfg", str(config)], PRETRAIN)
    assert str(error.value) == (f"--yaml-cfg {config}: unknown key 'dpo_beta' (--dpo-beta is a flag of posttrain.py "
                                "--stage dpo)")
    config.write_text("no-such-key: 1\n")
    with pytest.raises(ArgumentError) as error:
        parse_args(["--yaml-cfg", str(config)], PRETRAIN)
    assert str(error.value) == f"--yaml-cfg {config}: unknown key 'no-such-key' (no flag --no-such-key)"


def test_posttrain_reads_the_stage_from_the_command_line_or_the_yaml(tmp_path: Path) -> None:
    from mindspeed_llm.posttrain import requested_stage

    config = tmp_path / "dpo.yaml"
    config.write_text("stage: dpo\ndpo-beta: 0.2\n")  # the stage's own keys are left to its parser
    assert requested_stage(["--yaml-cfg", str(config)]) == "dpo"
    assert requested_stage(["--yaml-cfg", str(config), "--stage", "simpo"]) == "simpo"
    assert requested_stage(["--num-layers", "2"]) is None
    config.write_text("stage: ppo\n")
    with pytest.raises(ArgumentError, match="key 'stage': 'ppo' is not one of"):
        requested_stage(["--yaml-cfg", str(config)])


def test_the_entries_exit_2_with_the_hint_before_anything_starts(capsys: pytest.CaptureFixture) -> None:
    import inference
    from mindspeed_llm.posttrain import posttrain

    with pytest.raises(SystemExit) as info:
        posttrain(["--stage", "sft", "--num-generations", "4"])
    assert info.value.code == 2
    assert capsys.readouterr().err == ("error: unrecognized arguments: --num-generations 4 (--num-generations is a "
                                       "flag of posttrain.py --stage grpo)\n")
    with pytest.raises(SystemExit) as info:
        inference.main(["--task", "greedy", "--dpo-beta", "0.2"])
    assert info.value.code == 2
    assert capsys.readouterr().err == ("error: unrecognized arguments: --dpo-beta 0.2 (--dpo-beta is a flag of "
                                       "posttrain.py --stage dpo)\n")

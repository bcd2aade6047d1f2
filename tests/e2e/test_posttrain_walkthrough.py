"""The post-training walk-through, examples/posttrain.sh, run as a user runs it, and its metric reader.

With no quick-start checkpoint, the script pretrains a model of the quick start's shape on its own texts, then
runs SFT with LoRA, merges the adapters into the base, runs DPO with new adapters and a reward model (each
``torchrun posttrain_gpt.py`` on 2 CPU processes, TP=2) on the tiny instruction set and preference pairs it writes
and tokenizes with preprocess_data.py, exports the SFT model to Hugging Face and the DPO adapters to PEFT (with
peft installed, the exported adapter must keep DPO's chosen-over-rejected margin in transformers + peft) and fails
unless each stage learned (the test shortens the runs).
examples/posttrain_metrics.py is checked on synthetic Megatron lines: it parses them and fails a stage whose
metric did not move.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# fewer iterations than the script's defaults (30, 20, 20, 30): most of its minute is process start-up
ITERATIONS = {"BASE_ITERS": "20", "SFT_ITERS": "10", "DPO_ITERS": "10", "ORM_ITERS": "20"}


@pytest.mark.slow
def test_walkthrough_runs_sft_dpo_and_a_reward_model(tmp_path: Path) -> None:
    env = dict(os.environ, OUT=str(tmp_path / "pt"), QUICKSTART=str(tmp_path / "no_quickstart"), **ITERATIONS)
    run = subprocess.run(["bash", "examples/posttrain.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = run.stdout[run.stdout.index("== summary"):]
    for stage, metric in (("sft", "lm loss"), ("dpo", "rewards/accuracies"), ("dpo", "rewards/margins"),
                          ("orm", "accuracy")):
        assert re.search(rf"^   {stage}: .*{metric} [-\d.]+ -> [-\d.]+", summary, re.M), summary
    assert "FAILED" not in run.stdout
    out = tmp_path / "pt"
    for stage, directory in (("base", "base"), ("sft", "sft_lora"), ("dpo", "dpo"), ("orm", "orm")):
        iterations = ITERATIONS[f"{stage.upper()}_ITERS"]
        assert (out / directory / "latest_checkpointed_iteration.txt").read_text().strip() == iterations
    assert "task dpo" in (out / "dpo.log").read_text() and "task orm" in (out / "orm.log").read_text()
    for stage in ("sft", "dpo"):  # LoRA: a small share of the parameters trains
        assert re.search(r"training [\d,]+ of [\d,]+ \([\d.]+%, the rest frozen\) parameters per rank",
                         (out / f"{stage}.log").read_text()), stage
    assert (out / "sft_hf" / "config.json").is_file() and (out / "sft_hf" / "tokenizer.json").is_file()
    assert (out / "dpo_peft" / "adapter_config.json").is_file()
    if importlib.util.find_spec("peft") is not None:  # the exported adapter, in transformers + peft, keeps DPO's margin
        found = re.search(r"the SFT model ([-+\d.]+) nats, with the DPO adapter \(PEFT\) ([-+\d.]+) nats", run.stdout)
        assert found and float(found.group(2)) > float(found.group(1)), run.stdout[-2000:]


def _posttrain_metrics():
    spec = importlib.util.spec_from_file_location("posttrain_metrics", REPO / "examples" / "posttrain_metrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _iteration_line(iteration: int, **stats: float) -> str:
    fields = "".join(f" {name.replace('_', ' ').replace('rewards ', 'rewards/')}: {value:.6E} |"
                     for name, value in stats.items())
    return (f" iteration {iteration:8d}/      30 | consumed samples: 20 | learning rate: 1.0E-04 |{fields} "
            "loss scale: 1.0 |")


def test_metric_reader_parses_and_judges(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """examples/posttrain.sh parses; its metric reader fails a stage whose metric did not move."""
    assert subprocess.run(["bash", "-n", str(REPO / "examples" / "posttrain.sh")]).returncode == 0
    metrics = _posttrain_metrics()
    dpo = [_iteration_line(5, lm_loss=0.6, rewards_accuracies=0.5, rewards_margins=0.1),
           _iteration_line(10, lm_loss=0.3, rewards_accuracies=1.0, rewards_margins=1.5)]
    assert metrics.parse(dpo)[1] == {"iteration": 10.0, "consumed samples": 20, "lm loss": 0.3, "learning rate": 1e-4,
                                     "rewards/accuracies": 1.0, "rewards/margins": 1.5, "loss scale": 1.0}
    logs = {"sft": [_iteration_line(5, lm_loss=2.0), _iteration_line(10, lm_loss=1.0)], "dpo": dpo,
            "orm": [_iteration_line(5, lm_loss=0.7, accuracy=0.5), _iteration_line(10, lm_loss=0.3, accuracy=0.9)]}
    paths = []
    for stage, lines in logs.items():
        paths.append(str(tmp_path / f"{stage}.log"))
        Path(paths[-1]).write_text("\n".join(["loaded checkpoint x"] + lines) + "\n")
    assert metrics.main(["--summary", *paths]) == 0
    assert "dpo: lm loss 0.6000 -> 0.3000, rewards/accuracies 0.5000 -> 1.0000" in capsys.readouterr().out
    Path(paths[2]).write_text("\n".join([logs["orm"][1], logs["orm"][0]]) + "\n")  # accuracy fell
    assert metrics.main(["--summary", *paths]) == 1
    assert "walk-through FAILED: orm: accuracy did not improve (0.9000 -> 0.5000)" in capsys.readouterr().out

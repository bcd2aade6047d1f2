"""``posttrain.py --stage grpo``: rollouts from the policy in memory, rewards, group
advantages and the clipped policy loss, in one process.

* On a synthetic task (reward: the share of the completion's tokens that are 7) the mean reward rises from
  about 0.02 to above 0.6 within a dozen steps.
* The stage's loss equals the loss computed here from the model's full-vocabulary logits for every
  ``--loss-type``, with ``--num-iterations 2`` (the rollout's log-probs kept), the k3 KL to the initial
  policy and DAPO's decoupled clip.
* A reward function that raises skips the step (no update, counted) and names the function and the sample.
* An ``orm`` checkpoint as ``--reward-model``: the reward is its score of each completion's last token.
* Bad input: one line each (``--num-generations 1``, layouts the engine does not run, packed data, a prompt
  that leaves no room for ``--max-new-tokens``, reward weights that do not match, ...).

TP 2, PP 2 and DP 2 equal one process in tests/distributed/test_grpo_parallel.py.

    python -m pytest -q tests/unit/test_grpo_stage.py
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import numpy as np
import pytest
import torch

from core.datasets.sft_dataset import PACKED_FILES
from tests.unit.test_posttrain_sft import write_indexed

ROOT = Path(__file__).resolve().parents[2]
SEVEN = 7
ARGV = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "64",
        "--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "32", "--normalization",
        "RMSNorm", "--swiglu", "--disable-bias-linear", "--micro-batch-size", "2", "--global-batch-size", "4",
        "--train-iters", "12", "--lr", "0.03", "--tokenizer-type", "NullTokenizer", "--seed", "3",
        "--device", "cpu", "--log-interval", "1", "--hidden-dropout", "0", "--attention-dropout", "0",
        "--make-vocab-size-divisible-by", "1", "--position-embedding-type", "rope", "--stage", "grpo",
        "--is-instruction-dataset", "--num-generations", "8", "--max-new-tokens", "6",
        "--reward-funcs", "tests.unit.test_grpo_stage:sevens"]


def sevens(prompts: Sequence[str], completions: Sequence[str], **columns) -> List[float]:
    """The share of a completion's tokens (NullTokenizer: ids separated by spaces) that are 7."""
    return [c.split().count(str(SEVEN)) / max(len(c.split()), 1) for c in completions]


def fails_on_two_sevens(prompts: Sequence[str], completions: Sequence[str], **columns) -> List[float]:
    if any(c.split().count(str(SEVEN)) >= 2 for c in completions):
        raise ValueError("two sevens")
    return [0.0] * len(completions)


def prompt_dataset(directory: Path, count: int = 16, packed: bool = False, prompt_length: int = 4) -> str:
    """Unpacked instruction records (a prompt of 2..prompt_length ids, a reply of 3), as preprocess_data.py
    writes them (documents 1; 1 and 2 with ``packed``)."""
    rng = np.random.RandomState(0)
    rows = []
    for _ in range(count):
        prompt, reply = rng.randint(0, 30, rng.randint(2, prompt_length + 1)).tolist(), rng.randint(0, 30, 3).tolist()
        documents = [1] * len(prompt) + [2 if packed else 1] * len(reply)
        rows.append((prompt + reply, documents, [-100] * len(prompt) + reply))
    prefix = str(directory / "prompts")
    write_indexed(prefix, PACKED_FILES, rows)
    return prefix


def grpo_trainer(prefix: str, *extra: str):
    from mindspeed_llm.posttrain import GRPOTask
    from mindspeed_llm.training.training import setup

    return setup(ARGV + ["--data-path", prefix, *extra], GRPOTask)


def run_steps(trainer, steps: int):
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator) for _ in range(steps)]


def test_the_mean_reward_rises_on_a_synthetic_task(tmp_path: Path) -> None:
    results = run_steps(grpo_trainer(prompt_dataset(tmp_path)), 12)
    rewards = [r.stats["reward mean"] for r in results]
    assert rewards[0] < 0.1 and max(rewards[-3:]) > 0.6, rewards
    assert all(0 < r.stats["response length"] <= 6 and r.stats["rollout tokens per second"] > 0 for r in results)


def _reference_loss(trainer, batch, loss_type: str, clip: float, clip_high: float, kl_coef: float,
                    old_logp: torch.Tensor, ref_logp: torch.Tensor, global_tokens: float) -> torch.Tensor:
    """The GRPO loss written out from the model's full logits (TRL's formulas)."""
    model = trainer.models[0]
    with torch.no_grad():
        logits = model(batch["tokens"]).float()  # [rows, s, v]
        logp = torch.log_softmax(logits, dim=-1).gather(-1, batch["labels"].unsqueeze(-1)).squeeze(-1)
    mask, advantages = batch["mask"], batch["advantages"].unsqueeze(1)
    ratio = torch.exp(logp - old_logp)
    per_token = -torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip_high) * advantages)
    per_token = per_token + kl_coef * (torch.exp(ref_logp - logp) - (ref_logp - logp) - 1)
    if loss_type == "grpo":
        return ((per_token * mask).sum(1) / mask.sum(1)).mean()
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum()
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (mask.size(0) * 6)
    return (per_token * mask).sum() / global_tokens


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_the_loss_equals_the_formulas_from_full_logits(tmp_path: Path, loss_type: str) -> None:
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--num-iterations", "2", "--kl-coef", "0.1", "--loss-type",
                           loss_type, "--clip-ratio", "0.1", "--clip-ratio-high", "0.15", "--train-iters", "4")
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)  # a rollout and a first update: the second step's ratio is not 1
    batches = iterator.micro_batches
    initial = {name: p.detach().clone() for name, p in trainer.models[0].named_parameters()}
    result = trainer.train_step(iterator)  # reuses the rollout: the same micro-batches
    assert iterator.micro_batches is batches and trainer.consumed_samples == 4
    for name, param in trainer.models[0].named_parameters():  # back to the weights the second step saw
        param.data.copy_(initial[name])
    losses, kls = [], []
    for batch in batches:
        tokens = float(batch["global_tokens"]) if loss_type == "dapo" else 0.0
        losses.append(_reference_loss(trainer, batch, loss_type, 0.1, 0.15, 0.1, batch["old_logp"],
                                      batch["ref_logp"], tokens))
        kls.append(float(batch["ref_logp"].numel()))
    expected = torch.stack(losses).mean().item()
    assert result.stats["lm loss"] == pytest.approx(expected, rel=1e-5, abs=1e-7)
    clipped = [_reference_clip_fraction(trainer, batch, 0.1, 0.15) for batch in batches]
    assert result.stats["kl"] > 0 and sum(clipped) > 0  # the first update moved some tokens past the clip
    assert result.stats["clip fraction"] == pytest.approx(sum(clipped) / len(clipped), rel=1e-5, abs=1e-7)


def _reference_clip_fraction(trainer, batch, clip: float, clip_high: float) -> float:
    """The share of ``batch``'s completion tokens whose gradient the clip removes (TRL's definition): ratio below
    1 - clip with a negative advantage, or above 1 + clip_high with a positive one."""
    with torch.no_grad():
        logits = trainer.models[0](batch["tokens"]).float()  # [rows, s, v]
        logp = torch.log_softmax(logits, dim=-1).gather(-1, batch["labels"].unsqueeze(-1)).squeeze(-1)
    ratio, advantages, mask = torch.exp(logp - batch["old_logp"]), batch["advantages"].unsqueeze(1), batch["mask"]
    clipped = ((ratio < 1 - clip) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))  # [rows, s]
    return float((clipped * mask).sum() / mask.sum())


@pytest.mark.parametrize("scale", ["group", "none"])
def test_the_rollout_s_advantages_are_per_group(tmp_path: Path, scale: str) -> None:
    """Each prompt's G generations, written out: advantages ``(r - mean_G) / (std_G + 1e-4)`` (mean 0 and,
    unless the rewards are equal, std 1), or ``r - mean_G`` with ``--scale-rewards none``; the micro-batches
    carry them in the same order."""
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--scale-rewards", scale, "--train-iters", "1")
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)
    rollout, groups = trainer.task.last_rollout, 8
    rewards = rollout["rewards"].double().view(-1, groups)  # [prompts, G]
    advantages = rollout["advantages"].double().view(-1, groups)
    carried = torch.cat([batch["advantages"] for batch in iterator.micro_batches]).double().view(-1, groups)
    means = rewards.mean(dim=1, keepdim=True)
    assert means.unique().numel() > 1 and (rewards.std(dim=1) > 0).any()  # groups differ and vary
    expected = rewards - means
    if scale == "group":
        expected = expected / (rewards.std(dim=1, keepdim=True) + 1e-4)  # the unbiased std, TRL's
        varying = rewards.std(dim=1) > 0
        assert advantages[varying].std(dim=1).sub(1).abs().max() < 2e-3  # std 1 up to the eps
    torch.testing.assert_close(advantages.mean(dim=1), torch.zeros(len(rewards), dtype=torch.float64), atol=1e-6,
                               rtol=0)
    torch.testing.assert_close(advantages, expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(carried, expected, rtol=1e-6, atol=1e-7)


def test_dapo_sums_tokens_over_the_global_batch(tmp_path: Path) -> None:
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--loss-type", "dapo")
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)
    batches = iterator.micro_batches
    total = sum(float(b["mask"].sum()) for b in batches)
    assert all(float(b["global_tokens"]) == pytest.approx(total / len(batches)) for b in batches)


def test_the_rollout_policy_log_probs_are_the_policy_s_at_the_first_update(tmp_path: Path) -> None:
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--num-iterations", "2", "--train-iters", "2")
    result = run_steps(trainer, 1)[0]
    assert result.stats["clip fraction"] == 0.0  # ratio 1 everywhere
    assert result.stats["kl"] == 0.0  # no --kl-coef: no reference


def test_a_failing_reward_function_skips_the_step_and_counts_it(tmp_path: Path, capsys) -> None:
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--reward-funcs", "tests.unit.test_grpo_stage:sevens",
                           "tests.unit.test_grpo_stage:fails_on_two_sevens")
    iterator = trainer.train_iterator()
    skipped = []
    for _ in range(12):
        before = {name: p.detach().clone() for name, p in trainer.models[0].named_parameters()}
        result = trainer.train_step(iterator)
        if not result.stats:
            skipped.append(trainer.iteration)
            assert all(torch.equal(p, before[n]) for n, p in trainer.models[0].named_parameters())
    assert skipped and trainer.skipped_iterations == len(skipped) and trainer.consumed_samples == 48
    err = capsys.readouterr().err
    assert f"iteration {skipped[0]} skipped: reward function tests.unit.test_grpo_stage:fails_on_two_sevens raised " \
           "ValueError on sample" in err and "(prompt sample" in err and "two sevens" in err


def test_rollouts_are_seeded_per_prompt_and_generation(tmp_path: Path) -> None:
    """A completion depends on its prompt's position and its index in the group, not on the batch around it."""
    prefix = prompt_dataset(tmp_path)
    whole = grpo_trainer(prefix, "--train-iters", "1")
    halves = grpo_trainer(prefix, "--train-iters", "1", "--micro-batch-size", "1")
    run_steps(whole, 1), run_steps(halves, 1)
    assert whole.task.last_rollout["completions"] == halves.task.last_rollout["completions"]
    completions = whole.task.last_rollout["completions"]
    assert len({tuple(c) for c in completions[:8]}) > 1  # the group's samples differ


def test_an_orm_checkpoint_scores_the_completions(tmp_path: Path) -> None:
    from mindspeed_llm.posttrain import RewardModelTask
    from mindspeed_llm.posttrain.orm import last_token_scores
    from mindspeed_llm.training.training import setup
    from tests.unit.test_posttrain_preference import pairwise_dataset

    pairs, _ = pairwise_dataset(tmp_path)
    model_flags = ARGV[:ARGV.index("--stage")]
    orm = setup(model_flags + ["--stage", "orm", "--is-pairwise-dataset", "--data-path", pairs, "--save",
                               str(tmp_path / "orm")], RewardModelTask)
    orm.save()
    trainer = grpo_trainer(prompt_dataset(tmp_path), "--reward-model", str(tmp_path / "orm"), "--reward-weights",
                           "0", "2", "--train-iters", "1")
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)
    with torch.no_grad():
        scores = torch.cat([last_token_scores(orm.models[0](b["tokens"]), b["lengths"])
                            for b in iterator.micro_batches])
    torch.testing.assert_close(trainer.task.last_rollout["rewards"].float(), 2 * scores, rtol=1e-5, atol=1e-6)


def test_the_command_line_logs_the_rollout_figures(tmp_path: Path) -> None:
    prefix = prompt_dataset(tmp_path)
    argv = [a for a in ARGV] + ["--data-path", prefix, "--train-iters", "2"]
    run = subprocess.run([sys.executable, str(ROOT / "posttrain.py"), *argv], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    line = [row for row in run.stdout.splitlines() if "iteration        2/" in row][0]
    for field in ("lm loss:", "reward mean:", "reward std:", "kl:", "clip fraction:", "response length:",
                  "rollout tokens per second:", "tokens per second:"):
        assert field in line, (field, line)
    assert line.index("reward mean:") < line.index("reward std:") < line.index("kl:")


@pytest.mark.parametrize("extra, message", [
    (["--num-generations", "1"], "--num-generations 1 with group normalisation"),
    (["--use-torch-fsdp2"], "does not support FSDP"),
    (["--num-iterations", "5"], "--train-iters 12 is not a multiple of --num-iterations 5"),
    (["--clip-ratio", "1.5"], "--clip-ratio 1.5 must lie in (0, 1)"),
    (["--kl-coef", "-1"], "--kl-coef -1.0 must be >= 0"),
    (["--max-new-tokens", "16"], "--max-new-tokens 16 must lie in [1, --seq-length 16)"),
    (["--max-new-tokens", "13"], "has a prompt of"),
    (["--reward-weights", "1", "2"], "--reward-weights has 2 values for 1 rewards"),
    (["--reward-funcs", "no_such_reward"], "is neither a built-in reward"),
    (["--eval-iters", "2", "--eval-interval", "1"], "--stage grpo has no validation pass"),
])
def test_bad_flags_fail_in_one_line(tmp_path: Path, extra: List[str], message: str) -> None:
    from mindspeed_llm.arguments import ArgumentError

    with pytest.raises(ArgumentError) as error:
        grpo_trainer(prompt_dataset(tmp_path), *extra)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_packed_data_and_grpo_flags_elsewhere_are_refused(tmp_path: Path, capsys) -> None:
    from mindspeed_llm.arguments import ArgumentError
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.training import setup

    with pytest.raises(ArgumentError, match="sequence 0 packs several records; GRPO reads one record per sequence"):
        grpo_trainer(prompt_dataset(tmp_path, packed=True))
    sft = list(ARGV)
    sft[sft.index("--stage") + 1] = "sft"
    with pytest.raises(SystemExit):
        setup(sft + ["--data-path", prompt_dataset(tmp_path)], SFTTask)
    assert "(--num-generations, --reward-funcs are flags of posttrain.py --stage grpo; --max-new-tokens is a flag " \
           "of inference.py, evaluation.py, posttrain.py --stage grpo)" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # GRPO parses the sampling flags, not the rest of inference.py's
        grpo_trainer(prompt_dataset(tmp_path), "--temperature", "0.7", "--num-beams", "2")
    assert ("error: unrecognized arguments: --num-beams 2 (--num-beams is a flag of inference.py, evaluation.py)"
            in capsys.readouterr().err)

"""``posttrain.py --stage dpo|simpo|orm`` on pairwise data.

* The losses against formulas written out here with Python floats: every DPO loss type, label smoothing,
  SimPO (both types) and Bradley-Terry.
* The pairwise reader: a pair is two rows (chosen first), shifted, trained on the final reply only; the
  logged log-probs equal those computed here from full logits and the raw files.
* DPO with the policy as its own reference gives ln 2 at step 1; precomputed reference log-probs and
  ``--ref-model`` (a checkpoint of the initial policy) give the same losses as the frozen copy.
* The reward model exports (tools/convert_ckpt.py mg -> hf) as a LlamaForSequenceClassification that
  transformers loads with no missing or unexpected key and that scores like ours; DPO reads what
  preprocess_data.py's pairwise handler writes.
* A reward model trained with LoRA (its --save: adapters + value head, over a plain LM base) exports merged as
  a sequence classifier transformers scores like ours (1e-5), merged as an mg reward model our trainer scores
  the same (also at TP 2 PP 2, whose HF export is bitwise the direct one), and with --save-lora-to-hf as PEFT's
  SEQ_CLS adapter that PeftModel scores like ours and that --lora-load reads back into --stage orm.
* Training on tiny models: DPO raises reward accuracy and margin on a synthetic preference set; SimPO
  and the reward model learn (the reward model's accuracy rises on a separable set); the reward model
  scores the last real token with its value head.
* Bad input, one line each: an instruction dataset given to DPO, no --is-pairwise-dataset, DPO flags
  with another stage, a --ref-model with another vocabulary, a --prompt-type the pairs were not tokenized
  with, label smoothing out of range, orm under CP,
  resuming DPO without --ref-model.

TP 2, PP 2 and CP 2 equal one process in tests/distributed/test_posttrain_preference_parallel.py.

    python -m pytest -q tests/unit/test_posttrain_preference.py
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.datasets.pairwise_dataset import PAIRWISE_FILES
from mindspeed_llm.posttrain.preference_loss import bradley_terry_loss, dpo_loss, simpo_loss
from tests.unit.test_posttrain_sft import ARGV as SFT_ARGV
from tests.unit.test_posttrain_sft import _error, instruction_dataset, write_indexed

SEQ = 16
ARGV = [arg for arg in SFT_ARGV if arg not in ("--stage", "sft", "--is-instruction-dataset")] + [
    "--is-pairwise-dataset", "--num-workers", "0"]
Pair = Tuple[List[int], List[int], List[int], List[int]]  # chosen ids, chosen labels, rejected ids, rejected labels

CHOSEN_WORDS, REJECTED_WORDS = (20, 21, 22), (24, 25, 26, 27, 28)


def preference_pairs(count: int, seed: int = 0) -> List[Pair]:
    """A prompt, then a reply from the chosen words or from the rejected ones (a learnable preference)."""
    rng = np.random.RandomState(seed)
    pairs = []
    for _ in range(count):
        prompt = rng.randint(1, 19, rng.randint(2, 6)).tolist()
        chosen = rng.choice(CHOSEN_WORDS, rng.randint(1, 5)).tolist() + [2]
        rejected = rng.choice(REJECTED_WORDS, rng.randint(1, 5)).tolist() + [2]
        pairs.append((prompt + chosen, [-100] * len(prompt) + chosen, prompt + rejected,
                      [-100] * len(prompt) + rejected))
    return pairs


def pairwise_dataset(directory: Path, count: int = 16, seed: int = 0) -> Tuple[str, List[Pair]]:
    prefix = str(directory / "pairs")
    pairs = preference_pairs(count, seed)
    write_indexed(prefix, PAIRWISE_FILES, pairs)
    return prefix, pairs


def _trainer(stage: str, prefix: str, *extra: str):
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.training import setup

    return setup(ARGV + ["--stage", stage, "--data-path", prefix, *extra], STAGES[stage])


def _steps(trainer, count: int):
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator) for _ in range(count)]


# ------------------------------------------------------------------------------------------- the losses

def _logsigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def _values(seed: int, count: int = 6) -> List[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(count, generator=generator, dtype=torch.float64) * 3 for _ in range(4)]


@pytest.mark.parametrize("loss_type,smoothing", [("sigmoid", 0.0), ("sigmoid", 0.2), ("hinge", 0.0), ("ipo", 0.0)])
def test_dpo_losses_match_their_formulas(loss_type: str, smoothing: float) -> None:
    beta = 0.3
    pc, pr, rc, rr = _values(1)
    losses, chosen_rewards, rejected_rewards = dpo_loss(pc, pr, rc, rr, beta, loss_type, smoothing)
    for i in range(len(pc)):
        h = (float(pc[i]) - float(rc[i])) - (float(pr[i]) - float(rr[i]))
        expected = {"sigmoid": -(1 - smoothing) * _logsigmoid(beta * h) - smoothing * _logsigmoid(-beta * h),
                    "hinge": max(0.0, 1 - beta * h), "ipo": (h - 1 / (2 * beta)) ** 2}[loss_type]
        assert abs(float(losses[i]) - expected) < 1e-12
        assert abs(float(chosen_rewards[i]) - beta * (float(pc[i]) - float(rc[i]))) < 1e-12
        assert abs(float(rejected_rewards[i]) - beta * (float(pr[i]) - float(rr[i]))) < 1e-12


@pytest.mark.parametrize("loss_type,smoothing", [("sigmoid", 0.0), ("sigmoid", 0.1), ("hinge", 0.0)])
def test_simpo_and_bradley_terry_match_their_formulas(loss_type: str, smoothing: float) -> None:
    beta, ratio = 2.5, 0.4
    chosen, rejected, _, _ = _values(2)
    losses, chosen_rewards, _ = simpo_loss(chosen, rejected, beta, ratio, loss_type, smoothing)
    bt = bradley_terry_loss(chosen, rejected)
    for i in range(len(chosen)):
        h = beta * (float(chosen[i]) - float(rejected[i]) - ratio)
        expected = (-(1 - smoothing) * _logsigmoid(h) - smoothing * _logsigmoid(-h) if loss_type == "sigmoid"
                    else max(0.0, 1 - h))
        assert abs(float(losses[i]) - expected) < 1e-12
        assert abs(float(chosen_rewards[i]) - beta * float(chosen[i])) < 1e-12
        assert abs(float(bt[i]) + _logsigmoid(float(chosen[i]) - float(rejected[i]))) < 1e-12


# ---------------------------------------------------------------------------------------------- the stages

def _reply_log_probs(logits: torch.Tensor, ids: List[int], labels: List[int]) -> float:
    """Sum of log p(label | prefix) over the reply's tokens, from full logits ``[s, v]`` of one row."""
    total = 0.0
    for i in range(min(len(ids), SEQ + 1) - 1):
        if labels[i + 1] != -100:
            total += float(F.log_softmax(logits[i].double(), -1)[ids[i + 1]])
    return total


def test_dpo_starts_at_ln2_and_logs_the_replies_log_probs(tmp_path: Path) -> None:
    prefix, pairs = pairwise_dataset(tmp_path)
    trainer = _trainer("dpo", prefix, "--global-batch-size", "2")
    dataset = trainer.datasets()[0]
    batch = trainer.task.collate([dataset[0], dataset[1]])
    assert batch["tokens"].shape == (4, SEQ) and batch["pair"].tolist() == [int(i) for i in dataset.order[:2]]
    logits = trainer.model(batch["tokens"])  # [4, s, v] rows: chosen 0, chosen 1, rejected 0, rejected 1
    expected = {"chosen": [], "rejected": []}
    for row, (side, k) in enumerate([("chosen", 0), ("chosen", 1), ("rejected", 0), ("rejected", 1)]):
        ids, labels = pairs[int(dataset.order[k])][:2] if side == "chosen" else pairs[int(dataset.order[k])][2:]
        expected[side].append(_reply_log_probs(logits[row].detach(), ids, labels))
    step = _steps(trainer, 1)[0]
    assert abs(step.loss - math.log(2)) < 1e-6  # the policy is its own reference: every log-ratio is 0
    assert step.tokens == 2 * 2 * SEQ  # two pairs: four rows of the policy
    assert trainer.task.reference_forwards() == 1  # the frozen reference's forward counts in TFLOP/s
    assert step.stats["rewards/margins"] == 0 and step.stats["rewards/accuracies"] == 0
    assert abs(step.stats["logps/chosen"] - np.mean(expected["chosen"])) < 1e-4
    assert abs(step.stats["logps/rejected"] - np.mean(expected["rejected"])) < 1e-4


def test_dpo_raises_reward_accuracy_and_margin(tmp_path: Path) -> None:
    prefix, _ = pairwise_dataset(tmp_path, count=32)
    trainer = _trainer("dpo", prefix, "--optimizer", "adam", "--lr", "0.01", "--train-iters", "12",
                       "--dpo-beta", "0.5")
    steps = _steps(trainer, 12)
    first, last = steps[:4], steps[-4:]
    mean = lambda rows, name: float(np.mean([r.stats[name] for r in rows]))  # noqa: E731
    assert mean(last, "rewards/accuracies") >= 0.95 > mean(first, "rewards/accuracies")
    assert mean(last, "rewards/margins") > mean(first, "rewards/margins") + 1.0
    assert mean(last, "lm loss") < 0.5 * math.log(2)


def test_the_reference_precomputed_or_from_a_checkpoint_equals_the_frozen_copy(tmp_path: Path) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    extra = ["--pref-ftx", "0.5", "--train-iters", "3"]
    frozen = [step.stats for step in _steps(_trainer("dpo", prefix, *extra), 3)]
    precomputed = [step.stats for step in _steps(_trainer("dpo", prefix, *extra, "--precompute-ref-log-probs"), 3)]
    initial = _trainer("dpo", prefix, *extra)
    initial.args.save = str(tmp_path / "initial")
    initial.save()
    from_checkpoint = [step.stats for step in _steps(
        _trainer("dpo", prefix, *extra, "--ref-model", str(tmp_path / "initial"), "--precompute-ref-log-probs"), 3)]
    assert frozen[0]["sft loss"] > 0 and frozen[2]["rewards/margins"] != 0
    for ours in (precomputed, from_checkpoint):
        for a, b in zip(ours, frozen):
            assert all(abs(a[name] - b[name]) <= 1e-5 * max(1.0, abs(b[name])) for name in b), (a, b)


@pytest.mark.parametrize("loss_type", ["hinge", "ipo"])
def test_other_dpo_losses_train(tmp_path: Path, loss_type: str) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    steps = _steps(_trainer("dpo", prefix, "--dpo-loss-type", loss_type, "--optimizer", "adam", "--lr", "0.01",
                            "--train-iters", "5"), 5)
    expected = {"hinge": 1.0, "ipo": (1 / (2 * 0.1)) ** 2}[loss_type]  # at step 1 every log-ratio is 0
    assert abs(steps[0].loss - expected) < 1e-5 and steps[-1].loss < steps[0].loss


def test_simpo_learns_the_preference(tmp_path: Path) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    steps = _steps(_trainer("simpo", prefix, "--optimizer", "adam", "--lr", "0.01", "--train-iters", "8"), 8)
    assert steps[-1].loss < 0.5 * steps[0].loss and steps[-1].stats["rewards/accuracies"] == 1.0
    first = steps[0].stats  # the objective follows from the logged mean log-probs (rewards = beta x mean)
    assert abs(first["rewards/chosen"] / 2.5 - first["logps/chosen"]) < 1e-5


class _Recording:
    """The trainer's micro-batches, passed through and kept (``seen``) for the test to recompute."""

    def __init__(self, iterator) -> None:
        self.iterator, self.seen = iterator, []

    def __iter__(self) -> "_Recording":
        return self

    def __next__(self):
        self.seen.append(next(self.iterator))
        return self.seen[-1]


def _log_probs(trainer, weights: Dict[str, torch.Tensor], batch) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's summed log-prob of its reply tokens and their count ``[2b]`` under ``weights``, from the full
    logits; the model's weights are put back afterwards."""
    model = trainer.model
    current = {name: p.detach().clone() for name, p in model.named_parameters()}
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(weights[name])
        logits = model(batch["tokens"]).double()  # [2b, s, v]
        for name, param in model.named_parameters():
            param.copy_(current[name])
    mask = batch["loss_mask"].double()  # [2b, s]
    logp = torch.log_softmax(logits, -1).gather(-1, batch["labels"].clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (logp * mask).sum(-1), mask.sum(-1)


def _second_step(trainer) -> Tuple[float, List, Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """The second step's loss and micro-batches, the initial weights and those the second step saw."""
    iterator = _Recording(trainer.train_iterator())
    initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train_step(iterator)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    iterator.seen.clear()
    return trainer.train_step(iterator).loss, list(iterator.seen), initial, before


def _smoothed(x: float, smoothing: float) -> float:
    """The conservative sigmoid loss of a scaled margin ``x``: ``-(1 - e) log s(x) - e log s(-x)``."""
    return -(1 - smoothing) * _logsigmoid(x) - smoothing * _logsigmoid(-x)


def test_dpo_logs_the_smoothed_loss_once_policy_and_reference_differ(tmp_path: Path) -> None:
    """At step 2 (the reference is the initial policy) the logged loss is the mean over pairs of
    ``-(1 - e) log s(beta h) - e log s(-beta h)``, ``h = (pc - rc) - (pr - rr)`` from the full logits."""
    beta, smoothing = 0.5, 0.3
    prefix, _ = pairwise_dataset(tmp_path)
    trainer = _trainer("dpo", prefix, "--dpo-beta", str(beta), "--dpo-label-smoothing", str(smoothing),
                       "--train-iters", "2")
    loss, batches, initial, before = _second_step(trainer)
    expected, unsmoothed, margins = [], [], []
    for batch in batches:  # the step's loss: the mean over micro-batches of the mean over their pairs
        policy = _log_probs(trainer, before, batch)[0].tolist()
        reference = _log_probs(trainer, initial, batch)[0].tolist()
        half = len(policy) // 2  # chosen rows first
        h = [(policy[i] - reference[i]) - (policy[half + i] - reference[half + i]) for i in range(half)]
        expected.append(np.mean([_smoothed(beta * x, smoothing) for x in h]))
        unsmoothed.append(np.mean([_smoothed(beta * x, 0.0) for x in h]))
        margins += h
    assert max(abs(beta * x) for x in margins) > 0.05  # the policy moved off its reference
    assert abs(np.mean(expected) - np.mean(unsmoothed)) > 1e-3  # the smoothing shows
    assert loss == pytest.approx(np.mean(expected), rel=1e-5, abs=1e-6)


def test_simpo_logs_its_formula_with_gamma_and_beta(tmp_path: Path) -> None:
    """SimPO's logged loss is the mean over pairs of ``-(1 - e) log s(beta (mc - mr - gamma/beta)) - e log
    s(-...)`` of the mean token log-probs (the margin term and the smoothing both show)."""
    beta, ratio, smoothing = 2.0, 0.6, 0.2
    prefix, _ = pairwise_dataset(tmp_path)
    trainer = _trainer("simpo", prefix, "--simpo-beta", str(beta), "--gamma-beta-ratio", str(ratio),
                       "--simpo-label-smoothing", str(smoothing), "--train-iters", "2")
    loss, batches, _, before = _second_step(trainer)
    expected, other = [], []
    for batch in batches:
        sums, counts = _log_probs(trainer, before, batch)
        means = (sums / counts).tolist()
        half = len(means) // 2
        margins = [means[i] - means[half + i] for i in range(half)]
        expected.append(np.mean([_smoothed(beta * (m - ratio), smoothing) for m in margins]))
        other.append(np.mean([_smoothed(beta * m - ratio, smoothing) for m in margins]))  # gamma not times beta
    assert abs(np.mean(expected) - np.mean(other)) > 1e-2
    assert loss == pytest.approx(np.mean(expected), rel=1e-5, abs=1e-6)


def test_the_reward_model_scores_the_last_token_and_learns(tmp_path: Path) -> None:
    from core.models.gpt_model import ValueHead

    prefix, pairs = pairwise_dataset(tmp_path, count=32)
    trainer = _trainer("orm", prefix, "--optimizer", "adam", "--lr", "0.01", "--train-iters", "16")
    assert isinstance(trainer.model.value_head, ValueHead)
    dataset = trainer.datasets()[0]
    batch = trainer.task.collate([dataset[0], dataset[1]])
    scores = trainer.model(batch["tokens"])  # [4, s] one score per token
    loss, stats = trainer.task.forward_step(batch, trainer.model)
    last = [len(pairs[int(dataset.order[k])][0 if side == 0 else 2]) - 1 for side in (0, 1) for k in (0, 1)]
    rewards = scores[torch.arange(4), torch.tensor(last)]
    assert torch.allclose(loss, -F.logsigmoid(rewards[:2] - rewards[2:]).mean(), atol=1e-6)
    steps = _steps(trainer, 16)
    accuracy = lambda rows: float(np.mean([r.stats["accuracy"] for r in rows]))  # noqa: E731
    assert accuracy(steps[-4:]) == 1.0 > accuracy(steps[:4]) and steps[-1].loss < 0.2


def test_a_language_model_checkpoint_loads_into_the_reward_model(tmp_path: Path) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    policy = _trainer("dpo", prefix)
    policy.args.save = str(tmp_path / "lm")
    policy.save()
    reward = _trainer("orm", prefix, "--load", str(tmp_path / "lm"), "--finetune")
    lm_weights = policy.model.state_dict()
    for name, value in reward.model.state_dict().items():
        if not name.startswith("value_head"):
            assert torch.equal(value, lm_weights[name]), name


def test_bad_preference_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    instruction, _ = instruction_dataset(tmp_path)
    dpo = ARGV + ["--stage", "dpo"]
    assert "is an instruction dataset" in _error(dpo + ["--data-path", instruction], capsys)
    without = [arg for arg in dpo if arg != "--is-pairwise-dataset"]
    assert "add --is-pairwise-dataset" in _error(without + ["--data-path", prefix], capsys)
    sft = SFT_ARGV + ["--data-path", instruction]
    assert "--dpo-beta 0.2 (--dpo-beta is a flag of posttrain.py --stage dpo)" in _error(sft + ["--dpo-beta", "0.2"],
                                                                                         capsys)
    assert "(--is-pairwise-dataset is a flag of posttrain.py --stage dpo, simpo, orm)" in _error(
        sft + ["--is-pairwise-dataset"], capsys)
    assert "outside [0, 0.5)" in _error(dpo + ["--data-path", prefix, "--dpo-label-smoothing", "0.5"], capsys)
    assert "--ref-model" in _error(dpo + ["--data-path", prefix, "--ref-model", str(tmp_path / "none")], capsys)
    other = _trainer("dpo", prefix, "--vocab-size", "40")
    other.args.save = str(tmp_path / "vocab40")
    other.save()
    line = _error(dpo + ["--data-path", prefix, "--ref-model", str(tmp_path / "vocab40")], capsys)
    assert "vocabulary of 40 tokens, the policy 32" in line
    trained = _trainer("dpo", prefix, "--save", str(tmp_path / "dpo"))
    _steps(trained, 1)
    trained.save()
    line = _error(dpo + ["--data-path", prefix, "--load", str(tmp_path / "dpo")], capsys)
    assert "resumes DPO at iteration 1" in line and "--ref-model" in line
    from mindspeed_llm.arguments import ArgumentError, parse_args
    from mindspeed_llm.posttrain import RewardModelTask

    args = parse_args(ARGV + ["--stage", "orm", "--data-path", prefix, "--context-parallel-size", "2"])
    with pytest.raises(ArgumentError, match="--stage orm scores each reply's last token"):
        RewardModelTask(args).validate(args)  # (a 2-rank layout: checked here without launching it)


def _hf_sequence_classifier(directory: Path):
    """The exported reward model as transformers loads it: a one-label classifier with ``score``, no lm_head."""
    import transformers
    from safetensors import safe_open

    with safe_open(str(directory / "model.safetensors"), framework="pt") as handle:
        assert "score.weight" in handle.keys() and "lm_head.weight" not in handle.keys()
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        directory, output_loading_info=True, dtype=torch.float32)
    assert type(model).__name__ == "LlamaForSequenceClassification" and model.config.num_labels == 1
    assert not info["missing_keys"] and not info["unexpected_keys"]
    return model


def test_the_reward_model_exports_to_a_transformers_sequence_classifier(tmp_path: Path) -> None:
    import transformers

    from tools.convert_ckpt import main as convert_main

    hf = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              vocab_size=32, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=5000.0)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**hf, dtype="float32")).save_pretrained(tmp_path / "lm")
    convert = ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(tmp_path / "lm"),
               "--save-dir", str(tmp_path / "lm_mg")]
    assert convert_main(convert) == 0
    prefix, pairs = pairwise_dataset(tmp_path)
    training = ["--seq-length", str(SEQ), "--micro-batch-size", "2", "--global-batch-size", "4",
                "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu", "--eval-iters", "0",
                "--log-interval", "1", "--hidden-dropout", "0", "--attention-dropout", "0", "--num-workers", "0",
                "--is-pairwise-dataset", "--train-iters", "2"]
    trainer = _trainer_argv(training + ["--stage", "orm", "--data-path", prefix, "--load", str(tmp_path / "lm_mg"),
                                        "--use-checkpoint-args", "--finetune", "--optimizer", "adam", "--lr", "0.01",
                                        "--save", str(tmp_path / "orm")])
    _steps(trainer, 2)
    trainer.save()
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", str(tmp_path / "orm"),
                         "--save-dir", str(tmp_path / "orm_hf")]) == 0
    model = _hf_sequence_classifier(tmp_path / "orm_hf")
    trainer.model.eval()
    worst, scores = 0.0, []
    with torch.no_grad():
        for ids, _, rejected, _ in pairs[:4]:
            for reply in (ids, rejected):
                ours = trainer.model(torch.tensor([reply]))[0, len(reply) - 1]  # the last token's score
                theirs = model(torch.tensor([reply])).logits[0, 0]
                worst, scores = max(worst, abs(float(ours) - float(theirs))), scores + [float(ours)]
    print(f"max |ours - HF| = {worst:.2e}")
    assert worst <= 1e-5 and max(scores) - min(scores) > 1e-2, (worst, scores)  # (scores that differ)


def _trainer_argv(argv: List[str]):
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.training import setup

    return setup(argv, STAGES[argv[argv.index("--stage") + 1]])


def test_dpo_reads_what_preprocess_data_writes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from core.datasets import pairwise_dataset as reader
    from mindspeed_llm.data import handlers
    from tests.unit.test_preprocess_data import preprocess, sentence, write_jsonl
    from tools import train_tokenizer

    assert reader.PAIRWISE_FILES == handlers.PAIRWISE_FILES  # the reader's file names are the writer's
    tokenizer = train_tokenizer.train_bpe(iter(sentence(i) for i in range(300)), vocab_size=300, min_frequency=1)
    train_tokenizer.save_for_transformers(tokenizer, str(tmp_path / "tok"))
    records = [{"instruction": sentence(i), "input": "", "chosen": sentence(i + 1), "rejected": sentence(i + 2, 2)}
               for i in range(6)]
    prefix = str(tmp_path / "dpo")
    assert preprocess(str(tmp_path / "tok"), "--input", write_jsonl(tmp_path / "p.jsonl", records), "--handler-name",
                      "AlpacaStylePairwiseHandler", "--prompt-type", "chatml", "--output-prefix", prefix) == 0
    argv = list(ARGV)
    for flag in ("--tokenizer-type", "--vocab-size", "--seq-length", "--max-position-embeddings"):
        del argv[argv.index(flag):argv.index(flag) + 2]
    argv += ["--stage", "dpo", "--data-path", prefix, "--tokenizer-type", "PretrainedFromHF",
             "--tokenizer-name-or-path", str(tmp_path / "tok"), "--seq-length", "64", "--max-position-embeddings", "64"]
    # --prompt-type is checked against the template the pairs record, as SFT checks it
    assert "differs from chatml" in _error(argv + ["--prompt-type", "alpaca"], capsys)
    trainer = _trainer_argv(argv + ["--prompt-type", "chatml"])
    dataset = trainer.datasets()[0]
    files = {name: reader.IndexedDataset(f"{prefix}_packed_{name}_document") for name in reader.PAIRWISE_FILES}
    sample, pair = dataset[0], int(dataset.order[0])
    for side in reader.PAIR_SIDES:
        ids, labels = files[f"{side}_input_ids"][pair].tolist(), files[f"{side}_labels"][pair].tolist()
        assert sample[f"{side}_tokens"][:len(ids) - 1].tolist() == ids[:-1]
        trained = [i for i, label in enumerate(labels[1:]) if label != -100]  # positions predicting the reply
        assert trained and sample[f"{side}_loss_mask"].nonzero().flatten().tolist() == trained
        assert int(sample[f"{side}_length"]) == len(ids)
    assert abs(_steps(trainer, 1)[0].loss - math.log(2)) < 1e-6


# ------------------------------------------------------------------- a reward model trained with LoRA, exported

HF_SHAPE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=32, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=5000.0)
TRAINING = ["--seq-length", str(SEQ), "--micro-batch-size", "2", "--global-batch-size", "4",
            "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu", "--eval-iters", "0",
            "--log-interval", "1", "--hidden-dropout", "0", "--attention-dropout", "0", "--num-workers", "0",
            "--is-pairwise-dataset", "--train-iters", "2", "--optimizer", "adam", "--lr", "0.01"]
ORM_LORA = ["--lora-target-modules", "linear_qkv", "linear_fc1", "--lora-r", "4"]


@pytest.fixture(scope="module")
def lora_reward_model(tmp_path_factory: pytest.TempPathFactory):
    """An HF language model, converted; a reward model trained on it with LoRA for 2 steps (its --save holds
    the adapters and the value head); the last-token scores of 8 replies."""
    import transformers

    from tools.convert_ckpt import main as convert_main

    root = tmp_path_factory.mktemp("orm_lora")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF_SHAPE, dtype="float32")).save_pretrained(root / "lm")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(root / "lm"),
                         "--save-dir", str(root / "lm_mg")]) == 0
    prefix, pairs = pairwise_dataset(root)
    trainer = _trainer_argv(TRAINING + ["--stage", "orm", "--data-path", prefix, "--load", str(root / "lm_mg"),
                                        "--use-checkpoint-args", "--finetune", "--save", str(root / "orm")] + ORM_LORA)
    _steps(trainer, 2)
    trainer.save()
    replies = [reply for ids, _, rejected, _ in pairs[:4] for reply in (ids, rejected)]
    scores = _our_scores(trainer.model, replies)
    assert max(scores) - min(scores) > 1e-2, scores  # scores that differ
    return root, prefix, replies, scores


def _our_scores(model: torch.nn.Module, replies: List[List[int]]) -> List[float]:
    model.eval()
    with torch.no_grad():
        return [float(model(torch.tensor([reply]))[0, len(reply) - 1]) for reply in replies]  # the last token's


def _hf_scores(model: torch.nn.Module, replies: List[List[int]]) -> List[float]:
    with torch.no_grad():
        return [float(model(torch.tensor([reply])).logits[0, 0]) for reply in replies]


def _worst(ours: List[float], theirs: List[float]) -> float:
    return max(abs(a - b) for a, b in zip(ours, theirs))


def _convert_lora(root: Path, out: str, *extra: str) -> int:
    from tools.convert_ckpt import main as convert_main

    return convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", str(root / "lm_mg"),
                         "--lora-load", str(root / "orm"), "--save-dir", str(root / out), *extra])


def test_a_lora_reward_model_merges_into_a_transformers_sequence_classifier(lora_reward_model) -> None:
    root, _, replies, scores = lora_reward_model
    assert _convert_lora(root, "merged_hf") == 0
    model = _hf_sequence_classifier(root / "merged_hf")
    worst = _worst(scores, _hf_scores(model, replies))
    print(f"merged LoRA reward model: max |ours - HF| = {worst:.2e}")
    assert worst <= 1e-5


def test_a_lora_reward_model_merges_into_an_mg_reward_model(lora_reward_model) -> None:
    root, prefix, replies, scores = lora_reward_model
    assert _convert_lora(root, "merged_mg", "--save-model-type", "mg") == 0
    merged = _trainer_argv(TRAINING + ["--stage", "orm", "--data-path", prefix, "--load", str(root / "merged_mg"),
                                       "--use-checkpoint-args", "--finetune"])
    worst = _worst(scores, _our_scores(merged.model, replies))
    print(f"merged mg reward model: max |ours - merged| = {worst:.2e}")
    assert worst <= 1e-5
    # at TP 2 PP 2 (the head on the last stage), back to HF: the tensors of the direct merged export
    from safetensors.torch import load_file

    from tools.convert_ckpt import main as convert_main

    assert _convert_lora(root, "merged_tp2pp2", "--save-model-type", "mg", "--target-tensor-parallel-size", "2",
                         "--target-pipeline-parallel-size", "2") == 0
    assert convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                         str(root / "merged_tp2pp2"), "--save-dir", str(root / "merged_tp2pp2_hf")]) == 0
    if not (root / "merged_hf").is_dir():  # (this test run alone)
        assert _convert_lora(root, "merged_hf") == 0
    ours, theirs = (load_file(str(root / name / "model.safetensors")) for name in ("merged_hf", "merged_tp2pp2_hf"))
    assert sorted(ours) == sorted(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_a_lora_reward_model_exports_to_peft_as_a_sequence_classifier(lora_reward_model,
                                                                      capsys: pytest.CaptureFixture) -> None:
    import json

    import transformers
    from safetensors import safe_open

    peft = pytest.importorskip("peft")
    root, prefix, replies, scores = lora_reward_model
    assert _convert_lora(root, "peft", "--save-lora-to-hf") == 0
    config = json.loads((root / "peft" / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_CLS" and "score" in config["modules_to_save"]
    with safe_open(str(root / "peft" / "adapter_model.safetensors"), framework="pt") as handle:
        assert "base_model.model.score.weight" in handle.keys()
    base = transformers.AutoModelForSequenceClassification.from_pretrained(root / "lm", num_labels=1,
                                                                           dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, str(root / "peft")).eval()
    worst = _worst(scores, _hf_scores(model, replies))
    print(f"PEFT reward adapter: max |ours - PEFT| = {worst:.2e}")
    assert worst <= 1e-5
    # and back: --lora-load of the PEFT adapter into --stage orm gives the same reward model (its score head)
    loaded = _trainer_argv(TRAINING + ["--stage", "orm", "--data-path", prefix, "--load", str(root / "lm_mg"),
                                       "--use-checkpoint-args", "--finetune", "--lora-load", str(root / "peft")]
                           + ORM_LORA)
    worst = _worst(scores, _our_scores(loaded.model, replies))
    print(f"PEFT reward adapter through --lora-load: max |ours - loaded| = {worst:.2e}")
    assert worst <= 1e-5
    with capsys.disabled():
        peft_worst = _worst(scores, _hf_scores(model, replies))
        print(f"PEFT: max |ours - PEFT| = {peft_worst:.2e}, through --lora-load {worst:.2e}")
    # a causal LM's adapter (no score head) into --stage orm: the adapters, and a fresh value head
    from safetensors.torch import load_file, save_file

    (root / "peft_lm").mkdir()
    tensors = load_file(str(root / "peft" / "adapter_model.safetensors"))
    save_file({k: v for k, v in tensors.items() if not k.endswith("score.weight")},
              str(root / "peft_lm" / "adapter_model.safetensors"))
    (root / "peft_lm" / "adapter_config.json").write_text(json.dumps(
        {**config, "task_type": "CAUSAL_LM", "modules_to_save": None}))
    lm = _trainer_argv(TRAINING + ["--stage", "orm", "--data-path", prefix, "--load", str(root / "lm_mg"),
                                   "--use-checkpoint-args", "--finetune", "--lora-load", str(root / "peft_lm")]
                       + ORM_LORA)
    adapters = {k: v for k, v in loaded.model.state_dict().items() if "lora" in k}
    assert adapters and all(torch.equal(v, lm.model.state_dict()[k]) for k, v in adapters.items())
    assert not torch.equal(lm.model.value_head.weight, loaded.model.value_head.weight)
    capsys.readouterr()
    dpo = TRAINING + ["--stage", "dpo", "--data-path", prefix, "--load", str(root / "lm_mg"), "--use-checkpoint-args",
                      "--finetune", "--lora-load", str(root / "peft")] + ORM_LORA
    assert "is a sequence classifier's PEFT adapter (task_type SEQ_CLS" in _error(dpo, capsys)
    assert _convert_lora(root, "never", "--lora-load", str(root / "peft")) == 2  # (the last --lora-load wins)
    assert "is a PEFT adapter; the converter merges a LoRA run's --save" in capsys.readouterr().err

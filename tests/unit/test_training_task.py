"""The trainer runs any task: a toy second task defined here trains through it unchanged.

Also the trainer-level pieces of the task interface: data-loader workers
(``--num-workers``) give the same batches as the main process, a task's extra
statistics reach the log line, label smoothing changes the loss as the
cross-entropy defines it, and a checkpoint whose stored model settings differ
from the flags in ways the shapes do not show is refused, naming the setting.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from core import checkpointing
from mindspeed_llm.training.task import TrainingTask
from mindspeed_llm.training.training import setup, train

VOCAB = 64
SEQ = 16
ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", str(SEQ),
    "--micro-batch-size", "4", "--global-batch-size", "8", "--train-iters", "30", "--lr", "1e-2",
    "--lr-decay-style", "constant", "--attention-dropout", "0", "--hidden-dropout", "0",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", str(VOCAB), "--seed", "3", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "10", "--num-workers", "0",
]


class RepeatDataset(Dataset):
    """Sequences of random tokens; the target at each position is the token itself."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, VOCAB, (size, SEQ), generator=generator)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> Dict[str, torch.Tensor]:
        return {"tokens": self.tokens[index]}


class RepeatTask(TrainingTask):
    """Predict the current token (not the next): learnable in a few dozen steps by a tiny model.

    Only the second half of each sequence carries loss, and the task reports the masked
    fraction as its own statistic, so the interface's extra statistics are exercised.
    """

    name = "repeat"
    stat_names = ("lm loss", "loss fraction")

    def validate(self, args) -> None:
        if args.seq_length != SEQ:
            raise ValueError("the toy task needs --seq-length 16")

    def build_datasets(self, args, num_samples: Tuple[int, int, int]):
        return RepeatDataset(num_samples[0], args.seed), RepeatDataset(max(num_samples[1], 1), args.seed + 1), None

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
        tokens = torch.stack([s["tokens"] for s in samples])  # [b, s]
        mask = torch.zeros_like(tokens, dtype=torch.float32)
        mask[:, SEQ // 2:] = 1.0
        return {"tokens": tokens, "labels": tokens.clone(), "loss_mask": mask}

    def forward_step(self, batch: Dict[str, torch.Tensor], model: nn.Module):
        per_token = model(batch["tokens"], labels=batch["labels"])  # [b, s]
        if not model.post_process:
            return per_token, {}
        mask = batch["loss_mask"]
        loss = (per_token * mask).sum() / mask.sum()
        return loss, {"lm loss": loss.detach(), "loss fraction": mask.mean()}


def test_toy_task_trains_through_the_same_trainer(capsys) -> None:
    trainer = train(setup(ARGV + ["--eval-interval", "30", "--eval-iters", "1"], RepeatTask))
    assert trainer.task.name == "repeat"
    first, last = trainer.losses[0], trainer.losses[-1]
    assert first > 3.0  # near log(64) = 4.16 at the start (tied embeddings already favour the input token)
    assert last < 0.2 * first, f"the toy task did not learn: {first:.3f} -> {last:.3f}"
    out = capsys.readouterr().out
    assert "loss fraction: 5.000000E-01" in out  # the task's own statistic, in Megatron's line
    assert "| loss fraction value: 5.000000E-01 | " in out  # and in the validation block


def test_task_statistics_come_back_from_a_step() -> None:
    trainer = setup(ARGV, RepeatTask)
    result = trainer.train_step(trainer.train_iterator())
    assert set(result.stats) == {"lm loss", "loss fraction"}
    assert result.stats["loss fraction"] == pytest.approx(0.5)
    assert result.loss == result.stats["lm loss"]
    assert set(result.timers) == {"forward-backward", "optimizer"}


PRETRAIN = ARGV[:-2] + ["--mock-data", "--train-iters", "3"]  # the pretraining task, without --num-workers


def _losses(argv: List[str]) -> List[float]:
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(3)]


def test_data_loader_workers_read_the_same_batches() -> None:
    in_process = _losses(PRETRAIN + ["--num-workers", "0"])
    workers = _losses(PRETRAIN + ["--num-workers", "2"])
    assert workers == in_process


def test_label_smoothing_is_applied() -> None:
    peaked = PRETRAIN + ["--num-workers", "0", "--init-method-std", "0.5"]  # far from uniform: smoothing shows
    plain = setup(peaked)
    smoothed = setup(peaked + ["--label-smoothing-factor", "0.1"])
    batch = next(plain.train_iterator())
    with torch.no_grad():
        loss_plain, _ = plain.task.forward_step(batch, plain.model)
        loss_smoothed, _ = smoothed.task.forward_step(batch, smoothed.model)
        logits = plain.model(batch["tokens"])[..., :VOCAB].float()  # [b, s, v] (TP=1: all of it)
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, batch["labels"].unsqueeze(-1)).squeeze(-1)
    smoothing = 0.1 * VOCAB / (VOCAB - 1)  # Megatron: 0.1 of the mass spread over the other VOCAB - 1 ids
    expected = ((1 - smoothing) * nll - smoothing * log_probs.mean(-1)).mean()
    assert not torch.allclose(loss_plain, loss_smoothed)
    torch.testing.assert_close(loss_smoothed, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("flag, saved, loaded", [
    ("--norm-epsilon", "1e-5", "1e-6"),
    ("--rotary-base", "10000", "500000"),
    ("--rope-scaling-factor", "1.0", "8.0"),
])
def test_checkpoint_with_other_model_settings_is_refused(tmp_path, flag: str, saved: str, loaded: str) -> None:
    directory = str(tmp_path / "ckpt")
    base = PRETRAIN + ["--num-workers", "0", "--train-iters", "1", "--save", directory]
    extra = ["--rope-scaling-type", "linear"] if flag == "--rope-scaling-factor" else []
    train(setup(base + extra + [flag, saved]))
    with pytest.raises(checkpointing.CheckpointError, match=f"trained with {flag} "):
        setup(base + extra + [flag, loaded, "--load", directory])
    resumed = setup(base + extra + [flag, saved, "--load", directory])  # the same settings load
    assert resumed.iteration == 1

"""Training tasks: what a stage (pretraining, SFT, DPO, a reward model, GRPO) adds to the one trainer.

The trainer (``training.py``) owns the loop, the pipeline schedules, the
optimizer step, checkpoints and logging, and never knows which stage it runs
(DESIGN.md, principle 11). A task owns everything else:

- ``validate(args)``: the task's own flag checks, raising ``ArgumentError``
  before any process group exists;
- ``build_datasets(args, num_samples)``: the (train, valid, test) datasets,
  each indexable and sized, or None for a split that does not exist;
- ``collate(samples)``: one micro-batch, a dict of CPU tensors, from a list of
  samples (it runs in DataLoader workers with ``--num-workers``). Tensors of two or more dimensions are
  ``[b, s, ...]``: under context parallelism the trainer keeps this rank's tokens of dim 1
  (``core/transformer/context_parallel.split_batch``) before ``forward_step`` sees them, and a loss
  averaged over tokens takes its sums over the whole sequence with :func:`token_mean`;
- ``forward_step(batch, model)``: on the model's last pipeline stage the scalar
  loss of the micro-batch (mean over what it averages) and a dict of detached
  scalar statistics; on any other stage the stage's output activations and
  ``{}``;
- ``stat_names``: the names of those statistics, the same on every rank (ranks
  that compute none still join their reduction). The first is the objective,
  logged in Megatron's line as ``lm loss`` so log parsers keep working;
  the others follow it as ``name: value``;
- optionally ``attach(trainer)`` (after the model is built and loaded: what the task needs beside it,
  e.g. DPO's frozen reference), ``micro_batch_rows(micro_batch_size)`` (rows of the activations
  pipeline stages exchange when a sample is more than one row, e.g. a preference pair) and
  ``reference_forwards()`` (a frozen model's forwards per trained token, for the FLOPs in the log line).
  The log line's tokens per second counts the positions of the micro-batches' ``tokens`` ([rows, length]).
- a task whose batches are generated during training (GRPO's rollouts) sets ``generates_data``: the time
  spent drawing the step's micro-batches is then logged apart, and tokens per second, TFLOP/s and MFU count
  the training time only; ``samples_in_step`` says how many dataset samples a step draws (GRPO reuses one
  rollout batch for ``--num-iterations`` steps); its iterator may raise :class:`SkipStep` at a step's first
  micro-batch (before any forward) to skip the step.
- ``entry`` names the task's row of ``mindspeed_llm/entry_flags.py``'s ``ENTRY_GROUPS``: the flag groups its
  parser adds to the shared ones (e.g. ``posttrain.py --stage dpo``: DPO's and the reference model's); a
  flag of another entry is refused by argparse with a hint naming the entry that has it.

Adding a task (developer note): write a subclass in its own module, e.g.
``mindspeed_llm/posttrain/dpo.py``::

    class DPOTask(TrainingTask):
        name = "dpo"
        stat_names = ("lm loss", "rewards/chosen", "rewards/accuracy")

        def build_datasets(self, args, num_samples): ...   # pairs from preprocess_data.py
        def collate(self, samples): ...                    # chosen and rejected rows in one batch
        def forward_step(self, batch, model): ...          # policy / reference log-ratios -> loss

and start training with ``training.run(argv, DPOTask)`` (or ``setup(argv, DPOTask)``
in tests). Nothing in ``training.py`` changes. Batches are read with the
trainer's resumable sampler (consecutive samples, each DP rank its block); a
task whose data is generated during training (GRPO rollouts) overrides
``batches``.
"""
from __future__ import annotations

import argparse
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from core.device import pins_host_memory
from core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region
from mindspeed_llm.entry_flags import PRETRAIN

Batch = Dict[str, torch.Tensor]
Splits = Tuple[Optional[Dataset], Optional[Dataset], Optional[Dataset]]


class SkipStep(Exception):
    """Raised by a task's batch iterator at the first micro-batch of a step, before any forward: the trainer
    applies no update, counts the step as skipped and moves on. ``reason`` is one line; ``local`` says this
    rank saw the cause (it prints it), else another rank did and every rank skips with it."""

    def __init__(self, reason: str, local: bool = True) -> None:
        super().__init__(reason)
        self.local = local


class TrainingTask:
    """The interface the trainer calls (see the module docstring); subclasses fill it in."""

    name: str = "task"
    stat_names: Tuple[str, ...] = ("lm loss",)
    generates_data: bool = False  # drawing the micro-batches is work of its own (rollouts), timed apart
    entry: str = PRETRAIN  # the task's row of entry_flags.ENTRY_GROUPS: the flag groups its parser adds

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @property
    def loss_name(self) -> str:
        """The objective: the first statistic, printed as Megatron's ``lm loss``."""
        return self.stat_names[0]

    def validate(self, args: argparse.Namespace) -> None:
        """Task-specific flag checks (ArgumentError); called before any process-group work."""

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        raise NotImplementedError

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Batch:
        raise NotImplementedError

    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        raise NotImplementedError

    def attach(self, trainer: "Trainer") -> None:  # noqa: F821 (training.Trainer; no import cycle)
        """Called once by ``setup`` after the model is built and ``--load`` is loaded: a task that needs more
        than the trained model (a frozen DPO reference, precomputed reference log-probs) builds it here."""

    def micro_batch_rows(self, micro_batch_size: int) -> int:
        """Rows of the activations ``[s, rows, h]`` that pipeline stages exchange for one micro-batch of
        ``micro_batch_size`` samples (a preference pair is two rows; a frozen reference run beside the
        policy doubles them)."""
        return micro_batch_size

    def samples_in_step(self, global_batch_size: int, iteration: int) -> int:
        """Dataset samples the step that starts at ``iteration`` draws (every step a global batch)."""
        return global_batch_size

    def reference_forwards(self) -> int:
        """Forward passes of a frozen model per trained token (DPO's reference): counted in TFLOP/s and MFU."""
        return 0

    def batches(self, dataset: Dataset, batch_sampler: Iterable[List[int]], num_workers: int,
                device: torch.device) -> Iterator[Batch]:
        """Micro-batches on ``device``: the sampler's index lists, collated (in workers with ``num_workers``)."""
        # Its own generator: a DataLoader iterator draws a worker seed, which must not consume the
        # default generator that dropout uses (a resumed run would replay other masks).
        loader = DataLoader(dataset, batch_sampler=batch_sampler, collate_fn=self.collate,
                            num_workers=num_workers, pin_memory=pins_host_memory(device),
                            generator=torch.Generator())
        for batch in loader:
            yield {key: value.to(device, non_blocking=True) for key, value in batch.items()}


def token_mean(values: torch.Tensor, mask: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """The mean of ``values`` [b, s] over ``mask`` [b, s] (a scalar).

    Under context parallelism both sums run over every CP rank's tokens (all-reduced, identity backward),
    so each rank's backward carries its own tokens' share of the sequence's mean and the gradient
    reduction over DP x CP adds the shares up (Megatron multiplies by CP and averages instead; the same).
    """
    sums = context_parallel_sum(torch.stack([(values * mask).sum(), mask.sum().to(values.dtype)]), model)
    return sums[0] / sums[1].clamp(min=1)  # a micro-batch without trained tokens adds nothing


def context_parallel_sum(partial: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """``partial`` (sums over this rank's tokens) summed over the CP ranks of ``model``: all-reduced forward,
    identity backward, so each rank's backward carries its own tokens' share and the gradient reduction over
    DP x CP adds the shares up. Unchanged without context parallelism."""
    cp = getattr(model, "context_parallel", None)
    return partial if cp is None else reduce_from_tensor_model_parallel_region(partial, cp.group)


def stack_stats(stats: Sequence[Dict[str, torch.Tensor]], names: Sequence[str],
                device: torch.device) -> torch.Tensor:
    """``[len(names)]`` means over the micro-batches' statistics (zeros on ranks that have none)."""
    if not stats:
        return torch.zeros(len(names), device=device)
    return torch.stack([torch.stack([s[name] for s in stats]).mean() for name in names])

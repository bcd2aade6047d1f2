"""Reward model (``posttrain.py --stage orm``): a scalar score head trained on preference pairs.

The model is the decoder with a value head (``TransformerConfig.value_head``, ``core/models/gpt_model.ValueHead``:
hidden -> 1, replicated over TP) in place of the logits; a language-model checkpoint (``--load``) loads into it
with the head freshly initialised. A reply's reward is the score of its last real (non-pad) token; the
loss is Bradley-Terry's ``-log sigmoid(r_chosen - r_rejected)``, averaged over the micro-batch's pairs and
logged as ``lm loss`` with the accuracy (the share of pairs ranked right) and the mean rewards.

Context parallelism is refused (the last token may sit on any CP rank).
"""
from __future__ import annotations

import argparse
from typing import Dict, Tuple

import torch
from torch import nn

from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.entry_flags import posttrain_entry
from mindspeed_llm.posttrain.pairwise import PairwiseTask, chosen_and_rejected
from mindspeed_llm.posttrain.preference_loss import bradley_terry_loss
from mindspeed_llm.training.task import Batch


def last_token_scores(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``scores`` ``[rows, s]`` at each row's last real token (``lengths`` ``[rows]``) -> ``[rows]``."""
    last = (lengths - 1).clamp(min=0).unsqueeze(1)  # [rows, 1]
    return scores.gather(1, last).squeeze(1)


class RewardModelTask(PairwiseTask):
    """Bradley-Terry training of a scalar reward on the last token of each reply."""

    name = "orm"
    entry = posttrain_entry("orm")
    stat_names = ("lm loss", "accuracy", "rewards/chosen", "rewards/rejected", "rewards/margins")

    def validate(self, args: argparse.Namespace) -> None:
        super().validate(args)
        if args.context_parallel_size > 1:
            raise ArgumentError("--stage orm scores each reply's last token, which context parallelism may put on "
                                "any CP rank: use --context-parallel-size 1")

    @staticmethod
    def run_model(model: nn.Module, batch: Batch, hidden_states=None) -> torch.Tensor:
        """Scores ``[2b, s]`` on the last stage (the value head), else the stage's activations."""
        return model(batch["tokens"], hidden_states=hidden_states)

    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        output = self.run_model(model, batch)
        if not model.post_process:
            return output, {}
        chosen, rejected = chosen_and_rejected(last_token_scores(output, batch["lengths"]))  # [b] each
        loss = bradley_terry_loss(chosen, rejected).mean()
        chosen, rejected = chosen.detach(), rejected.detach()
        return loss, {"lm loss": loss.detach(), "accuracy": (chosen > rejected).float().mean(),
                      "rewards/chosen": chosen.mean(), "rewards/rejected": rejected.mean(),
                      "rewards/margins": (chosen - rejected).mean()}

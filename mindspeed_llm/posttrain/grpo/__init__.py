"""GRPO's pure parts: the pieces ``posttrain.py --stage grpo`` calls around its rollouts.

- ``rewards.py``: rule-based rewards (GSM8K answer match, the ``<think>``/``<answer>`` format) and user
  reward functions loaded from ``module:function``; a function that raises gives a one-line ``RewardError``.
- ``advantages.py``: per-group normalisation of the rewards, ``(r - mean) / (std + eps)`` or ``r - mean``.
- ``loss.py``: the clipped policy loss (DAPO's decoupled clip), the k3 KL to the reference, the token
  aggregation of each ``--loss-type`` and the clip fractions the iteration line logs.
"""
from __future__ import annotations

from mindspeed_llm.posttrain.grpo.advantages import check_num_generations, group_advantages
from mindspeed_llm.posttrain.grpo.loss import LOSS_TYPES, PolicyLossOutput, policy_loss
from mindspeed_llm.posttrain.grpo.rewards import (BUILTIN_REWARDS, RewardError, RewardFunc, compute_rewards,
                                                  format_reward, gsm8k_accuracy_reward, load_reward_funcs)

__all__ = ["BUILTIN_REWARDS", "LOSS_TYPES", "PolicyLossOutput", "RewardError", "RewardFunc",
           "check_num_generations", "compute_rewards", "format_reward", "group_advantages",
           "gsm8k_accuracy_reward", "load_reward_funcs", "policy_loss"]

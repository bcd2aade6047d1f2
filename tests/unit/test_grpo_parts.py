"""GRPO's pure parts: rewards, group advantages and the policy losses.

* Rewards on fixtures: GSM8K answer match (``\\boxed{}`` before ``####`` before the last number, commas and
  trailing ``.0`` removed, chat completions), the ``<think>``/``<answer>`` format, built-ins and user
  ``module:function`` loading, weights; a raising user function names itself and the failing sample.
* Advantages against numpy (unbiased std, both ``scale_rewards`` modes); ``--num-generations 1`` refused.
* The policy loss of every ``--loss-type`` against plain-Python formulas, with tokens clipped on both sides
  (DAPO's decoupled eps), the k3 KL and the logged clip fractions; its gradient w.r.t. the log-probs by
  ``torch.autograd.gradcheck`` in float64.

    python -m pytest -q tests/unit/test_grpo_parts.py
"""
from __future__ import annotations

import math
import random
import sys
import textwrap

import numpy as np
import pytest
import torch

from mindspeed_llm.flags import ArgumentError
from mindspeed_llm.posttrain.grpo import (LOSS_TYPES, RewardError, check_num_generations, compute_rewards,
                                          format_reward, group_advantages, gsm8k_accuracy_reward,
                                          load_reward_funcs, policy_loss)

# ----------------------------------------------------------------------------------------------- rewards

GSM8K_CASES = [  # (completion, reference answer, expected reward)
    ("Step by step ... so the total is \\boxed{1,234}.", "She pays 1234.\n#### 1,234", 1.0),
    ("\\boxed{18.0}", "#### 18", 1.0),                       # trailing .0
    ("The answer is 72\n#### 72", "#### 72", 1.0),
    ("#### 5 and later I think 7", "#### 5", 1.0),            # #### before the last number
    ("#### 5 but \\boxed{7}", "#### 7", 1.0),                 # \boxed before ####
    ("#### 5 but \\boxed{7}", "#### 5", 0.0),
    ("first 3 then 4, then finally -12", "#### -12", 1.0),    # last number, negative
    ("first 3 then 4", "#### 3", 0.0),
    ("no number at all", "#### 3", 0.0),
    ("\\boxed{\\frac{1}{2}} so 0.5", "#### 0.5", 0.0),        # a boxed fraction is not parsed as 0.5
    ("\\boxed{x} and then 9", "#### 9", 1.0),                 # a boxed non-number falls through
    ("#### 10 ... #### 11", "#### 11", 1.0),                  # the last ####
]


@pytest.mark.parametrize("completion,reference,expected", GSM8K_CASES)
def test_gsm8k_accuracy_reward(completion: str, reference: str, expected: float) -> None:
    assert gsm8k_accuracy_reward(["q"], [completion], answer=[reference]) == [expected]


def test_gsm8k_accuracy_reward_reads_chat_completions_and_batches() -> None:
    chats = [[{"role": "assistant", "content": "\\boxed{4}"}], [{"role": "assistant", "content": "5"}]]
    assert gsm8k_accuracy_reward(["q", "q"], chats, answer=["#### 4", "#### 4"], other=[1, 2]) == [1.0, 0.0]


FORMAT_CASES = [
    ("<think>\nreasoning\n</think>\n<answer>\n42\n</answer>", 1.0),
    ("<think>r</think><answer>42</answer>", 1.0),
    ("  <think>r</think>\n\n<answer>42</answer>\n", 1.0),
    ("<think>r</think>", 0.0),                                   # no answer
    ("<answer>42</answer>", 0.0),                                # no think
    ("<answer>42</answer><think>r</think>", 0.0),                # wrong order
    ("<think>r</think><answer>42</answer> trailing text", 0.0),  # text after the answer
    ("<think>a<think>b</think><answer>42</answer>", 0.0),        # a tag twice
    ("<think>r</think><answer>4</answer><answer>2</answer>", 0.0),
]


@pytest.mark.parametrize("completion,expected", FORMAT_CASES)
def test_format_reward(completion: str, expected: float) -> None:
    assert format_reward(["q"], [completion]) == [expected]


@pytest.fixture
def user_rewards(tmp_path, monkeypatch):
    """A user module ``grpo_user_rewards`` on sys.path with a length reward and one that fails on "boom"."""
    (tmp_path / "grpo_user_rewards.py").write_text(textwrap.dedent("""
        def length_reward(prompts, completions, **columns):
            return [float(len(c)) + columns.get("bonus", [0.0] * len(c))[i] for i, c in enumerate(completions)]

        def fragile_reward(prompts, completions, **columns):
            out = []
            for c in completions:
                if "boom" in c:
                    raise KeyError("no score for this one\\nsecond line")
                out.append(1.0)
            return out

        def short_reward(prompts, completions, **columns):
            return [1.0]

        def nan_reward(prompts, completions, **columns):
            return [0.0, float("nan"), 0.0][:len(completions)]

        NOT_CALLABLE = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "grpo_user_rewards"
    sys.modules.pop("grpo_user_rewards", None)


def test_load_reward_funcs_builtins_and_user_functions(user_rewards: str) -> None:
    funcs = load_reward_funcs(["gsm8k_accuracy", "format", f"{user_rewards}:length_reward"])
    assert funcs[:2] == [gsm8k_accuracy_reward, format_reward]
    completions = ["\\boxed{3}", "<think>a</think><answer>3</answer>"]
    rewards = compute_rewards(funcs, ["p", "p"], completions, {"answer": ["#### 3", "#### 4"], "bonus": [0.5, 0.0]},
                              weights=[1.0, 0.5, 2.0])
    assert rewards.dtype == torch.float64 and rewards.shape == (2, 3)
    expected = [[1.0, 0.0, 2.0 * (len(completions[0]) + 0.5)], [0.0, 0.5, 2.0 * len(completions[1])]]
    assert rewards.tolist() == expected
    assert load_reward_funcs("format") == [format_reward]


@pytest.mark.parametrize("spec,words", [
    ("no_such_reward", ["--reward-funcs", "module:function"]),
    ("grpo_no_such_module_xyz:f", ["cannot import", "grpo_no_such_module_xyz", "PYTHONPATH"]),
    ("grpo_user_rewards:missing", ["has no function", "missing"]),
    ("grpo_user_rewards:NOT_CALLABLE", ["has no function", "NOT_CALLABLE"]),
])
def test_load_reward_funcs_refuses_bad_specs(user_rewards: str, spec: str, words) -> None:
    with pytest.raises(RewardError) as caught:
        load_reward_funcs([spec])
    message = str(caught.value)
    assert "\n" not in message and all(word in message for word in words), message


def test_raising_reward_function_names_the_function_and_sample(user_rewards: str) -> None:
    funcs = load_reward_funcs([f"{user_rewards}:fragile_reward"])
    assert compute_rewards(funcs, ["p"] * 3, ["a", "b", "c"]).tolist() == [[1.0]] * 3
    with pytest.raises(RewardError) as caught:
        compute_rewards(funcs, ["p"] * 4, ["a", "b", "a boom", "boom"])
    message = str(caught.value)
    assert "\n" not in message, message
    assert "grpo_user_rewards:fragile_reward" in message and "sample 2" in message and "KeyError" in message


def test_columns_must_have_one_value_per_completion() -> None:
    with pytest.raises(RewardError, match="reward column 'answer' has 1 values for 2 completions"):
        compute_rewards(load_reward_funcs(["gsm8k_accuracy"]), ["p", "p"], ["1", "2"], {"answer": ["#### 1"]})


@pytest.mark.parametrize("name,words", [("short_reward", ["returned 1 values for 3 samples"]),
                                        ("nan_reward", ["nan", "sample 1", "finite"])])
def test_bad_reward_values_are_refused(user_rewards: str, name: str, words) -> None:
    funcs = load_reward_funcs([f"{user_rewards}:{name}"])
    with pytest.raises(RewardError) as caught:
        compute_rewards(funcs, ["p"] * 3, ["a", "b", "c"])
    message = str(caught.value)
    assert "\n" not in message and name in message and all(word in message for word in words), message


# -------------------------------------------------------------------------------------------- advantages

def numpy_advantages(rewards: np.ndarray, group: int, scale: bool, eps: float) -> np.ndarray:
    """Independent reference: loop over the groups with numpy's unbiased std (ddof=1)."""
    out = np.empty_like(rewards)
    for start in range(0, len(rewards), group):
        chunk = rewards[start:start + group]
        centred = chunk - chunk.mean()
        out[start:start + group] = centred / (chunk.std(ddof=1) + eps) if scale else centred
    return out


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("group", [2, 4, 5])
def test_group_advantages_match_numpy(scale: bool, group: int) -> None:
    rng = np.random.default_rng(group)
    rewards = rng.normal(size=3 * group) * rng.integers(1, 5)
    rewards[:group] = 1.5  # a group of equal rewards: advantages 0 in both modes
    got = group_advantages(torch.tensor(rewards), group, scale_rewards=scale, eps=1e-4).numpy()
    expected = numpy_advantages(rewards, group, scale, 1e-4)
    assert np.max(np.abs(got - expected)) < 1e-12
    assert np.all(got[:group] == 0.0)
    # groups are contiguous runs: shifting the group boundaries by one sample changes the advantages
    shifted = group_advantages(torch.tensor(np.roll(rewards, 1)), group, scale_rewards=scale).numpy()
    assert not np.allclose(np.roll(shifted, -1), expected)


def test_group_advantages_scaled_to_unit_std() -> None:
    rewards = torch.tensor([0.0, 1.0, 1.0, 1.0, 3.0, 5.0], dtype=torch.float64)
    got = group_advantages(rewards, 3, eps=0.0).view(2, 3)
    assert torch.allclose(got.std(dim=1), torch.ones(2, dtype=torch.float64))  # unbiased std
    assert torch.allclose(got.mean(dim=1), torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("scale", [True, False])
def test_one_generation_is_refused(scale: bool) -> None:
    with pytest.raises(ArgumentError) as caught:
        group_advantages(torch.ones(4), 1, scale_rewards=scale)
    message = str(caught.value)
    assert "\n" not in message and "--num-generations 1" in message and "2 or more" in message
    with pytest.raises(ArgumentError):
        check_num_generations(0)
    check_num_generations(2)


def test_rewards_that_do_not_split_into_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="--num-generations 4"):
        group_advantages(torch.ones(6), 4)


# ----------------------------------------------------------------------------------------------- loss

EPS_LOW, EPS_HIGH, KL_COEF, MAX_LEN = 0.2, 0.28, 0.05, 7


def loss_case(seed: int = 0):
    """float64 log-probs [4, 6] with ratios well inside and outside both clip bounds, mixed-sign advantages,
    ragged masks (one sequence of a single token) and a reference."""
    generator = torch.Generator().manual_seed(seed)
    b, t = 4, 6
    old = -torch.rand(b, t, generator=generator, dtype=torch.float64) * 3.0 - 0.1
    # log-ratios chosen to sit at least 0.02 away from log(1 - 0.2) and log(1 + 0.28), both sides
    log_ratio = torch.tensor([[-0.6, -0.1, -0.4, 0.5, -0.3, 0.35],
                              [0.4, -0.45, 0.0, 0.33, 0.3, -0.15],
                              [-0.05, 0.6, -0.5, 0.15, -0.7, 0.2],
                              [0.45, -0.35, 0.12, -0.02, 0.08, 0.7]], dtype=torch.float64)
    logp = old + log_ratio
    ref = old + 0.3 * torch.randn(b, t, generator=generator, dtype=torch.float64)
    advantages = torch.tensor([1.3, -0.7, 0.9, -1.6], dtype=torch.float64)
    lengths = [6, 4, 1, 5]
    mask = torch.tensor([[1.0 if j < n else 0.0 for j in range(t)] for n in lengths], dtype=torch.float64)
    return logp, old, ref, advantages, mask


def python_reference(logp, old, ref, advantages, mask, loss_type, kl_coef):
    """Plain-Python floats: the per-token clipped loss + kl_coef * k3, aggregated, and the clip statistics."""
    lp, ol, rf, mk = logp.tolist(), old.tolist(), ref.tolist(), mask.tolist()
    a = advantages.tolist()
    per_seq_sums, per_seq_counts, low, high, kl_sum = [], [], 0, 0, 0.0
    for i in range(len(lp)):
        seq_sum, count = 0.0, 0
        for j in range(len(lp[i])):
            if mk[i][j] == 0.0:
                continue
            ratio = math.exp(lp[i][j] - ol[i][j])
            clipped = min(max(ratio, 1 - EPS_LOW), 1 + EPS_HIGH)
            d = rf[i][j] - lp[i][j]
            kl = math.exp(d) - d - 1
            seq_sum += -min(ratio * a[i], clipped * a[i]) + kl_coef * kl
            count += 1
            kl_sum += kl
            low += ratio < 1 - EPS_LOW and a[i] < 0
            high += ratio > 1 + EPS_HIGH and a[i] > 0
        per_seq_sums.append(seq_sum)
        per_seq_counts.append(count)
    tokens = sum(per_seq_counts)
    if loss_type == "grpo":
        loss = sum(s / c for s, c in zip(per_seq_sums, per_seq_counts)) / len(lp)
    elif loss_type in ("bnpo", "dapo"):
        loss = sum(per_seq_sums) / tokens
    else:  # dr_grpo
        loss = sum(per_seq_sums) / (len(lp) * MAX_LEN)
    return loss, {"low": low / tokens, "high": high / tokens, "region": (low + high) / tokens, "kl": kl_sum / tokens}


@pytest.mark.parametrize("kl_coef", [0.0, KL_COEF])
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_policy_loss_matches_python(loss_type: str, kl_coef: float) -> None:
    logp, old, ref, advantages, mask = loss_case()
    out = policy_loss(logp, old, advantages, mask, loss_type=loss_type, eps_low=EPS_LOW, eps_high=EPS_HIGH,
                      kl_coef=kl_coef, ref_logp=ref, max_completion_length=MAX_LEN)
    expected, stats = python_reference(logp, old, ref, advantages, mask, loss_type, kl_coef)
    assert abs(out.loss.item() - expected) < 1e-12, (out.loss.item(), expected)
    # the case clips on both sides, so the test would see a wrong clip or a swapped eps
    assert stats["low"] > 0 and stats["high"] > 0
    assert abs(out.clip_low.item() - stats["low"]) < 1e-12 and abs(out.clip_high.item() - stats["high"]) < 1e-12
    assert abs(out.clip_region.item() - stats["region"]) < 1e-12
    assert abs(out.kl.item() - stats["kl"]) < 1e-12 and out.num_tokens.item() == 16


def test_loss_types_differ_and_dapo_uses_the_global_token_count() -> None:
    logp, old, ref, advantages, mask = loss_case(1)
    losses = {lt: policy_loss(logp, old, advantages, mask, loss_type=lt, eps_low=EPS_LOW, eps_high=EPS_HIGH,
                              max_completion_length=MAX_LEN).loss.item() for lt in LOSS_TYPES}
    assert len({round(v, 12) for v in (losses["grpo"], losses["bnpo"], losses["dr_grpo"])}) == 3
    # two micro-batches of one step, each divided by the step's token count, add up to the whole batch's dapo
    halves = [policy_loss(logp[s], old[s], advantages[s], mask[s], loss_type="dapo", eps_low=EPS_LOW,
                          eps_high=EPS_HIGH, num_global_tokens=mask.sum().item()).loss.item()
              for s in (slice(0, 2), slice(2, 4))]
    assert abs(sum(halves) - losses["dapo"]) < 1e-12


def test_symmetric_clip_by_default_and_on_policy_values() -> None:
    logp, old, ref, advantages, mask = loss_case(2)
    default = policy_loss(logp, old, advantages, mask, eps_low=0.2)
    explicit = policy_loss(logp, old, advantages, mask, eps_low=0.2, eps_high=0.2)
    assert default.loss.item() == explicit.loss.item()
    # on the rollout policy (ratio 1, no reference gap): loss = -mean advantage, nothing clipped, KL 0
    on_policy = policy_loss(old.clone(), old, advantages, mask, loss_type="grpo", kl_coef=KL_COEF, ref_logp=old)
    assert abs(on_policy.loss.item() + advantages.mean().item()) < 1e-12
    assert on_policy.clip_region.item() == 0.0 and on_policy.kl.item() == 0.0


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_policy_loss_gradcheck(loss_type: str) -> None:
    logp, old, ref, advantages, mask = loss_case(3)
    logp = logp.clone().requires_grad_(True)

    def loss_of(lp: torch.Tensor) -> torch.Tensor:
        return policy_loss(lp, old, advantages, mask, loss_type=loss_type, eps_low=EPS_LOW, eps_high=EPS_HIGH,
                           kl_coef=KL_COEF, ref_logp=ref, max_completion_length=MAX_LEN).loss

    assert torch.autograd.gradcheck(loss_of, (logp,), eps=1e-6, atol=1e-8)
    grad, = torch.autograd.grad(loss_of(logp), logp)
    assert torch.all(grad[mask == 0] == 0)  # padding gets no gradient
    # a clipped token keeps only the KL's gradient: d/dlogp of kl_coef * k3 = kl_coef * (1 - exp(ref - logp))
    ratio = torch.exp(logp.detach() - old)
    clipped = ((ratio < 1 - EPS_LOW) & (advantages[:, None] < 0)) | ((ratio > 1 + EPS_HIGH) & (advantages[:, None] > 0))
    clipped &= mask.bool()
    assert clipped.any()
    no_policy = policy_loss(logp, old, torch.zeros_like(advantages), mask, loss_type=loss_type, eps_low=EPS_LOW,
                            eps_high=EPS_HIGH, kl_coef=KL_COEF, ref_logp=ref, max_completion_length=MAX_LEN).loss
    kl_grad, = torch.autograd.grad(no_policy, logp)
    assert torch.allclose(grad[clipped], kl_grad[clipped], atol=1e-14, rtol=0)


def test_policy_loss_bad_arguments() -> None:
    logp, old, ref, advantages, mask = loss_case()
    with pytest.raises(ValueError, match="--kl-coef 0.1 needs the reference"):
        policy_loss(logp, old, advantages, mask, kl_coef=0.1)
    with pytest.raises(ValueError, match="max_completion_length"):
        policy_loss(logp, old, advantages, mask, loss_type="dr_grpo")
    with pytest.raises(ValueError, match="--loss-type 'ppo' is not one of"):
        policy_loss(logp, old, advantages, mask, loss_type="ppo")

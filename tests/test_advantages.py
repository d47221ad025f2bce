"""Advantage estimators against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs, reinforce_pp_advantages, rloo_advantages


def test_rloo_is_reward_minus_mean_of_the_others():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0])  # two groups of three
    adv = rloo_advantages(rewards, 3)
    # group 1: 1 - (0+0)/2 = 1, 0 - (1+0)/2 = -0.5, -0.5 ; group 2: 1 - 2 = -1, 2 - 1.5 = 0.5, 0.5
    assert torch.allclose(adv, torch.tensor([1.0, -0.5, -0.5, -1.0, 0.5, 0.5]))
    with pytest.raises(ValueError):
        rloo_advantages(rewards, 1)


def test_reinforce_pp_puts_the_reward_on_the_last_trained_token_and_whitens():
    rewards = torch.tensor([1.0, 0.0])
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 1, 0, 0]])  # row 0 has a retrieved token at 2
    adv = reinforce_pp_advantages(rewards, mask)
    # returns-to-go without KL: row 0 -> [1, 1, 1, 1, 0] on mask -> [1, 1, 0, 1]; row 1 -> [0, 0, 0]
    returns = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    valid = returns[mask.bool()]
    expected = (returns - valid.mean()) / (valid.std(unbiased=False) + 1e-8) * mask
    assert torch.allclose(adv, expected, atol=1e-6)
    assert torch.all(adv[mask == 0] == 0)


def test_reinforce_pp_folds_the_kl_penalty_into_the_returns():
    rewards = torch.tensor([1.0])
    mask = torch.ones(1, 3)
    kl = torch.tensor([[0.5, 0.0, 1.0]])
    calls = {}

    def one_process(value):
        calls["n"] = calls.get("n", 0) + 1
        return value

    adv = reinforce_pp_advantages(rewards, mask, kl, kl_coef=0.1, global_sum=one_process)
    # token rewards [-0.05, 0, 1 - 0.1] -> returns [0.85, 0.9, 0.9]
    returns = torch.tensor([[0.85, 0.9, 0.9]])
    expected = (returns - returns.mean()) / (returns.std(unbiased=False) + 1e-8)
    assert torch.allclose(adv, expected, atol=1e-5) and calls["n"] == 3


def test_grpo_positive_keeps_the_positive_group_advantages_and_zeroes_the_rest():
    inputs = AdvantageInputs(rewards=torch.tensor([1.0, -1.0, -1.0, 1.0]), local=slice(0, 4), mask=torch.ones(4, 3),
                             num_generations=4, kl_coef=0.0, reward_kl=lambda: None, global_sum=lambda t: t,
                             group_advantages=torch.tensor([0.87, -0.87, -0.87, 0.87]))
    assert torch.equal(ADVANTAGE_ESTIMATORS.get("grpo_positive")(inputs), torch.tensor([0.87, 0.0, 0.0, 0.87]))
    inputs.group_advantages = None
    with pytest.raises(RuntimeError, match="group advantages"):
        ADVANTAGE_ESTIMATORS.get("grpo_positive")(inputs)

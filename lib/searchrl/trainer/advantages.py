"""Advantage estimators beyond TRL's GRPO, as pure tensor functions (tested on their own).

TRL computes GRPO advantages inside `_generate_and_score_completions`; the trainer replaces them with these when
another estimator is selected.
"""

from __future__ import annotations

import torch

ADVANTAGE_ESTIMATORS = ("grpo", "rloo", "reinforce_pp")


def rloo_advantages(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Leave-one-out baseline: A_i = r_i - mean_{j != i} r_j within each group of `num_generations`."""
    if num_generations < 2:
        raise ValueError("RLOO needs at least 2 generations per prompt")
    grouped = rewards.view(-1, num_generations)
    others = (grouped.sum(dim=1, keepdim=True) - grouped) / (num_generations - 1)
    return (grouped - others).view(-1)


def reinforce_pp_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    *,
    global_sum=None,
) -> torch.Tensor:
    """REINFORCE++ token advantages: the outcome reward at the last sampled token, minus `kl_coef * kl` at every
    sampled token, summed to go (gamma = 1), then whitened over all sampled tokens of the global batch.

    rewards: (B,), mask: (B, T) 1 on tokens that train, kl: (B, T) per-token KL estimate or None.
    `global_sum(tensor) -> tensor` sums a statistic over processes (identity on one process).
    """
    global_sum = global_sum or (lambda t: t)
    mask = mask.float()
    token_rewards = torch.zeros_like(mask)
    if kl is not None and kl_coef:
        token_rewards = token_rewards - kl_coef * kl * mask
    lengths = mask.sum(dim=1)
    # Index of the last trained token of each row (rows with none keep the reward nowhere).
    last = (mask * torch.arange(mask.size(1), device=mask.device)).argmax(dim=1)
    has_tokens = lengths > 0
    token_rewards[has_tokens, last[has_tokens]] += rewards[has_tokens].to(token_rewards.dtype)
    returns = token_rewards.flip(1).cumsum(1).flip(1) * mask
    count = global_sum(mask.sum()).clamp(min=1.0)
    mean = global_sum(returns.sum()) / count
    # Two passes (mean, then squared deviations) keep the variance exact where sum-of-squares would cancel.
    var = global_sum((((returns - mean) * mask) ** 2).sum()) / count
    return (returns - mean) / (var.sqrt() + 1e-8) * mask

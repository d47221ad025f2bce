"""Advantage estimators: pure tensor functions (tested on their own) and the registry the trainer picks from.

TRL computes GRPO advantages inside `_generate_and_score_completions`; the trainer then looks the configured
estimator up in `ADVANTAGE_ESTIMATORS` and, unless it returns None (keep TRL's), replaces them. Each entry takes
an `AdvantageInputs` and returns (local batch, T) or (local batch,) advantages. `ppo` also needs a learned critic
(see `searchrl.trainer.levers.ppo_critic`); an estimator says so with a `needs_critic = True` attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from searchrl.core.registry import Registry


@dataclass
class AdvantageInputs:
    """What an estimator may use, gathered by the trainer after TRL has scored the batch."""

    rewards: torch.Tensor  # (global batch,) weighted reward sums, every process's samples in order
    local: slice  # this process's rows of `rewards`
    mask: torch.Tensor  # (local batch, T) 1 on tokens that train (sampled, not retrieved)
    num_generations: int  # group size
    kl_coef: float  # reward_kl_coef: KL penalty folded into the per-token reward
    reward_kl: Callable[[], torch.Tensor]  # per-token KL to the starting policy, (local batch, T), computed on demand
    global_sum: Callable[[torch.Tensor], torch.Tensor]  # sums a statistic over processes
    critic_advantages: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None  # ppo: (rewards, mask)
    group_advantages: torch.Tensor | None = None  # (local batch,) TRL's GRPO advantages (scale_rewards applied)


ADVANTAGE_ESTIMATORS: Registry[Callable[[AdvantageInputs], torch.Tensor | None]] = Registry("advantage estimator")


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
    mask = mask.float()
    token_rewards = _token_rewards(rewards, mask, kl, kl_coef)
    returns = token_rewards.flip(1).cumsum(1).flip(1) * mask
    return _whiten(returns, mask, global_sum)


def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    gamma: float = 1.0,
    lam: float = 1.0,
    *,
    global_sum=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's generalized advantage estimation over the trained tokens; returns (advantages, returns), both (B, T).

    The token rewards are those of REINFORCE++ (outcome at the last trained token, `-kl_coef * kl` at each trained
    token). The trained tokens (mask 1) are the agent's steps; retrieved tokens (mask 0) are the environment's reply,
    so GAE bridges over them: delta_k = r_k + gamma * V(next trained token) - V_k, and neither the value nor the
    discount of a masked position enters. `returns` (GAE + V, the critic's regression target) are not whitened;
    the advantages are, over the trained tokens of the global batch. Search-R1 uses gamma = lam = 1.

    values: (B, T) the critic's V at each position (any value, even NaN, where mask is 0).
    """
    mask = mask.float()
    trained = mask.bool()
    values = values.detach().float()
    token_rewards = _token_rewards(rewards, mask, kl, kl_coef)
    raw = torch.zeros_like(mask)
    next_value = mask.new_zeros(mask.size(0))  # V of the next trained token; 0 after the last (terminal)
    running = mask.new_zeros(mask.size(0))  # GAE of the next trained token
    for t in reversed(range(mask.size(1))):
        gae = token_rewards[:, t] + gamma * next_value - values[:, t] + gamma * lam * running
        # At a masked position both carries pass through unchanged: that is what skips the retrieved span.
        running = torch.where(trained[:, t], gae, running)
        next_value = torch.where(trained[:, t], values[:, t], next_value)
        raw[:, t] = torch.where(trained[:, t], gae, 0.0)
    returns = torch.where(trained, raw + values, 0.0)
    return _whiten(raw, mask, global_sum), returns


def _token_rewards(rewards: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None, kl_coef: float) -> torch.Tensor:
    """(B, T) per-token rewards: `-kl_coef * kl` on trained tokens, plus the outcome on the last trained token."""
    token_rewards = torch.zeros_like(mask)
    if kl is not None and kl_coef:
        token_rewards = token_rewards - kl_coef * kl * mask
    # Index of the last trained token of each row (rows with none keep the reward nowhere).
    last = (mask * torch.arange(mask.size(1), device=mask.device)).argmax(dim=1)
    has_tokens = mask.sum(dim=1) > 0
    token_rewards[has_tokens, last[has_tokens]] += rewards[has_tokens].to(token_rewards.dtype)
    return token_rewards


def _whiten(x: torch.Tensor, mask: torch.Tensor, global_sum=None) -> torch.Tensor:
    """(x - mean) / std over the masked entries of the global batch (three `global_sum` calls); 0 where masked."""
    global_sum = global_sum or (lambda t: t)
    count = global_sum(mask.sum()).clamp(min=1.0)
    mean = global_sum((x * mask).sum()) / count
    # Two passes (mean, then squared deviations) keep the variance exact where sum-of-squares would cancel.
    var = global_sum((((x - mean) * mask) ** 2).sum()) / count
    return (x - mean) / (var.sqrt() + 1e-8) * mask


# ---- the registry's entries ----------------------------------------------------------------------------------


@ADVANTAGE_ESTIMATORS.register("grpo", doc="group-relative: (r - group mean) / group std, TRL's own computation")
def grpo(inputs: AdvantageInputs) -> None:
    return None  # TRL already computed these


@ADVANTAGE_ESTIMATORS.register("rloo", doc="leave-one-out baseline within each group (R1-Searcher, RLOO)")
def rloo(inputs: AdvantageInputs) -> torch.Tensor:
    return rloo_advantages(inputs.rewards, inputs.num_generations)[inputs.local]


@ADVANTAGE_ESTIMATORS.register(
    "grpo_positive", doc="GRPO's advantages with the negative ones set to 0: only rollouts better than their group's "
                         "mean are reinforced (filtered self-imitation, as RAFT and ReST-EM)")
def grpo_positive(inputs: AdvantageInputs) -> torch.Tensor:
    # A negative advantage lowers the probability of every token of a failed rollout, format tokens included:
    # what broke this small model's format at higher learning rates (LOG, issue probes). Cut off, an update
    # only moves toward rollouts that already did better than their group.
    if inputs.group_advantages is None:
        raise RuntimeError("grpo_positive needs TRL's group advantages; the trainer passes them")
    return inputs.group_advantages.clamp(min=0.0)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp",
                               doc="REINFORCE++: per-token returns with KL in the reward, whitened over the batch")
def reinforce_pp(inputs: AdvantageInputs) -> torch.Tensor:
    kl = inputs.reward_kl() if inputs.kl_coef else None
    return reinforce_pp_advantages(inputs.rewards[inputs.local], inputs.mask, kl, inputs.kl_coef,
                                   global_sum=inputs.global_sum)


@ADVANTAGE_ESTIMATORS.register("ppo", doc="PPO: GAE from a learned critic over the trained tokens (Search-R1)")
def ppo(inputs: AdvantageInputs) -> torch.Tensor:
    if inputs.critic_advantages is None:
        raise RuntimeError("the ppo estimator needs a critic; the trainer builds one when the estimator's "
                           "needs_critic is set")
    return inputs.critic_advantages(inputs.rewards[inputs.local], inputs.mask)


ppo.needs_critic = True

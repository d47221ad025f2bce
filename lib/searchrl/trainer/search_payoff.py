"""What a search is worth inside a group: the diagnostic behind "does GRPO push this question type towards a second
search, or away from it?".

GRPO's advantage is a rollout's reward against its group mates (same question). So the direction in which the policy's
search count moves on a question type is the sign of the mean group-relative advantage of the rollouts that searched
n times, over that type's groups whose rollouts searched different numbers of times (a group whose rollouts all
searched alike says nothing about the count). The batch-wide `search/reward_at_<n>_searches` mixes types and groups:
on the CPU demo it was level for one and two searches (-0.45 against -0.43 over lever N's 16 steps) while the policy
went on to search twice on every type, single-hop included (docs/lab/LOG.md, levers N-Q).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch


def advantage_by_searches(
    rewards: torch.Tensor, counts: Sequence[int], qtypes: Sequence[str], num_generations: int
) -> dict[tuple[str, int], float]:
    """`{(qtype, n): mean reward minus group mean}` of the rollouts that searched n times, over each type's groups
    of `num_generations` consecutive rollouts whose search counts differ. Types with no such group are left out."""
    g = int(num_generations)
    if g < 2 or rewards.numel() % g or not (len(counts) == len(qtypes) == rewards.numel()):
        return {}
    values = rewards.detach().float().cpu().view(-1, g)
    sums: dict[tuple[str, int], float] = defaultdict(float)
    sizes: dict[tuple[str, int], int] = defaultdict(int)
    for group, row in enumerate(values):
        members = range(group * g, (group + 1) * g)
        group_counts = [int(counts[i]) for i in members]
        if len(set(group_counts)) < 2 or torch.isnan(row).any():
            continue
        mean = row.mean().item()
        for k, n in enumerate(group_counts):
            key = (str(qtypes[group * g]), n)
            sums[key] += row[k].item() - mean
            sizes[key] += 1
    return {key: sums[key] / sizes[key] for key in sorted(sums)}


__all__ = ["advantage_by_searches"]

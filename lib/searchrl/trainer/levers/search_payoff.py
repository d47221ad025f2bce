"""What a search is worth inside a group: the diagnostic behind "does GRPO push this question type towards a second
search, or away from it?".

GRPO's advantage is a rollout's reward against its group mates (same question). So the direction in which the policy's
search count moves on a question type is the sign of the mean group-relative advantage of the rollouts that searched
n times, over that type's groups whose rollouts searched different numbers of times (a group whose rollouts all
searched alike says nothing about the count). The batch-wide `search/reward_at_<n>_searches` mixes types and groups,
and can stay level for one and two searches while the policy goes on to search twice on every type (measured:
docs/levers.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from searchrl.trainer.levers.base import Lever


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


class SearchPayoffLog(Lever):
    """`search/reward_at_<n>_searches`: the mean total reward of the batch's rollouts that searched n times.
    GRPO moves the policy towards the search count that out-earns its group mates, so these curves show, step by
    step, whether a second search pays (and a gap that closes shows the policy has settled on one count).
    `search/advantage_at_<n>_searches/<qtype>`: the same within groups, per question type (`advantage_by_searches`).
    Every scored batch, in training and evaluation."""

    name = "search_payoff"

    def on_batch_rewards(self, rows, rewards, mode):
        trainer = self.trainer
        qtypes = [qtype for _, qtype in rows]
        local = torch.tensor(getattr(trainer, "_last_num_searches", []), dtype=torch.long, device=rewards.device)
        counts = trainer.accelerator.gather(local)  # the whole batch's, in the order of the gathered rewards
        if counts.numel() != rewards.numel():  # a batch this trainer did not roll out (no search rollouts): skip
            return
        for n in sorted(set(counts.tolist())):
            trainer._metrics[mode][f"search/reward_at_{n}_searches"].append(rewards[counts == n].mean().item())
        g = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        for (qtype, n), value in advantage_by_searches(rewards, counts.tolist(), qtypes, g).items():
            trainer._metrics[mode][f"search/advantage_at_{n}_searches/{qtype}"].append(value)


__all__ = ["SearchPayoffLog", "advantage_by_searches"]

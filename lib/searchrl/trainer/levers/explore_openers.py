"""The trainer's side of `rollout.explore_openers`: which opener pays, step by step.

The rollout engine starts each group's rollouts from the explore openers in turn (and some free, left to the
model); `search/reward_by_opener/<i>` is the mean total reward of a training batch's rollouts started from opener
i, `search/reward_by_opener/free` of those left to the model.
"""

from __future__ import annotations

import torch

from searchrl.trainer.levers.base import Lever


class OpenerRewardLog(Lever):
    """rollout.explore_openers: `search/reward_by_opener/<i>` for every scored training batch."""

    name = "explore_openers"

    def on_batch_rewards(self, rows, rewards, mode):
        if not self.args.rollout.explore_openers or mode != "train":
            return
        trainer = self.trainer
        local = [index for index, _ in getattr(trainer, "_last_openers", [])]
        which = trainer.accelerator.gather(torch.tensor(local, dtype=torch.long, device=rewards.device))
        if which.numel() != rewards.numel():
            return
        for i in sorted(set(which.tolist())):
            trainer._metrics[mode][f"search/reward_by_opener/{'free' if i < 0 else i}"].append(
                rewards[which == i].mean().item())


__all__ = ["OpenerRewardLog"]

"""Opener advantages centred over the batch (`rollout.center_opener_advantage`).

With `explore_openers` every group tries each opener, and an opener's tokens are trained with its rollout's
advantage. Summed over a batch those advantages also push each opener up or down for every question alike: a shared
offset, which can move far more than the part of the choice that differs between question types, and then decides
whether greedy decoding follows the question (measured: docs/levers.md). Centring gives each started rollout's opener tokens its advantage
minus the batch's mean over the trained tokens of the same opener: every opener's summed push is zero at every
step, and what is left is how much better the opener did on this question than on the batch's other questions. The
tokens after the opener keep the rollout's own advantage. The offset also reaches the choice through the tokens
trained after the opener, so this setting alone does not hold it (measured: docs/levers.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from searchrl.trainer.levers.base import Lever


def centered_opener_advantages(
    advantages: torch.Tensor,
    opener_index: torch.Tensor,
    opener_lengths: Sequence[int],
    mask: torch.Tensor,
    *,
    global_sum: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, list[float | None]]:
    """((B, T) advantages, the mean removed per opener: None where no trained rollout started from it).

    advantages: (B,) or (B, T); opener_index: (B,) the opener each rollout started from, -1 when started free;
    opener_lengths: each opener's number of tokens, the first ones of its rollouts' completions (one entry per
    opener, so every process loops alike); mask: (B, T) 1 on trained tokens (a rollout masked out, such as a dropped
    zero-variance group's, counts in no mean); global_sum sums a scalar tensor over processes (identity on one).
    """
    rows, width = mask.shape
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand(rows, width)
    if advantages.shape != mask.shape:
        raise ValueError(f"advantages {tuple(advantages.shape)} do not match the mask {tuple(mask.shape)}")
    centred = advantages.clone()
    positions = torch.arange(width, device=mask.device).unsqueeze(0)
    opener_index = opener_index.to(mask.device)
    removed: list[float | None] = []
    for index, length in enumerate(opener_lengths):
        span = (positions < length) & (opener_index == index).unsqueeze(1)
        trained = span & (mask > 0)
        total, count = (advantages * trained).sum().float(), trained.sum().float()
        if global_sum is not None:
            total, count = global_sum(total), global_sum(count)
        if count <= 0:
            removed.append(None)
            continue
        mean = total / count
        centred = torch.where(span, centred - mean.to(centred.dtype), centred)
        removed.append(mean.item())
    return centred, removed


class CentredOpenerAdvantage(Lever):
    """rollout.center_opener_advantage: each training batch's rows tagged with the opener they started from
    (`on_generated`; the tag travels with dynamic sampling's refills), and the step's final batch centred
    (`on_step_batch`), logging the mean removed as `search/opener_advantage_removed/<i>`."""

    name = "centred_opener_advantage"

    def on_generated(self, output):
        trainer = self.trainer
        if self.args.rollout.center_opener_advantage and trainer.model.training:
            output["opener_index"] = torch.tensor([i for i, _ in trainer._last_openers], dtype=torch.long,
                                                  device=output["completion_ids"].device)

    def on_step_batch(self, inputs, output, rewards):
        if "opener_index" not in output:
            return output
        trainer = self.trainer
        index = output.pop("opener_index")
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        output["advantages"], removed = centered_opener_advantages(
            output["advantages"], index, trainer.engine.opener_lengths, mask, global_sum=trainer._global_sum)
        for i, value in enumerate(removed):
            if value is not None:
                trainer._metrics["train"][f"search/opener_advantage_removed/{i}"].append(value)
        return output


__all__ = ["CentredOpenerAdvantage", "centered_opener_advantages"]

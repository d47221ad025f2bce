"""The hook interface between `SearchGRPOTrainer` and its experiment levers.

A lever is one object built with the trainer (its `__init__` is the construction event) that takes part in a
training step through named events. The trainer calls every installed lever's event, in the order of
`searchrl.trainer.levers.install`, at these points (a lever overrides the ones it needs; the rest do nothing):

    train_sampler(dataset)      _get_train_sampler: the first sampler a lever returns replaces TRL's
    rollout_extras(trajs)       _search_rollout: extra per-sample keys for the reward functions
    on_rewards(inputs, prompts, completions)
                                _calculate_rewards: each scored batch, once TRL has gathered the rewards
    on_generated(output)        _scored_batch: TRL's scored batch, before anything replaces its advantages
    on_batch_rewards(rows, rewards, mode)
                                _scored_batch: the gathered batch's (id, qtype) rows and total rewards
    on_advantages(output, rewards, mode, local)
                                _scored_batch: after the advantage estimator (`local`: this process's rows)
    on_scored_batch(inputs, output, rewards, mode)
                                _scored_batch: the finished scored batch (a step scores one, or more with
                                dynamic sampling's extra draws)
    on_step_batch(inputs, output, rewards) -> output
                                _generate_and_score_completions: the step's first scored batch, in eval as well
                                as in training; each lever returns the batch the next one gets
    extra_loss(model, inputs) -> tensor or None
                                compute_loss: each term is added to TRL's loss, in order
    checkpoint_bytes(total) -> total
                                checkpoint_bytes: a lever's share of a checkpoint's size
    save(folder)                _save_checkpoint: checkpoint-N/, before TRL writes it (should_save only)
    load(checkpoint)            _load_optimizer_and_scheduler: after TRL restored its state (resumes only)

Within one training step: rollout_extras and on_rewards run inside TRL's scoring of each batch, then
on_generated, on_batch_rewards, on_advantages and on_scored_batch for that batch; on_step_batch once the step's
first batch is scored (dynamic sampling's extra draws score more batches from inside it); extra_loss for every
micro-batch. A lever reaches the trainer's state through `self.trainer`, and another lever by its `name`
(`trainer.lever(name)`, None when that lever is not installed).
"""

from __future__ import annotations

from typing import Any


class Lever:
    """One experiment lever: no-op events, overridden by each lever for the points it acts at."""

    name = ""

    def __init__(self, trainer) -> None:
        self.trainer = trainer

    @property
    def args(self):
        return self.trainer.args

    def train_sampler(self, dataset) -> Any:
        return None

    def rollout_extras(self, trajs) -> dict:
        return {}

    def on_rewards(self, inputs, prompts, completions) -> None:
        pass

    def on_generated(self, output: dict) -> None:
        pass

    def on_batch_rewards(self, rows: list[tuple[str, str]], rewards, mode: str) -> None:
        pass

    def on_advantages(self, output: dict, rewards, mode: str, local: slice) -> None:
        pass

    def on_scored_batch(self, inputs, output: dict, rewards, mode: str) -> None:
        pass

    def on_step_batch(self, inputs, output: dict, rewards) -> dict:
        return output

    def extra_loss(self, model, inputs) -> Any:
        return None

    def checkpoint_bytes(self, total: int) -> int:
        return total

    def save(self, folder: str) -> None:
        pass

    def load(self, checkpoint: str) -> None:
        pass


__all__ = ["Lever"]

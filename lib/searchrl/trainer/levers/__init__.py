"""The trainer's experiment levers, one hook object each (`searchrl.trainer.levers.base.Lever` has the events).

`install` builds the levers, in the one order the trainer calls their events in. A lever whose state is built
with the trainer (the ppo critic, train_top_layers, the opener anchor, the memorization loss) is installed when its
setting is on then; the others read their settings when an event comes, as the trainer always has (a setting changed
on `trainer.args` after construction takes effect), and are always installed. The order is the one the trainer's steps always had: the critic is built first (it copies the policy's body before
train_top_layers freezes it), the search-count and opener metrics are logged before the prompt-selection record is
updated, zero-variance groups are masked before the rollout log writes their advantages, and a step's batch passes
the opener anchor, dynamic sampling's refills, the opener centring and the memorization rewrites in that order.
"""

from __future__ import annotations


def install(trainer) -> list:
    """The levers of `trainer.args`, each built (its construction event) in event order."""
    from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS
    from searchrl.trainer.levers.dynamic_sampling import DropZeroVariance, DynamicSampling, RefillDraws
    from searchrl.trainer.levers.empty_steps import SkipEmptySteps
    from searchrl.trainer.levers.explore_openers import OpenerRewardLog
    from searchrl.trainer.levers.freeze import TrainTopLayers
    from searchrl.trainer.levers.memorization import Memorization
    from searchrl.trainer.levers.opener_advantage import CentredOpenerAdvantage
    from searchrl.trainer.levers.opener_anchor import OpenerAnchorLever
    from searchrl.trainer.levers.ppo_critic import PPOCritic
    from searchrl.trainer.levers.prompt_selection import PromptSelection
    from searchrl.trainer.levers.rollout_log import TrainRolloutLog
    from searchrl.trainer.levers.search_payoff import SearchPayoffLog

    args = trainer.args
    wanted = [
        (PPOCritic, getattr(ADVANTAGE_ESTIMATORS.get(args.advantage_estimator), "needs_critic", False)),
        (TrainTopLayers, bool(args.train_top_layers)),
        (SearchPayoffLog, True),
        (OpenerRewardLog, True),  # rollout.explore_openers
        (PromptSelection, True),  # prompt_selection
        (RefillDraws, True),  # the extra draws' random stream travels with every checkpoint
        (DropZeroVariance, True),  # drop_zero_variance
        (TrainRolloutLog, True),  # rollout_log_dir
        (OpenerAnchorLever, args.rollout.opener_anchor > 0),
        (DynamicSampling, True),  # dynamic_sampling
        (CentredOpenerAdvantage, True),  # rollout.center_opener_advantage
        (Memorization, args.memorization.memorization_on),
        (SkipEmptySteps, args.skip_empty_steps),
    ]
    return [kind(trainer) for kind, on in wanted if on]


__all__ = ["install"]

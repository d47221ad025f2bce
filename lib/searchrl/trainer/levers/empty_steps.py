"""skip_empty_steps: an optimizer step whose gradient is zero everywhere leaves the weights and the optimizer alone.

Why: a step whose groups were all masked out (drop_zero_variance) or whose advantages were all zero has a gradient
of exactly zero, yet Adam still moves every weight along its first moment, by about 0.67, 0.52, 0.42, ... of a full
step on the steps after one informative step. Where rewards are rare (a CPU run: most steps have no group whose
rewards differ) each informative gradient is thus applied several times over, an effective learning rate the
setting's value does not say. With the lever such a step drops its gradients (None), which torch's optimizers skip:
no weight moves and no moment decays. The learning-rate schedule still counts the step.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback

from searchrl.trainer.levers.base import Lever

__all__ = ["SkipEmptySteps", "gradient_is_zero"]


def gradient_is_zero(parameters) -> bool:
    """Whether every trained parameter's gradient is None or exactly zero."""
    return all(p.grad is None or not bool(torch.any(p.grad)) for p in parameters if p.requires_grad)


class _BeforeOptimizerStep(TrainerCallback):
    def __init__(self, lever: SkipEmptySteps) -> None:
        self.lever = lever

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.lever.before_step()


class SkipEmptySteps(Lever):
    """skip_empty_steps: a zero-gradient optimizer step is skipped (gradients set to None); logs
    `search/empty_step` (1 for a skipped step, 0 otherwise)."""

    name = "skip_empty_steps"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        # A callback, not an override: transformers calls on_pre_optimizer_step after clipping, just before
        # optimizer.step(), and the gradients are what decides.
        trainer.add_callback(_BeforeOptimizerStep(self))

    def before_step(self) -> None:
        parameters = list(self.trainer.model.parameters())
        empty = gradient_is_zero(parameters)
        if empty:
            for p in parameters:
                p.grad = None
        self.trainer._metrics["train"]["search/empty_step"].append(float(empty))

"""The RL learning-rate schedule the settings ask for is the one the trainer builds from its arguments."""

from __future__ import annotations

import pytest
import torch

from searchrl.config import ConfigError, RunConfig
from searchrl.trainer.arguments import grpo_args


def _rates(cfg: RunConfig, tmp_path, steps: int = 8) -> list[float]:
    """The learning rate at each of `steps` optimizer steps, from the scheduler transformers builds out of the run's
    TRL arguments (what Trainer.create_scheduler does)."""
    from transformers import get_scheduler

    args = grpo_args(cfg, tmp_path, max_steps=steps)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=args.get_warmup_steps(steps),
                              num_training_steps=steps)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_linear_by_default_decays_towards_zero(tmp_path):
    rates = _rates(RunConfig(learning_rate=1e-5), tmp_path)
    assert rates[0] == pytest.approx(1e-5) and rates[-1] == pytest.approx(1e-5 / 8)
    assert sum(rates) / len(rates) == pytest.approx(1e-5 * 4.5 / 8)  # about half the nominal rate on average


def test_constant_keeps_the_rate_and_warmup_rises_to_it(tmp_path):
    assert _rates(RunConfig(learning_rate=1e-5, lr_scheduler_type="constant"), tmp_path) == [pytest.approx(1e-5)] * 8
    warm = _rates(RunConfig(learning_rate=1e-5, lr_scheduler_type="constant_with_warmup", warmup_ratio=0.25), tmp_path)
    assert warm == [0.0, pytest.approx(5e-6)] + [pytest.approx(1e-5)] * 6  # 2 of 8 steps warm up


def test_schedule_settings_are_checked():
    with pytest.raises(ConfigError, match="did you mean 'constant'"):
        RunConfig.from_params({"lr_scheduler_type": "constnt"})
    with pytest.raises(ConfigError, match="warmup_ratio"):
        RunConfig.from_params({"warmup_ratio": 1.0})

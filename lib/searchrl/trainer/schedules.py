"""Training schedules: which rewards train for how many steps, in order.

One stage by default. R1-Searcher's two-stage schedule (section 2.2) first rewards retrieving and the format only
(`stage1_rewards`, by default `preset:r1_searcher_stage1`: eq. 1 + eq. 2), then the answer (the run's `rewards`,
e.g. `preset:r1_searcher_stage2`: eq. 3 + eq. 4), the second stage starting from the first's weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from searchrl.config import RunConfig


@dataclass(frozen=True)
class Stage:
    """One RL stage: its name (its checkpoint folder), rewards as a run's `rewards` list, weights and steps;
    `offset`, the steps the stages before it trained, places its steps in the run's history (stage 2's first step is
    the run's step 7 after a stage of 6), so that curves and resumes see one step count."""

    name: str
    rewards: list[str]
    steps: int
    reward_weights: list[float] = field(default_factory=list)
    offset: int = 0


def rl_schedule(cfg: RunConfig) -> list[Stage]:
    """The stages this run trains: `two_stage` splits `rl_steps` at `stage1_steps` (R1-Searcher). Stages of zero
    steps are left out (`rl_steps: 0` means no RL; TRL would read max_steps=0 as "train by epochs")."""
    if cfg.two_stage:
        stages = [Stage("rl_stage1", list(cfg.stage1_rewards), cfg.stage1_steps),
                  Stage("rl_stage2", list(cfg.rewards), cfg.rl_steps - cfg.stage1_steps, list(cfg.reward_weights),
                        offset=cfg.stage1_steps)]
    else:
        stages = [Stage("rl", list(cfg.rewards), cfg.rl_steps, list(cfg.reward_weights))]
    return [stage for stage in stages if stage.steps > 0]


__all__ = ["Stage", "rl_schedule"]

"""Rewards by name: the factory that binds one to a protocol, each paper's preset, and expansion of a run's list.

A run's `rewards` list mixes three kinds of names:

- a registered reward (`f1`, `format_r1s_stage2`, ... : `REWARDS.describe()` lists them);
- a paper preset, `preset:<name>` (`preset:r1_searcher_stage2` = f1 + the stage-2 format reward, unit weights);
- an import path to a user's reward (`my_package.rewards:brevity` or `path/to/file.py:brevity`): a function with
  TRL's reward signature, or a `RewardFunction` subclass.

`expand_rewards` turns that list (and `reward_weights`) into (name, weight) pairs; `make_reward` builds each one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from searchrl.config.rewards import (
    PRESET_DOCS,
    PRESET_PREFIX,
    PRESET_REWARDS,
    expand_rewards,
    nearest_hint,
    reward_problems,
)
from searchrl.core.registry import Registry
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, class_and_defaults

# paper (or ablation) -> [(reward name, weight)], declared with the schema (searchrl.config.rewards).
REWARD_PRESETS: Registry[list[tuple[str, float]]] = Registry("reward preset")
for _name, _rewards in PRESET_REWARDS.items():
    REWARD_PRESETS.register(_name, _rewards, doc=PRESET_DOCS[_name])


def reward_options(name: str) -> dict[str, Any]:
    """The options a reward accepts, with their effective defaults ({} for a plain reward function)."""
    return REWARDS.options(name)


def make_reward(name: str, protocol: SearchProtocol, **opts: Any) -> Callable:
    """A TRL reward function named `name`, bound to `protocol`; `opts` override the reward's default options."""
    entry = REWARDS.get(name)
    cls, defaults = class_and_defaults(entry)
    allowed = reward_options(name)
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        close = nearest_hint(unknown[0], list(allowed))
        raise ValueError(f"reward {name!r} has no option(s) {unknown}{close}; its options are {sorted(allowed)}")
    if cls is not None:
        return cls(name, protocol, **{**defaults, **opts})
    if not callable(entry):
        raise TypeError(f"reward {name!r} is a {type(entry).__name__}, not a reward function or RewardFunction class")
    return entry  # a user's function with TRL's signature: used as it is


def make_rewards(names: Sequence[str], protocol: SearchProtocol, weights: Sequence[float] | None = None,
                 options: dict[str, dict[str, Any]] | None = None) -> tuple[list[Callable], list[float]]:
    """The reward functions and weights a run's `rewards` / `reward_weights` / `reward_options` describe."""
    problems = reward_problems(names, options)
    if problems:
        raise ValueError("; ".join(problems))
    pairs = expand_rewards(names, weights)
    options = {REWARDS.key(k): v for k, v in (options or {}).items()}
    return [make_reward(n, protocol, **options.get(n, {})) for n, _ in pairs], [w for _, w in pairs]


def make_preset(
    preset: str, protocol: SearchProtocol, options: dict[str, dict[str, Any]] | None = None
) -> tuple[list[RewardFunction], list[float]]:
    """The reward functions and weights of a preset, ready for GRPOTrainer(reward_funcs=..., reward_weights=...).

    `options` maps a reward name of the preset to the options for make_reward (e.g. {"evidence_r_search":
    {"answerer": fn}}).
    """
    entries = REWARD_PRESETS.get(preset)
    options = dict(options or {})
    stray = sorted(set(options) - {name for name, _ in entries})
    if stray:
        raise ValueError(f"preset {preset!r} has no reward(s) {stray}; its rewards are {[n for n, _ in entries]}")
    functions = [make_reward(name, protocol, **options.get(name, {})) for name, _ in entries]
    return functions, [float(weight) for _, weight in entries]


__all__ = ["PRESET_PREFIX", "REWARDS", "REWARD_PRESETS", "expand_rewards", "make_preset", "make_reward",
           "make_rewards", "reward_options", "reward_problems"]

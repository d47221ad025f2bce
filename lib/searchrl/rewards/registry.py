"""Rewards by name: the factory that binds one to a protocol, each paper's preset, and expansion of a run's list.

A run's `rewards` list mixes three kinds of names:

- a registered reward (`f1`, `format_r1s_stage2`, ... : `REWARDS.describe()` lists them);
- a paper preset, `preset:<name>` (`preset:r1_searcher_stage2` = f1 + the stage-2 format reward, unit weights);
- an import path to a user's reward (`my_package.rewards:brevity` or `path/to/file.py:brevity`): a function with
  TRL's reward signature, or a `RewardFunction` subclass.

`expand_rewards` turns that list (and `reward_weights`) into (name, weight) pairs; `make_reward` builds each one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from searchrl.core.registry import Registry, UnknownNameError
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec

PRESET_PREFIX = "preset:"

# paper (or ablation) -> [(reward name, weight)]; the papers sum their components with unit weights.
REWARD_PRESETS: Registry[list[tuple[str, float]]] = Registry("reward preset")
REWARD_PRESETS.register("search_r1", [("em", 1.0)], doc="Search-R1 eq. 3: EM of the answer, no format reward")
REWARD_PRESETS.register("r1_searcher_stage1", [("retrieval_r1s", 1.0), ("format_r1s_stage1", 1.0)],
                        doc="R1-Searcher stage 1: retrieval (eq. 1) + format (eq. 2); the answer is not scored")
REWARD_PRESETS.register("r1_searcher_stage2", [("f1", 1.0), ("format_r1s_stage2", 1.0)],
                        doc="R1-Searcher stage 2: answer F1 (eq. 4) + format (eq. 3)")
REWARD_PRESETS.register("r1_searcher_stage2_em", [("em_pm1", 1.0), ("format_r1s_stage2", 1.0)],
                        doc="R1-Searcher Table 5 ablation: +-1 EM (eq. 5) in place of F1, + format")
REWARD_PRESETS.register("r1_searcher_stage2_cem", [("cem_pm1", 1.0), ("format_r1s_stage2", 1.0)],
                        doc="R1-Searcher Table 5 ablation: +-1 cover-EM (eq. 5) in place of F1, + format")
REWARD_PRESETS.register("r1_searcher_pp", [("format_r1spp", 1.0), ("cem_10w", 1.0), ("group_r1spp", 1.0)],
                        doc="R1-Searcher++ eq. 7: format (eq. 3) + answer (eq. 4) + group (eq. 5-6)")
REWARD_PRESETS.register("r1_searcher_pp_no_group", [("format_r1spp", 1.0), ("cem_10w", 1.0)],
                        doc="R1-Searcher++ Table 2 ablation 'w/o R_group'")
REWARD_PRESETS.register("r_search", [("f1_r_search", 1.0), ("evidence_r_search", 1.0), ("format_r_search", 1.0)],
                        doc="R-Search eq. 6: answer F1 (eq. 3) + evidence F1 (eq. 4) + format (eq. 5)")
REWARD_PRESETS.register("r_search_no_evidence", [("f1_r_search", 1.0), ("format_r_search_no_evidence", 1.0)],
                        doc="R-Search Table 3 ablation 'w/o Evidence'")


def reward_options(name: str) -> dict[str, Any]:
    """The options a reward accepts, with their effective defaults ({} for a plain reward function)."""
    entry = REWARDS.get(name)
    cls, defaults = _class_and_defaults(entry)
    if cls is None:
        return {}
    parameters = inspect.signature(cls.__init__).parameters
    options = {p.name: p.default for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return {**options, **defaults}


def _class_and_defaults(entry: Any) -> tuple[type[RewardFunction] | None, dict[str, Any]]:
    if isinstance(entry, RewardSpec):
        return entry.cls, dict(entry.defaults)
    if isinstance(entry, type) and issubclass(entry, RewardFunction):
        return entry, {}
    return None, {}


def make_reward(name: str, protocol: SearchProtocol, **opts: Any) -> Callable:
    """A TRL reward function named `name`, bound to `protocol`; `opts` override the reward's default options."""
    entry = REWARDS.get(name)
    cls, defaults = _class_and_defaults(entry)
    allowed = reward_options(name)
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        close = _nearest(unknown[0], list(allowed))
        raise ValueError(f"reward {name!r} has no option(s) {unknown}{close}; its options are {sorted(allowed)}")
    if cls is not None:
        return cls(name, protocol, **{**defaults, **opts})
    if not callable(entry):
        raise TypeError(f"reward {name!r} is a {type(entry).__name__}, not a reward function or RewardFunction class")
    return entry  # a user's function with TRL's signature: used as it is


def _nearest(name: str, choices: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.0)
    return f" (did you mean {close[0]!r}?)" if close else ""


def expand_rewards(names: Sequence[str], weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """(reward name, weight) for every reward a run's `rewards` list stands for.

    `preset:<name>` expands to the preset's rewards with its weights, scaled by that entry's weight; a weight list,
    when given, has one weight per entry of `names` (presets count once). Unknown names raise ValueError.
    """
    names = list(names)
    weights = list(weights) if weights else [1.0] * len(names)
    if len(weights) != len(names):
        raise ValueError(f"{len(weights)} reward weights for {len(names)} rewards {names}; give one per entry")
    out: list[tuple[str, float]] = []
    for name, weight in zip(names, weights):
        if name.startswith(PRESET_PREFIX):
            preset = REWARD_PRESETS.get(name[len(PRESET_PREFIX):])
            out += [(reward, float(weight) * w) for reward, w in preset]
        else:
            out.append((REWARDS.key(name), float(weight)))
    seen = [n for n, _ in out]
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise ValueError(f"rewards {names} name {repeated} more than once (a preset may already include it)")
    return out


def reward_problems(names: Sequence[str], options: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Everything wrong with a run's rewards and reward options, as messages (empty when they resolve)."""
    problems = []
    for name in names:
        if not isinstance(name, str):
            problems.append(f"reward names must be strings, got {name!r}")
        elif name.startswith(PRESET_PREFIX):
            problem = REWARD_PRESETS.problem(name[len(PRESET_PREFIX):])
            problems += [problem] if problem else []
        else:
            problem = REWARDS.problem(name)
            problems += [problem] if problem else []
    if problems:
        return problems
    try:
        used = [n for n, _ in expand_rewards(names)]
    except (ValueError, UnknownNameError) as err:
        return [str(err)]
    for reward, opts in (options or {}).items():
        key = REWARDS.key(reward) if reward in REWARDS else reward
        if key not in used:
            problems.append(f"reward_options names {reward!r}, which is not among this run's rewards {used}")
            continue
        if not isinstance(opts, dict):
            problems.append(f"reward_options[{reward!r}] must be a mapping of option names to values")
            continue
        allowed = reward_options(key)
        for opt in opts:
            if opt not in allowed:
                problems.append(f"reward {key!r} has no option {opt!r}{_nearest(opt, list(allowed))}; "
                                f"its options are {sorted(allowed) or 'none'}")
    return problems


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

"""Every reward by name, the factory that binds one to a protocol, and each paper's default combination."""

from __future__ import annotations

import difflib
import inspect
from typing import Any

from searchrl.protocols.base import SearchProtocol

from .answer import ANSWER_REWARDS
from .base import RewardFunction
from .evidence import EVIDENCE_REWARDS
from .format import FORMAT_REWARDS
from .group import GROUP_REWARDS
from .retrieval import RETRIEVAL_REWARDS

# name -> (class, default options); options given to make_reward override the defaults.
REWARDS: dict[str, tuple[type[RewardFunction], dict[str, Any]]] = {
    **ANSWER_REWARDS,
    **FORMAT_REWARDS,
    **RETRIEVAL_REWARDS,
    **GROUP_REWARDS,
    **EVIDENCE_REWARDS,
}

# paper (or ablation) -> [(reward name, weight)]; the papers sum their components with unit weights.
REWARD_PRESETS: dict[str, list[tuple[str, float]]] = {
    # Search-R1 eq. 3: EM of the extracted answer, no format reward.
    "search_r1": [("em", 1.0)],
    # R1-Searcher Stage 1: retrieval (eq. 1) + format (eq. 2); no answer reward.
    "r1_searcher_stage1": [("retrieval_r1s", 1.0), ("format_r1s_stage1", 1.0)],
    # R1-Searcher Stage 2: answer F1 (eq. 4) + format (eq. 3).
    "r1_searcher_stage2": [("f1", 1.0), ("format_r1s_stage2", 1.0)],
    # R1-Searcher answer-reward ablation (sec. 4.2, Table 5): eq. 5 (+1/-1 EM or CEM) in place of F1, + format (eq. 3).
    "r1_searcher_stage2_em": [("em_pm1", 1.0), ("format_r1s_stage2", 1.0)],
    "r1_searcher_stage2_cem": [("cem_pm1", 1.0), ("format_r1s_stage2", 1.0)],
    # R1-Searcher++ eq. 7: format (eq. 3) + answer (eq. 4) + group (eq. 5-6).
    "r1_searcher_pp": [("format_r1spp", 1.0), ("cem_10w", 1.0), ("group_r1spp", 1.0)],
    # R1-Searcher++ ablation "w/o R_group" (Table 2).
    "r1_searcher_pp_no_group": [("format_r1spp", 1.0), ("cem_10w", 1.0)],
    # R-Search eq. 6: answer F1 (eq. 3) + evidence F1 (eq. 4) + format (eq. 5).
    "r_search": [("f1", 1.0), ("evidence_r_search", 1.0), ("format_r_search", 1.0)],
    # R-Search ablation "w/o Evidence" (Table 3): the evidence reward and the evidence part of eq. 5 are disabled.
    "r_search_no_evidence": [("f1", 1.0), ("format_r_search_no_evidence", 1.0)],
}


def _nearest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.0)
    return f" (did you mean {close[0]!r}?)" if close else ""


def reward_options(name: str) -> dict[str, Any]:
    """The options a reward accepts, with their effective defaults."""
    cls, defaults = _lookup(name)
    parameters = inspect.signature(cls.__init__).parameters
    options = {p.name: p.default for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return {**options, **defaults}


def _lookup(name: str) -> tuple[type[RewardFunction], dict[str, Any]]:
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}{_nearest(name, list(REWARDS))}; known rewards: {sorted(REWARDS)}")
    return REWARDS[name]


def make_reward(name: str, protocol: SearchProtocol, **opts: Any) -> RewardFunction:
    """A TRL reward function named `name`, bound to `protocol`; `opts` override the reward's default options."""
    cls, defaults = _lookup(name)
    allowed = reward_options(name)
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ValueError(
            f"reward {name!r} has no option(s) {unknown}{_nearest(unknown[0], list(allowed))}; "
            f"its options are {sorted(allowed)}"
        )
    return cls(name, protocol, **{**defaults, **opts})


def make_preset(
    preset: str, protocol: SearchProtocol, options: dict[str, dict[str, Any]] | None = None
) -> tuple[list[RewardFunction], list[float]]:
    """The reward functions and weights of a preset, ready for GRPOTrainer(reward_funcs=..., reward_weights=...).

    `options` maps a reward name of the preset to the options for make_reward (e.g. {"evidence_r_search":
    {"answerer": fn}}).
    """
    if preset not in REWARD_PRESETS:
        raise ValueError(
            f"unknown reward preset {preset!r}{_nearest(preset, list(REWARD_PRESETS))}; "
            f"known presets: {sorted(REWARD_PRESETS)}"
        )
    entries = REWARD_PRESETS[preset]
    options = dict(options or {})
    stray = sorted(set(options) - {name for name, _ in entries})
    if stray:
        raise ValueError(f"preset {preset!r} has no reward(s) {stray}; its rewards are {[n for n, _ in entries]}")
    functions = [make_reward(name, protocol, **options.get(name, {})) for name, _ in entries]
    return functions, [float(weight) for _, weight in entries]


__all__ = ["REWARDS", "REWARD_PRESETS", "make_preset", "make_reward", "reward_options"]

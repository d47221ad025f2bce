"""A run's `rewards` list, checked without the reward functions: the built-in rewards' names and options, the
papers' presets, and the expansion of the list into (reward, weight) pairs.

The presets' contents are declared here and registered by `searchrl.rewards.registry`. The rewards themselves are
classes registered by their modules, so :data:`REWARD_OPTIONS` lists their names and options, and a test asserts that
it matches the registry. As every check of `searchrl.config.names`, these ask the live registries once
`searchrl.rewards` is imported (a reward a notebook cell registered passes, with its options), and the plain lists
here before that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchrl.config.names import Choices
from searchrl.core.registry import UnknownNameError

__all__ = ["PRESET_DOCS", "PRESET_PREFIX", "PRESET_REWARDS", "REWARDS", "REWARD_OPTIONS", "REWARD_PRESETS",
           "expand_rewards", "nearest_hint", "reward_option_names", "reward_problems"]

PRESET_PREFIX = "preset:"

# paper (or ablation) -> [(reward name, weight)]; the papers sum their components with unit weights.
PRESET_REWARDS: dict[str, list[tuple[str, float]]] = {
    "search_r1": [("em", 1.0)],
    "r1_searcher_stage1": [("retrieval_r1s", 1.0), ("format_r1s_stage1", 1.0)],
    "r1_searcher_stage2": [("f1", 1.0), ("format_r1s_stage2", 1.0)],
    "r1_searcher_stage2_em": [("em_pm1", 1.0), ("format_r1s_stage2", 1.0)],
    "r1_searcher_stage2_cem": [("cem_pm1", 1.0), ("format_r1s_stage2", 1.0)],
    "r1_searcher_pp": [("format_r1spp", 1.0), ("cem_10w", 1.0), ("group_r1spp", 1.0)],
    "r1_searcher_pp_no_group": [("format_r1spp", 1.0), ("cem_10w", 1.0)],
    "r_search": [("f1_r_search", 1.0), ("evidence_r_search", 1.0), ("format_r_search", 1.0)],
    "r_search_no_evidence": [("f1_r_search", 1.0), ("format_r_search_no_evidence", 1.0)],
}

PRESET_DOCS: dict[str, str] = {
    "search_r1": "Search-R1 eq. 3: EM of the answer, no format reward",
    "r1_searcher_stage1": "R1-Searcher stage 1: retrieval (eq. 1) + format (eq. 2); the answer is not scored",
    "r1_searcher_stage2": "R1-Searcher stage 2: answer F1 (eq. 4) + format (eq. 3)",
    "r1_searcher_stage2_em": "R1-Searcher Table 5 ablation: +-1 EM (eq. 5) in place of F1, + format",
    "r1_searcher_stage2_cem": "R1-Searcher Table 5 ablation: +-1 cover-EM (eq. 5) in place of F1, + format",
    "r1_searcher_pp": "R1-Searcher++ eq. 7: format (eq. 3) + answer (eq. 4) + group (eq. 5-6)",
    "r1_searcher_pp_no_group": "R1-Searcher++ Table 2 ablation 'w/o R_group'",
    "r_search": "R-Search eq. 6: answer F1 (eq. 3) + evidence F1 (eq. 4) + format (eq. 5)",
    "r_search_no_evidence": "R-Search Table 3 ablation 'w/o Evidence'",
}

_ANSWER = ("metric", "plus_minus_one", "max_words", "whole_words", "needs_support",
           "closed_answers_match_only_themselves")
_FORMAT = ("valid", "invalid")
_R_SEARCH_FORMAT = ("gamma_e", "gamma_a")

# Every built-in reward -> the options it accepts (`searchrl.rewards.reward_options`, in its order).
REWARD_OPTIONS: dict[str, tuple[str, ...]] = {
    "cem": _ANSWER, "cem_10w": _ANSWER, "cem_pm1": _ANSWER, "em": _ANSWER, "em_pm1": _ANSWER,
    "evidence_r_search": ("answerer", "answerer_model", "config", "policy_model", "question_column", "missing",
                          "max_new_tokens", "batch_size"),
    "excess_search_penalty": ("penalty",),
    "f1": _ANSWER, "f1_r_search": _ANSWER,
    "format_r1s_stage1": _FORMAT, "format_r1s_stage2": _FORMAT, "format_r1spp": _FORMAT,
    "format_r_search": _R_SEARCH_FORMAT, "format_r_search_no_evidence": _R_SEARCH_FORMAT,
    "group_r1spp": ("eta", "correct_by", "group_by", "needs_support"),
    "repeated_query_penalty": ("penalty",),
    "retrieval_r1s": ("value", "min_searches"),
    "support_recall": ("value",),
}  # fmt: skip

REWARDS = Choices("reward", tuple(REWARD_OPTIONS))
REWARD_PRESETS = Choices("reward preset", tuple(PRESET_REWARDS), entries=PRESET_REWARDS)


def reward_option_names(key: str) -> Any:
    """The options reward `key` (a resolved name) accepts: the live registry's (with their defaults), else the
    built-in reward's; a function named by import path takes none (a `RewardFunction` class or `RewardSpec` comes
    from a module that imports `searchrl.rewards`, whose registry then answers)."""
    live = REWARDS.live
    if live is not None:
        return live.options(key)
    return REWARD_OPTIONS.get(key, ())


def nearest_hint(name: str, choices: list[str]) -> str:
    """" (did you mean 'x'?)" for the choice nearest to `name` (any, however far), or "" when there is none."""
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
        allowed = reward_option_names(key)
        for opt in opts:
            if opt not in allowed:
                problems.append(f"reward {key!r} has no option {opt!r}{nearest_hint(opt, list(allowed))}; "
                                f"its options are {sorted(allowed) or 'none'}")
    return problems

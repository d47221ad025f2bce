"""The settings of R1-Searcher's data selection by difficulty (section 2.1), with their checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from searchrl.core.settings import raise_problems

__all__ = ["BUCKETS", "DifficultyConfig", "difficulty_problems"]


BUCKETS = ("easy", "medium", "difficult", "unsolved")


@dataclass(frozen=True)
class DifficultyConfig:
    """How training questions are labelled by difficulty and mixed (R1-Searcher section 2.1, Table 1)."""

    # == data difficulty ==
    difficulty_rollouts: int = 0
    """Most sampled rollouts per training question to find its first correct answer (its difficulty); 0: off.
    R1-Searcher's bounds need more than 20 to tell difficult from unsolved."""
    difficulty_policy: str = ""
    """Reference policy that labels difficulty: a model name or path; empty: the run's model."""
    difficulty_easy_below: int = 10
    """A question first answered correctly at rollout k is easy when k is below this (the paper: fewer than 10)."""
    difficulty_hard_above: int = 20
    """... and difficult when k is above this (the paper: more than 20); medium in between, both bounds included."""
    difficulty_chunk: int = 8
    """Rollouts per question sampled together; a question stops being sampled after the chunk that solves it.
    Larger chunks batch better but waste the rest of the chunk once a question is solved."""
    difficulty_metric: str = "cem"
    """Metric that decides whether a rollout's answer is correct (a `searchrl.metrics.scoring` name, e.g. cem:r1_searcher)."""
    difficulty_min_score: float = 1.0
    """A rollout is correct when its answer scores at least this under difficulty_metric."""
    difficulty_cache: str = ""
    """JSONL file of sampled outcomes, so a re-run samples nothing; empty: $SEARCHRL_DIFFICULTY_CACHE, else
    ~/.cache/searchrl/difficulty.jsonl. Entries are keyed by policy, rollout settings and question."""
    data_recipe: dict = field(default_factory=dict)
    """Training mixture by difficulty bucket (easy, medium, difficult, unsolved): counts ({medium: 200}) or fractions
    summing to 1 ({medium: 0.5, difficult: 0.5}); or one such mapping per RL stage ({rl_stage1: {...},
    rl_stage2: {...}}, R1-Searcher Table 1). Empty: every labelled question."""

    def __post_init__(self) -> None:
        raise_problems("DifficultyConfig", difficulty_problems(asdict(self)))


def difficulty_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every bad difficulty setting in `values` (a mapping with the field names)."""
    problems = []
    for name, low in (("difficulty_rollouts", 0), ("difficulty_easy_below", 1), ("difficulty_hard_above", 1),
                      ("difficulty_chunk", 1)):
        if values[name] < low:
            problems.append((name, f"{name} must be >= {low}, got {values[name]!r}"))
    if values["difficulty_hard_above"] < values["difficulty_easy_below"]:
        message = (f"difficulty_hard_above ({values['difficulty_hard_above']}) must be >= difficulty_easy_below "
                   f"({values['difficulty_easy_below']}), or no question could be medium")
        problems.append(("difficulty_hard_above", message))
    if not 0 <= values["difficulty_min_score"] <= 1:
        problems.append(("difficulty_min_score",
                         f"difficulty_min_score must be in [0, 1], got {values['difficulty_min_score']!r}"))
    problems += [("data_recipe", message) for message in _recipe_problems(values)]
    return problems


def _recipe_problems(values: Mapping[str, Any]) -> list[str]:
    recipe = values["data_recipe"]
    if not recipe:
        return []
    if values["difficulty_rollouts"] == 0:
        return [("data_recipe mixes by difficulty, so it needs labels: set difficulty_rollouts > 0 "
                 "(R1-Searcher samples at least 21 to find difficult questions)")]
    staged = all(isinstance(v, Mapping) for v in recipe.values())
    recipes = dict(recipe) if staged else {"": recipe}
    problems = []
    for stage, one in recipes.items():
        where = f"data_recipe[{stage!r}]" if stage else "data_recipe"
        try:
            _check_recipe(one, where)
        except ValueError as error:
            problems.append(str(error))
            continue
        # A bucket the sampling budget cannot reach would always come out empty.
        reach = {"medium": values["difficulty_easy_below"], "difficult": values["difficulty_hard_above"] + 1}
        for bucket, needed in reach.items():
            if one.get(bucket) and values["difficulty_rollouts"] < needed:
                problems.append(f"{where} asks for {bucket} questions, which are first solved at rollout {needed} "
                                f"or later, but difficulty_rollouts is {values['difficulty_rollouts']}; raise it")
    return problems


def _check_recipe(recipe: Any, where: str = "recipe") -> str:
    """'count' or 'fraction' for a valid recipe; ValueError saying what to fix otherwise."""
    if not isinstance(recipe, Mapping) or not recipe:
        raise ValueError(f"{where} must be a non-empty mapping {{bucket: count or fraction}}, got {recipe!r}")
    unknown = [b for b in recipe if b not in BUCKETS]
    if unknown:
        raise ValueError(f"{where}: unknown difficulty bucket(s) {unknown}; buckets are {', '.join(BUCKETS)}")
    amounts = list(recipe.values())
    if any(isinstance(a, bool) or not isinstance(a, (int, float)) or a < 0 for a in amounts):
        raise ValueError(f"{where}: amounts must be numbers >= 0, got {dict(recipe)}")
    if all(isinstance(a, int) for a in amounts):
        if sum(amounts) == 0:
            raise ValueError(f"{where}: every count is 0, so it selects no question")
        return "count"
    if any(isinstance(a, int) and a != 0 for a in amounts):
        raise ValueError(f"{where} mixes counts and fractions ({dict(recipe)}); write all counts (200) or all "
                         "fractions (0.5)")
    if not math.isclose(sum(amounts), 1.0, abs_tol=1e-6):
        raise ValueError(f"{where}: fractions must sum to 1, they sum to {sum(amounts):g} ({dict(recipe)})")
    return "fraction"

"""The settings of R1-Searcher++'s external-knowledge memorization (section 4.2.2), with their checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from searchrl.core.settings import raise_problems

__all__ = ["MemorizationConfig", "memorization_problems"]


@dataclass(frozen=True)
class MemorizationConfig:
    """Settings of the memorization loss (R1-Searcher++ eq. 8-9). Off unless `memorization_coef` > 0."""

    # == memorization ==
    memorization_coef: float = 0.0
    """mu of eq. 9: weight of the rewrite NLL added to the RL loss (0: off; the paper uses 0.1)."""
    rewrite_model: str = ""
    """The model that rewrites searched rollouts as internal reasoning: a model name or folder ("": the policy), or
    "extractive": each search and its result replaced by the best-matching retrieved sentence in an internal-answer
    span, the rollout's own reasoning kept (no model; for policies too small to follow the rewrite prompt)."""
    rewrite_max_new_tokens: int = 512
    """Most tokens one rewrite may generate; a rewrite cut off by this limit is rejected."""
    rewrite_batch_size: int = 8
    """Rewrites generated together in one batch."""
    max_rewrites_per_step: int = 0
    """Most rollouts rewritten per generation batch and process (0: every correct rollout that searched)."""

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in fields(MemorizationConfig)}
        raise_problems("MemorizationConfig", memorization_problems(values))

    @property
    def memorization_on(self) -> bool:
        """Whether the memorization loss is on."""
        return self.memorization_coef > 0

    @classmethod
    def from_object(cls, source: Any) -> MemorizationConfig:
        """The memorization settings of an object that has them all as attributes (a RunConfig inheriting them)."""
        return cls(**{f.name: getattr(source, f.name) for f in fields(cls)})

    def memorization_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for JSON records; named so as not to clash with RunConfig's methods)."""
        return {f.name: getattr(self, f.name) for f in fields(MemorizationConfig)}


def memorization_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every bad memorization setting in `values` (a mapping holding the field names)."""
    problems = []
    coef = values["memorization_coef"]
    if not isinstance(coef, (int, float)) or coef < 0:
        problems.append(("memorization_coef", f"memorization_coef must be a number >= 0, got {coef!r}"))
    if not isinstance(values["rewrite_model"], str):
        model = values["rewrite_model"]
        problems.append(("rewrite_model", f'rewrite_model must be a model name or folder ("": the policy), got {model!r}'))
    for name, low in (("rewrite_max_new_tokens", 1), ("rewrite_batch_size", 1), ("max_rewrites_per_step", 0)):
        value = values[name]
        if not isinstance(value, int) or value < low:
            problems.append((name, f"{name} must be an integer >= {low}, got {value!r}"))
    return problems

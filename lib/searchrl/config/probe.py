"""The settings of the fixed probe set scored during RL, with their checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ProbeConfig", "probe_problems"]


@dataclass(frozen=True)
class ProbeConfig:
    """Whether and how often RL scores a fixed probe set."""

    # == probe ==
    probe_every: int = 0
    """Every this many RL steps (and before the first), score the policy greedily on the fixed probe questions and
    log probe/f1, probe/em, probe/searches and probe/format_ok (0: no probe). A curve free of the question draw, at
    the price of one greedy evaluation of probe_questions per probe."""
    probe_questions: int = 24
    """How many held-out questions the probe scores: the first of the evaluation questions whose type is trained
    (train_question_types; all types when that is empty)."""


def probe_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every bad probe setting in `values` (a mapping with the field names)."""
    problems = []
    if values["probe_every"] < 0:
        problems.append(("probe_every", f"probe_every must be >= 0 (0: no probe), got {values['probe_every']!r}"))
    if values["probe_every"] > 0 and values["probe_questions"] < 1:
        problems.append(("probe_questions",
                         f"probe_every is on, so probe_questions must be >= 1; got {values['probe_questions']!r}"))
    return problems

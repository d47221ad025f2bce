"""The settings of the training-health monitor (collapse, lost format, gibberish, ...), with their checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from searchrl.core.settings import raise_problems

if TYPE_CHECKING:
    HealthCallback: type  # built on first use by the module's __getattr__ (below)


__all__ = ["ACTIONS", "HealthConfig", "health_problems"]


ACTIONS = ("off", "warn", "stop")


@dataclass(frozen=True)
class HealthConfig:
    """When a training run counts as collapsed, and what to do then."""

    # == training health ==
    health_action: str = "warn"
    """On a collapse: off (no checks), warn (warning, log line and health.json), or stop (also end training; the
    record names the last good checkpoint to roll back to)."""
    health_window: int = 20
    """Logged steps per rolling mean; the rules judge whole windows, never one noisy batch."""
    health_reward_drop: float = 0.2
    """Reward collapse: the rolling mean of the reward this far below its best rolling mean so far (0: off)."""
    health_min_format_rate: float = 0.5
    """Format collapse: the rolling mean of search/format_ok_rate below this after having reached it (0: off)."""
    health_max_garbled_rate: float = 0.2
    """Gibberish: the rolling mean of search/garbled_rate (samples whose own text looks garbled) above this (1: off)."""
    health_max_repeat_ratio: float = 0.5
    """Repetition: the rolling mean of search/repeat_ratio (share of repeated token 4-grams) above this (1: off)."""
    health_min_searches: float = 0.1
    """Search collapse: the mean of search/searches_per_sample over the last 4 logged steps below this after having
    reached it; the policy has stopped searching and answers from what it can guess (0: off)."""
    health_lost_format_rate: float = 0.02
    """Format lost: the mean of search/format_ok_rate over the last 4 logged steps at or below this after a window
    above it; no sample keeps the format, so every group's rewards are equal and nothing is learned back (-1: off)."""
    health_max_empty_searches: float = 0.6
    """Empty searches: over the last 4 logged steps, the share of searches the retriever answered with no document
    above this; the policy searches for nothing (a stop word) or the retriever finds nothing (1: off)."""
    health_record: str = ""
    """JSON file of alarms and checkpoints; empty: health.json in the trainer's output folder."""

    def __post_init__(self) -> None:
        raise_problems("HealthConfig", health_problems(asdict(self)))


def health_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every bad health setting in `values` (a mapping with the field names)."""
    problems = []
    if values["health_action"] not in ACTIONS:
        problems.append(("health_action",
                         f"health_action must be one of {', '.join(ACTIONS)}, got {values['health_action']!r}"))
    if values["health_window"] < 1:
        problems.append(("health_window", f"health_window must be >= 1, got {values['health_window']!r}"))
    if values["health_reward_drop"] < 0:
        problems.append(("health_reward_drop",
                         f"health_reward_drop must be >= 0 (0: off), got {values['health_reward_drop']!r}"))
    for name in ("health_min_format_rate", "health_max_garbled_rate", "health_max_repeat_ratio",
                 "health_max_empty_searches"):
        if not 0 <= values[name] <= 1:
            problems.append((name, f"{name} is a rate, so it must be in [0, 1]; got {values[name]!r}"))
    if not (values["health_lost_format_rate"] == -1 or 0 <= values["health_lost_format_rate"] < 1):
        value = values["health_lost_format_rate"]
        problems.append(("health_lost_format_rate", f"health_lost_format_rate is a rate in [0, 1) (-1: off); got {value!r}"))
    if values["health_min_searches"] < 0:
        problems.append(("health_min_searches",
                         f"health_min_searches must be >= 0 (0: off), got {values['health_min_searches']!r}"))
    return problems

"""The one way a settings dataclass refuses bad values: each declares its fields and a `*_problems` check beside
them, and its `__post_init__` hands the check's findings here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def raise_problems(what: str, problems: Iterable[tuple[str, str]]) -> None:
    """Raise ValueError("invalid <what>: <message>; <message>") when `problems` ((field, message) pairs) holds any."""
    messages = [message for _, message in problems]
    if messages:
        raise ValueError(f"invalid {what}: " + "; ".join(messages))


def integer_problems(get: Callable[[str], Any], minimums: Mapping[str, int]) -> list[tuple[str, str]]:
    """(field, message) for each setting named in `minimums` whose value (read with `get`; None: not given) is not
    an integer (booleans refused) or is below its inclusive minimum."""
    problems = []
    for name, low in minimums.items():
        value = get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append((name, f"{name} must be an integer, got {value!r}"))
        elif value < low:
            problems.append((name, f"{name} must be >= {low}, got {value!r}"))
    return problems


def seconds_problems(get: Callable[[str], Any], minimums: Mapping[str, float]) -> list[tuple[str, str]]:
    """The same for settings that are numbers of seconds (integers or floats; NaN refused)."""
    problems = []
    for name, low in minimums.items():
        value = get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append((name, f"{name} must be a number of seconds, got {value!r}"))
        elif not value >= low:  # also refuses NaN
            problems.append((name, f"{name} must be >= {low}, got {value!r}"))
    return problems


__all__ = ["integer_problems", "raise_problems", "seconds_problems"]

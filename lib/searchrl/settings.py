"""The one way a settings dataclass refuses bad values: each declares its fields and a `*_problems` check beside
them, and its `__post_init__` hands the check's findings here."""

from __future__ import annotations

from collections.abc import Iterable


def raise_problems(what: str, problems: Iterable[tuple[str, str]]) -> None:
    """Raise ValueError("invalid <what>: <message>; <message>") when `problems` ((field, message) pairs) holds any."""
    messages = [message for _, message in problems]
    if messages:
        raise ValueError(f"invalid {what}: " + "; ".join(messages))


__all__ = ["raise_problems"]

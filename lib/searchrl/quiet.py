"""Warnings known to be harmless here, silenced where they arise, so that a run's console shows what matters.

Each filter names one message. They come from inside TRL 1.16, which still calls transformers' pre-v6 names for
activation checkpointing (`gradient_checkpointing*`, `is_gradient_checkpointing`) on every step and every trainer;
the behaviour is unchanged and nothing a user does can avoid them.
"""

from __future__ import annotations

import warnings

_HARMLESS = (
    (FutureWarning, r"`(is_)?gradient_checkpointing\w*` is deprecated and will be removed in v6"),
)


def silence_known_warnings() -> None:
    for category, message in _HARMLESS:
        warnings.filterwarnings("ignore", message=message, category=category)


__all__ = ["silence_known_warnings"]

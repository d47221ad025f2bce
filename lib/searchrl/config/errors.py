"""The schema's error, declared apart from `RunConfig` so that the modules the schema imports raise it too."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A parameter set that cannot describe a run: unknown key, wrong type, out-of-range value or bad file."""

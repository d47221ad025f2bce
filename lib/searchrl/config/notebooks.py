"""Which notebooks take which parameters. Most sections are every notebook's; the few read by some notebooks only
(the eval suite's, the ablations', the report's) name them in `searchrl.config.evaluation.NOTEBOOKS_OF`, and a
params file, ``-p`` value or parameters cell that sets one of their keys for another of the project's notebooks is
refused before anything runs (`RunConfig.merge(..., notebook=...)`, called so by the runner's planning step).

A notebook the project does not have (a copy under another name, a test's) takes every key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from searchrl.config.evaluation import (
    ABLATION_NOTEBOOKS,
    EVAL_SUITE_NOTEBOOKS,
    EXPERIMENT_NOTEBOOKS,
    NOTEBOOKS_OF,
    REPORT_NOTEBOOKS,
)
from searchrl.config.loading import near_hint
from searchrl.config.schema import FIELD_TYPES

__all__ = ["NOTEBOOKS", "SCOPED_FIELDS", "drop_unread_defaults", "notebook_key_problem", "notebook_keys",
           "takes_key"]

# Every notebook of the project (notebooks/<name>.ipynb), by what it runs.
NOTEBOOKS = (*EXPERIMENT_NOTEBOOKS, *ABLATION_NOTEBOOKS, *EVAL_SUITE_NOTEBOOKS, *REPORT_NOTEBOOKS)

# {field: (who reads it, the notebooks that do)} for each field of a section only some notebooks read.
SCOPED_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    f.name: readers for section, readers in NOTEBOOKS_OF.items() for f in dataclasses.fields(section)
}
_DEFAULTS = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
             for section in NOTEBOOKS_OF for f in dataclasses.fields(section)}


def takes_key(notebook: str, key: str) -> bool:
    """Whether `notebook` (its name, e.g. quickstart) takes parameter `key`."""
    readers = SCOPED_FIELDS.get(key)
    return readers is None or notebook not in NOTEBOOKS or notebook in readers[1]


def notebook_keys(notebook: str) -> tuple[str, ...]:
    """The parameters `notebook` takes, in schema order (every one for a notebook the project does not have)."""
    return tuple(name for name in FIELD_TYPES if takes_key(notebook, name))


def notebook_key_problem(key: Any, label: str, notebook: str | None) -> str | None:
    """The message for parameter `key`, given by `label`, that `notebook` does not read; None when it does, when no
    notebook is named, or when `key` is no parameter at all (the unknown-key message says that)."""
    if notebook is None or not isinstance(key, str) or key not in SCOPED_FIELDS or takes_key(notebook, key):
        return None
    readers, names = SCOPED_FIELDS[key]
    hint = near_hint(key, notebook_keys(notebook))
    return (f"{label}: notebook {notebook!r} takes no parameter {key!r}{hint}; it is read by {readers} only: "
            f"{', '.join(names)}")


def drop_unread_defaults(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` without the keys `notebook` does not read that hold their default: a run's saved params.yaml holds
    every key, and only a key whose value differs from its default was set."""
    return {k: v for k, v in values.items()
            if not (isinstance(k, str) and k in _DEFAULTS and not takes_key(notebook, k) and v == _DEFAULTS[k])}

"""The settings of the frozen model that answers from a policy's evidence (R-Search's evidence reward and
R-Search-as-a-Tool), with their checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AUTO", "POLICY", "EvidenceConfig", "answerer_problem", "evidence_problems"]


AUTO = "auto"  # a bundled model of another family when installed, else the policy (with a warning)


POLICY = "policy"  # the policy's own starting model, on purpose (no warning)


@dataclass(frozen=True)
class EvidenceConfig:
    """The frozen model that answers from a policy's evidence: R-Search's evidence reward and R-Search-as-a-Tool."""

    # == evidence ==
    evidence_answerer: str = AUTO
    """Frozen model answering from the policy's evidence (R-Search eq. 4): auto (an installed bundled model of
    another family than the policy, e.g. gemma3-270m; else the policy's starting model, with a warning), policy, a
    bundled name, a local model folder or a hub id."""


def answerer_problem(value: Any) -> str | None:
    """What is wrong with an `evidence_answerer` value, or None (a folder or hub id is checked when it loads)."""
    if not isinstance(value, str) or not value.strip():
        return f"evidence_answerer must be a non-empty string (auto, policy, a model name or path), got {value!r}"
    from searchrl.models import BUNDLED, TINY_POLICIES

    value = value.strip()
    if value in (AUTO, POLICY) or value in BUNDLED or value in TINY_POLICIES:
        return None
    if Path(value).expanduser().exists() or "/" in value:
        return None
    known = ", ".join([AUTO, POLICY, *sorted(BUNDLED), *TINY_POLICIES])
    return (f"evidence_answerer {value!r} is neither one of {known}, an existing model folder, nor a hub id of "
            "the form 'org/name'")


def evidence_problems(values: Mapping[str, Any] | Any) -> list[tuple[str, str]]:
    """(key, message) for every bad `EvidenceConfig` setting in `values` (a mapping or an object with the fields)."""
    value = values.get("evidence_answerer", AUTO) if isinstance(values, Mapping) else getattr(
        values, "evidence_answerer", AUTO)
    problem = answerer_problem(value)
    return [("evidence_answerer", problem)] if problem else []

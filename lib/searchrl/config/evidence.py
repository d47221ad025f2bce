"""The settings of the frozen model that answers from a policy's evidence (R-Search's evidence reward and
R-Search-as-a-Tool), with their checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchrl.config.models import BUNDLED, TINY_POLICIES

__all__ = ["AUTO", "POLICY", "EvidenceConfig", "answerer_problem", "evidence_problems", "split_tool_argument",
           "tool_argument_problem"]


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


def split_tool_argument(arg: str) -> tuple[str, str | None]:
    """(checkpoint, answerer or None) of the text after "evidence_tool:": "<checkpoint>[@<answerer>]".

    The last "@" separates them, so a checkpoint path must not end in "@something" (pass checkpoint= instead).
    """
    checkpoint, sep, answerer = str(arg).strip().rpartition("@")
    if not sep:
        return str(arg).strip(), None
    if not checkpoint.strip() or not answerer.strip():
        raise ValueError(f"evidence_tool:{arg}: write 'evidence_tool:<checkpoint>@<answerer>' with both parts "
                         "non-empty (or drop '@<answerer>' for the default, auto)")
    return checkpoint.strip(), answerer.strip()


def tool_argument_problem(arg: str) -> str | None:
    """What is wrong with the text after "evidence_tool:", or None (the checkpoint is checked when it runs)."""
    try:
        _, answerer = split_tool_argument(arg)
    except ValueError as err:
        return str(err)
    return answerer_problem(answerer) if answerer is not None else None

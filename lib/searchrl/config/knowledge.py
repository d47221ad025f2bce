"""The knowledge split's settings: which facts of the synthetic world the model is taught to know, with their
checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from searchrl.core.settings import raise_problems

__all__ = ["KnowledgeConfig", "knowledge_problems"]


@dataclass(frozen=True)
class KnowledgeConfig:
    """Which synthetic-world facts the cold start teaches the model, and how often it states each one."""

    # == knowledge ==
    knowledge_internal_frac: float = 0.0
    """Share of the synthetic world's facts taught to the model in the cold start (internal: answered from memory
    in an internal-answer span); the rest must be searched. 0: no split, rows carry no knowledge labels."""
    sft_fact_repeats: int = 0
    """How many times the cold start states each internal fact as a short sentence ("The birthplace of X is Y."),
    so that the model memorises it (0: no fact statements; internal facts are then taught only where the templated
    trajectories happen to recall them)."""
    sft_fact_in_span: bool = True
    """Write each fact statement inside the protocol's internal-answer tags, exactly as a recall in a trajectory
    writes it (True), or as a bare sentence, the way pretraining text holds a fact (False). With bare sentences only
    the templated trajectories open the span, so the cold start does not show it many times more often than a
    search (with tags and 8 repeats, 896 statements outnumbered 48 trajectories and the policy stopped searching)."""

    def __post_init__(self) -> None:
        raise_problems("KnowledgeConfig", knowledge_problems({f.name: getattr(self, f.name) for f in fields(self)}))


def knowledge_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every out-of-range knowledge setting in `values` (missing fields are not checked)."""
    problems = []
    frac = values.get("knowledge_internal_frac", 0.0)
    if isinstance(frac, (int, float)) and not 0.0 <= frac <= 1.0:
        problems.append(("knowledge_internal_frac", f"knowledge_internal_frac must be in [0, 1], got {frac!r}"))
    repeats = values.get("sft_fact_repeats", 0)
    if isinstance(repeats, (int, float)) and repeats < 0:
        problems.append(("sft_fact_repeats", f"sft_fact_repeats must be >= 0, got {repeats!r}"))
    return problems

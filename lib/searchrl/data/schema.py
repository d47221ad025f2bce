"""The two record types every layer speaks: a question row and a passage (`Doc`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


@dataclass(frozen=True)
class Doc:
    """One retrievable passage."""

    id: str
    title: str
    text: str

    def as_text(self) -> str:
        """Title and body as one string (what retrievers index and observations show)."""
        return f"{self.title}\n{self.text}" if self.title else self.text


class QARow(TypedDict):
    """One question. `metadata` holds anything source-specific (type, hops, supporting passage ids, ...)."""

    id: str
    question: str
    golden_answers: list[str]
    metadata: dict[str, Any]


def make_row(id: str, question: str, golden_answers: list[str], **metadata: Any) -> QARow:
    """Build a row, checking the fields every consumer relies on."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"row {id!r}: question must be a non-empty string")
    answers = [str(a) for a in golden_answers if str(a).strip()]
    if not answers:
        raise ValueError(f"row {id!r}: needs at least one non-empty golden answer")
    return QARow(id=str(id), question=question.strip(), golden_answers=answers, metadata=dict(metadata))


__all__ = ["Doc", "QARow", "make_row"]

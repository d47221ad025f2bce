"""The record types every layer speaks: a question row, a passage (`Doc`), and the steps of a written trajectory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


def check_rows(rows: Sequence[Mapping], what: str = "evaluate") -> list[Mapping]:
    """Rows as a list, each with a string `question` and non-empty `golden_answers` (clear error otherwise)."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence):
        raise TypeError(f"{what} needs a list of question rows (dicts with question, golden_answers), "
                        f"got {type(rows).__name__}")
    rows = list(rows)
    if not rows:
        raise ValueError(f"{what} needs at least one question row; the list is empty")
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or not isinstance(row.get("question"), str):
            raise TypeError(f"rows[{i}] has no string 'question'; rows look like "
                            "{'id', 'question', 'golden_answers', 'metadata'} (see searchrl.data.schema.make_row)")
        golden = row.get("golden_answers")
        if isinstance(golden, str) or not golden:
            raise ValueError(f"rows[{i}] ({row.get('id', '?')}): 'golden_answers' must be a non-empty list of strings")
    return rows


# ---- the steps of a trajectory written for a cold start; each protocol renders them in its own tags ----------


@dataclass(frozen=True)
class Think:
    """A stretch of reasoning in the model's voice."""

    text: str


@dataclass(frozen=True)
class Search:
    """A query and the documents the retriever returned for it (rendered as the engine would append them)."""

    query: str
    docs: list[Doc]


@dataclass(frozen=True)
class Finish:
    """The last reasoning and the answer. `{answer}` in `reasoning` marks where the answer is named (R1-Searcher++
    writes it there, as \\boxed{}); `evidence` holds quoted sentences for protocols with an evidence box."""

    reasoning: str
    answer: str
    evidence: list[str] = field(default_factory=list)


__all__ = ["Doc", "Finish", "QARow", "Search", "Think", "check_rows", "make_row"]

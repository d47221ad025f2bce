"""Question rows -> the prompt dataset TRL trains on."""

from __future__ import annotations

from datasets import Dataset

from searchrl.data.schema import QARow
from searchrl.protocols.base import SearchProtocol


def prompt_dataset(rows: list[QARow], protocol: SearchProtocol, tokenizer, *, chat: bool = True) -> Dataset:
    """One row per question: `prompt` (the protocol's full prompt text), `question`, `golden_answers`, `id`,
    `qtype`, `hops`, `difficulty` (R1-Searcher's bucket when the rows were labelled, else empty) and `supporting_ids`
    (the passages that hold the answer chain, where the data says; else empty). Columns other than `prompt` reach the
    reward functions as keyword arguments."""
    if not rows:
        raise ValueError("prompt_dataset needs at least one question row")
    return Dataset.from_dict({
        "prompt": [protocol.build_prompt(r["question"], tokenizer, chat=chat) for r in rows],
        "question": [r["question"] for r in rows],
        "golden_answers": [list(r["golden_answers"]) for r in rows],
        "id": [r["id"] for r in rows],
        "qtype": [str(r["metadata"].get("type", "unknown")) for r in rows],
        "hops": [int(r["metadata"].get("hops", 1)) for r in rows],
        "difficulty": [str(r["metadata"].get("difficulty", "")) for r in rows],
        "supporting_ids": [[str(i) for i in r["metadata"].get("supporting_ids") or []] for r in rows],
    })

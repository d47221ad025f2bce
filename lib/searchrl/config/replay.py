"""Replayed retrieval: the record of searches every run keeps, and the retriever name that answers from one.

Every run records what each search asked and returned in ``<run folder>/retrieval/`` (written by
searchrl.retrieval.recording):

- ``record.json``: the record's format, the retriever that answered (its repr and name) and its corpus fingerprint;
- ``searches.jsonl``: one line per query searched, in the order asked: ``{"query", "top_k", "ids", "corpus"}`` (the
  query as the run passed it, the documents' references in rank order, the corpus fingerprint), with ``"scores"``
  when the retriever gives them;
- ``documents.jsonl``: each document returned, once: ``{"ref", "id", "title", "text"}``. ``ref`` is the document's id,
  or ``<id>#<n>`` for a later version of the same id with another text (a web page summarised for another query).

Under several processes each process writes its own pair, ``searches.rank<N>.jsonl`` / ``documents.rank<N>.jsonl``
(process 0: the plain names). ``retriever: replay:<run folder>`` answers from such a record
(searchrl.retrieval.replay). Declared here, beside the other retriever names, so that the schema checks a replay
name without importing the retrieval layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DOCUMENTS_FILE", "RECORD_FOLDER", "RECORD_MANIFEST", "REPLAY_PREFIX", "SEARCHES_FILE", "record_files",
           "replay_fallback_problems", "replay_record"]

REPLAY_PREFIX = "replay:"
RECORD_FOLDER = "retrieval"  # inside a run folder
RECORD_MANIFEST = "record.json"
SEARCHES_FILE = "searches.jsonl"
DOCUMENTS_FILE = "documents.jsonl"


def record_files(process: int = 0) -> tuple[str, str]:
    """(searches file, documents file) of process `process` of a run."""
    if process == 0:
        return SEARCHES_FILE, DOCUMENTS_FILE
    return f"searches.rank{process}.jsonl", f"documents.rank{process}.jsonl"


def replay_record(name: Any) -> Path | None:
    """The record folder a ``replay:<run folder>`` retriever name points at (the run folder's ``retrieval/``, or a
    record folder named directly); None for a name of another form. A replay name whose folder holds no record
    raises ValueError saying what to write. A relative folder is taken from the current folder."""
    if not isinstance(name, str):
        return None
    head, colon, rest = name.strip().partition(":")
    if not colon or head.lower() != REPLAY_PREFIX[:-1]:
        return None
    hint = "write replay:<run folder>, the folder of a run whose searches were recorded (it holds retrieval/)"
    folder = rest.strip()
    if not folder:
        raise ValueError(f"retriever {name!r} names no run folder; {hint}")
    path = Path(folder).expanduser()
    for candidate in (path / RECORD_FOLDER, path):
        if (candidate / SEARCHES_FILE).is_file():
            return candidate.resolve()
    where = path if path.is_absolute() else f"{path} (from {Path.cwd()})"
    if not path.is_dir():
        raise ValueError(f"retriever {name!r}: no folder {where}; {hint}")
    raise ValueError(f"retriever {name!r}: {where} holds no recorded searches ({RECORD_FOLDER}/{SEARCHES_FILE} is "
                     f"missing: the run searched nothing, or predates the record); {hint}")


def replay_fallback_problems(retriever: Any, fallback: Any, retrievers: Any) -> list[tuple[str, str]]:
    """(field, message) for a `replay_fallback` that cannot be used with `retriever`: set without a replay, not a
    string, a replay itself, or a name `retrievers` (the retriever names' `Choices`) does not know."""
    if fallback in ("", None):
        return []
    if not isinstance(fallback, str):
        return [("replay_fallback", f"replay_fallback must be a retriever name, got {type(fallback).__name__}")]
    try:
        replaying = replay_record(retriever) is not None
    except ValueError:
        replaying = True  # the retriever's own check reports its folder
    if not replaying:
        message = (f"replay_fallback is set ({fallback!r}) but retriever {retriever!r} is no replay; write "
                   f"retriever: {REPLAY_PREFIX}<run folder>, or drop replay_fallback")
        return [("replay_fallback", message)]
    if fallback.strip().lower().startswith(REPLAY_PREFIX):
        message = (f"replay_fallback {fallback!r} is a replay; name a live retriever (bm25, dense, a service or web "
                   "search URL) that answers what the record lacks")
        return [("replay_fallback", message)]
    problem = retrievers.problem(fallback)
    return [("replay_fallback", f"replay_fallback: {problem}")] if problem else []

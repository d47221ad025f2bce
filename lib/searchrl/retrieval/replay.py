"""`retriever: replay:<run folder>`: answer every search as a recorded run's retriever answered it.

    retriever = ReplayRetriever("outputs/quickstart/20261202-010203-ab12")   # or make_retriever("replay:...", corpus)
    retriever.search(["who founded Velmora?"], k=3)    # the documents that run got, in its order

Each run records its searches in ``<run folder>/retrieval/`` (searchrl.retrieval.recording; the layout:
searchrl.config.replay). A replay needs only that record: no index, no service, no web API, no key.

- A search is looked up by its query, exactly as the run passed it, and its `top_k`.
- The same (query, top_k) recorded several times with different answers (a web API that changed mid-run, or a
  resumed run over another index) is answered in recorded order: the n-th time it is asked gets the n-th recorded
  answer, and once those run out, the last one again. A rerun that asks what the original asked, in the same order,
  therefore gets exactly what the original got.
- A search the record lacks raises `ReplayMissError` (naming the query, the record and what to do), which the
  rollout engine never retries; or, with a `fallback` (the run's `replay_fallback`), is answered by that live
  retriever, built at the first miss. The recording wrapper of the replaying run records those answers too.

`corpus_fingerprint` (also `fingerprint`) is the recorded corpus fingerprint, for a protocol stamp to cite
("replay:<folder> (corpus fingerprint X)"); `last_fingerprints` says, per query of the last call, which corpus the
answer came from (the recorded one, or the fallback's).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchrl.config.replay import RECORD_MANIFEST, REPLAY_PREFIX, SEARCHES_FILE, record_files, replay_record
from searchrl.core.files import read_json
from searchrl.retrieval.base import Doc, check_k
from searchrl.retrieval.recording import answers_fingerprint, read_jsonl

__all__ = ["ReplayMissError", "ReplayRetriever"]

ScoredDoc = tuple[Doc, "float | None"]
Answer = list[ScoredDoc]


class ReplayMissError(LookupError):
    """A replay was asked a search its record lacks; no retry can answer it."""


class ReplayRetriever:
    """Answers from the recorded searches of a run (see the module docstring).

    Args:
        folder: the run folder (holding ``retrieval/``) or the record folder itself; ``replay:`` may lead it.
        fallback: a live retriever, or a function building one, that answers what the record lacks; None: a miss
            raises `ReplayMissError`.
        corpus: accepted for `make_retriever`'s sake and not used: the record holds the documents.
        process: this process's index under several processes (default: $RANK, else 0): a query its own process
            recorded is answered as that process's record says, before what other processes recorded for it.
    """

    kind = "replay"

    def __init__(self, folder: str | Path, *, fallback: Any | Callable[[], Any] | None = None,
                 corpus: Any = None, process: int | None = None) -> None:
        text = str(folder)
        record = replay_record(text if text.lower().startswith(REPLAY_PREFIX) else REPLAY_PREFIX + text)
        assert record is not None
        self.folder = record
        manifest = read_json(record / RECORD_MANIFEST) or {}
        self.recorded_retriever: str = manifest.get("retriever", "?")
        self.corpus_size: int | None = manifest.get("corpus_size")
        self._answers: dict[tuple[str, int], list[tuple[Answer, str | None]]] = {}
        self.searches = 0  # recorded query lines
        fingerprints: list[str] = []
        process = int(os.environ.get("RANK", "0")) if process is None else process
        files = [record / SEARCHES_FILE, *(path for path in record.glob("searches.rank*.jsonl") if _process_of(path))]
        for searches in sorted(files, key=lambda path: (_process_of(path) != process, _process_of(path))):
            for query, k, answer, source in self._read(searches, record / record_files(_process_of(searches))[1]):
                self._answers.setdefault((query, k), []).append((answer, source))
                self.searches += 1
                if source is not None and source not in fingerprints:
                    fingerprints.append(source)
        recorded = manifest.get("corpus_fingerprint")
        self.corpus_fingerprint: str | None = recorded if recorded is not None else \
            (fingerprints[0] if fingerprints else None)
        self.corpus_fingerprints = fingerprints  # every fingerprint in the record, first seen first
        self._fallback = fallback
        self._asked: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self.last_fingerprints: list[str | None] = []
        self.misses = 0  # searches the record lacked (answered by the fallback)

    @property
    def fingerprint(self) -> str | None:
        """The recorded corpus fingerprint (the same as `corpus_fingerprint`)."""
        return self.corpus_fingerprint

    def __repr__(self) -> str:
        return f"ReplayRetriever({str(self.folder)!r}, corpus fingerprint {self.corpus_fingerprint})"

    def __len__(self) -> int:
        return self.corpus_size if self.corpus_size is not None else len(self._answers)

    @staticmethod
    def _read(searches: Path, documents: Path):
        store = {doc["ref"]: Doc(str(doc["id"]), doc.get("title", ""), doc["text"]) for doc in read_jsonl(documents)}
        for number, line in enumerate(read_jsonl(searches), start=1):
            try:
                docs = [store[ref] for ref in line["ids"]]
            except KeyError as missing:
                raise ValueError(f"{searches}:{number}: document {missing} is not in {documents.name}; the record "
                                 "is damaged (was a file edited or removed?)") from None
            scores = line.get("scores") or [None] * len(docs)
            yield line["query"], int(line["top_k"]), list(zip(docs, scores)), line.get("corpus")

    # ---- the retriever contract -------------------------------------------------------------------------------

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """The recorded documents of each query, in the recorded order."""
        return [[doc for doc, _ in docs] for docs in self.search_scored(queries, k)]

    def search_scored(self, queries: list[str], k: int) -> list[list[ScoredDoc]]:
        """Like `search`, with each passage's recorded score (None where the recorded retriever gave none)."""
        check_k(k, 1)
        if isinstance(queries, str):
            raise TypeError("queries must be a list of strings; wrap a single query as [query]")
        answers: list[list[ScoredDoc] | None] = []
        sources: list[str | None] = []
        missing: list[int] = []
        with self._lock:
            for position, query in enumerate(queries):
                recorded = self._answers.get((query, k))
                if recorded is None:
                    answers.append(None)
                    sources.append(None)
                    missing.append(position)
                    continue
                asked = self._asked.get((query, k), 0)
                self._asked[(query, k)] = asked + 1
                answer, source = recorded[min(asked, len(recorded) - 1)]
                answers.append(list(answer))
                sources.append(source)
        if missing:
            live = self._live(queries[missing[0]], k)
            scored = getattr(live, "search_scored", None)
            asked = [queries[position] for position in missing]
            found = scored(asked, k) if scored is not None else [[(d, None) for d in docs]
                                                                 for docs in live.search(asked, k)]
            source = answers_fingerprint(live, None)
            for position, docs in zip(missing, found, strict=True):
                answers[position], sources[position] = list(docs), source
            self.misses += len(missing)
        self.last_fingerprints = sources
        return answers  # type: ignore[return-value]

    def _live(self, query: str, k: int) -> Any:
        """The fallback retriever (built on first use), or ReplayMissError for `query` when there is none."""
        if self._fallback is None:
            other = sorted({top_k for text, top_k in self._answers if text == query})
            elsewhere = f" (it was recorded with top_k {', '.join(map(str, other))})" if other else ""
            raise ReplayMissError(
                f"replay: the record {self.folder} has no search for {query!r} with top_k={k}{elsewhere}; "
                f"{self.searches} searches are recorded there. A replay answers only what the recorded run asked: "
                "rerun with that run's params.yaml (same model, seed, data and top_k), or set replay_fallback (e.g. "
                "bm25) to search a live retriever for what the record lacks"
            )
        if not hasattr(self._fallback, "search"):
            self._fallback = self._fallback()
        return self._fallback


def _process_of(path: Path) -> int:
    """The process index of a record file: searches.jsonl -> 0, searches.rank3.jsonl -> 3."""
    if path.name == SEARCHES_FILE:
        return 0
    middle = path.name.split(".")[1] if path.name.count(".") == 2 else ""
    return int(middle[4:]) if middle.startswith("rank") and middle[4:].isdigit() else 0

"""Recording every search a run makes, so that `retriever: replay:<run folder>` can answer it again.

    retriever = RecordingRetriever(make_retriever("bm25", corpus), run_dir / "retrieval", corpus=corpus)
    retriever.search(["who founded Velmora?"], k=3)    # answered by BM25, and appended to the record

The wrapper answers exactly as the retriever it wraps (same documents, same errors, same repr, its other attributes
passed through) and appends, per call, one line per query to ``searches.jsonl`` and each document not yet stored to
``documents.jsonl`` (the layout: searchrl.config.replay). Documents go first and each call's lines are written in
one ``write`` and flushed, so a run killed at any point leaves a record whose every complete search line can be
answered; a torn last line is skipped when the record is read. A resumed run appends to its record.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from searchrl.config.replay import RECORD_MANIFEST, record_files
from searchrl.core.files import write_json
from searchrl.retrieval.base import Doc
from searchrl.retrieval.search_r1 import SearchR1Retriever
from searchrl.retrieval.service import corpus_fingerprint
from searchrl.retrieval.web import WebSearchRetriever

__all__ = ["RECORD_FORMAT", "RecordingRetriever", "SearchRecord", "answers_fingerprint", "read_jsonl"]

RECORD_FORMAT = 1


def answers_fingerprint(retriever: Any, corpus: Sequence[Doc] | None) -> str | None:
    """The fingerprint of the corpus `retriever` answers from: its own (a replay's, the recorded one), else that of
    `corpus` (or of the retriever's corpus); None for a web search or a Search-R1 API, which cannot say."""
    own = getattr(retriever, "corpus_fingerprint", None)
    if isinstance(own, str):
        return own
    if isinstance(retriever, (WebSearchRetriever, SearchR1Retriever)):
        return None
    corpus = corpus if corpus is not None else getattr(retriever, "corpus", None)
    return corpus_fingerprint(corpus) if corpus is not None else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a record file, one a line; a torn last line (a run killed mid-write) is skipped."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the run was killed while writing it
            raise ValueError(f"{path}:{number} is not a JSON line; the record was edited or is damaged") from None
    return records


def _digest(doc: Doc) -> bytes:
    return hashlib.blake2b(f"{doc.id}\x1f{doc.title}\x1f{doc.text}".encode(), digest_size=16).digest()


class SearchRecord:
    """The record files of one process in one folder: every recorder writing there in this process shares one, so
    that two retrievers of a run (one per benchmark) never give two documents the same ref."""

    _open: ClassVar[dict[tuple[Path, int], SearchRecord]] = {}
    _opening = threading.Lock()

    def __init__(self, folder: Path, process: int) -> None:
        self.folder = folder
        searches_name, documents_name = record_files(process)
        self.searches_path, self.documents_path = folder / searches_name, folder / documents_name
        self.lock = threading.Lock()
        for path in (self.searches_path, self.documents_path):
            _drop_torn_line(path)  # a run killed mid-write, now resumed: its next lines must start on a line
        self._refs: dict[bytes, str] = {}  # a document's digest -> its ref in documents.jsonl
        self._used: set[str] = set()
        for record in read_jsonl(self.documents_path):  # a resumed run appends to its record
            doc = Doc(record["id"], record.get("title", ""), record["text"])
            self._refs[_digest(doc)] = record["ref"]
            self._used.add(record["ref"])
        self.searches_path.touch()  # a run that searches nothing still leaves a record (of no search)
        self._sizes = self._file_sizes()

    @classmethod
    def open(cls, folder: str | Path, process: int) -> SearchRecord:
        """The record of `process` in `folder` (created if needed), shared within this process."""
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        with cls._opening:
            record = cls._open.get((folder, process))
            # files changed behind its back (removed, or written by another process): read them afresh
            if record is None or record._sizes != record._file_sizes():
                record = cls._open[(folder, process)] = cls(folder, process)
            return record

    def _file_sizes(self) -> tuple[int, int]:
        return _file_size(self.searches_path), _file_size(self.documents_path)

    def append(self, k: int, queries: Sequence[str], answers: Sequence[Sequence[tuple[Doc, Any]]],
               sources: Sequence[str | None]) -> None:
        """Record one call: its new documents, then one line per query (each file in one write)."""
        with self.lock:
            documents, searches = [], []
            for query, docs, source in zip(queries, answers, sources):
                line: dict[str, Any] = {"query": query, "top_k": k,
                                        "ids": [self._ref(doc, documents) for doc, _ in docs], "corpus": source}
                if any(score is not None for _, score in docs):
                    line["scores"] = [score for _, score in docs]
                searches.append(json.dumps(line, ensure_ascii=False) + "\n")
            if documents:  # before the searches that name them
                _append(self.documents_path, documents)
            _append(self.searches_path, searches)
            self._sizes = self._file_sizes()

    def _ref(self, doc: Doc, new_lines: list[str]) -> str:
        """The ref of `doc` in documents.jsonl, adding it (to `new_lines`) when not stored yet."""
        digest = _digest(doc)
        ref = self._refs.get(digest)
        if ref is not None:
            return ref
        ref, version = doc.id, 1
        while ref in self._used:  # the same id with another text: a new version
            version += 1
            ref = f"{doc.id}#{version}"
        self._refs[digest] = ref
        self._used.add(ref)
        new_lines.append(json.dumps({"ref": ref, "id": doc.id, "title": doc.title, "text": doc.text},
                                    ensure_ascii=False) + "\n")
        return ref


class RecordingRetriever:
    """Answers as `inner` does and records each search in `folder` (see the module docstring).

    Args:
        inner: the run's retriever.
        folder: the record folder (``<run folder>/retrieval``), created if needed.
        corpus: the passages `inner` searches, for the corpus fingerprint (default: `inner.corpus` where it has one).
        process: the process index under several processes (each writes its own files); default: $RANK, else 0.
    """

    def __init__(self, inner: Any, folder: str | Path, *, corpus: Sequence[Doc] | None = None,
                 process: int | None = None) -> None:
        self.inner = inner
        self.process = int(os.environ.get("RANK", "0")) if process is None else process
        self.record = SearchRecord.open(folder, self.process)
        self.folder = self.record.folder
        # the fingerprint of the corpus the answers come from (None: a web or Search-R1 API, which cannot say)
        self.corpus_fingerprint = answers_fingerprint(inner, corpus)
        if not (self.folder / RECORD_MANIFEST).is_file():
            write_json(self.folder / RECORD_MANIFEST, {"format_version": RECORD_FORMAT, "retriever": repr(inner),
                                                       "corpus_fingerprint": self.corpus_fingerprint,
                                                       "corpus_size": _size(inner, corpus)})
        self.recorded = 0  # queries recorded by this object
        self.record_s = 0.0  # seconds spent writing the record

    @property
    def fingerprint(self) -> str | None:
        """The same as `corpus_fingerprint`."""
        return self.corpus_fingerprint

    def __repr__(self) -> str:
        return repr(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:
        # anything else (wait_until_up, corpus, cache_info, ...) is the wrapped retriever's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """`inner`'s answer, recorded."""
        return [[doc for doc, _ in docs] for docs in self.search_scored(queries, k)]

    def search_scored(self, queries: list[str], k: int) -> list[list[tuple[Doc, float | None]]]:
        """Like `search`, with each passage's score where `inner` gives them (its `search_scored`), else None."""
        scored = getattr(self.inner, "search_scored", None)
        if scored is not None:
            answers = scored(queries, k)
        else:
            answers = self.inner.search(queries, k)
            if isinstance(answers, (list, tuple)):
                answers = [[(doc, None) for doc in docs] if isinstance(docs, (list, tuple)) else docs
                           for docs in answers]
        if isinstance(queries, (list, tuple)) and isinstance(answers, (list, tuple)) and \
                len(answers) == len(queries) and all(map(_scored_docs, answers)):
            # (anything else is no answer the run can use: the rollout engine raises on it)
            started = time.perf_counter()
            sources = getattr(self.inner, "last_fingerprints", None)
            if not isinstance(sources, list) or len(sources) != len(queries):
                sources = [self.corpus_fingerprint] * len(queries)
            self.record.append(k, queries, answers, sources)
            self.recorded += len(queries)
            self.record_s += time.perf_counter() - started
        return answers


def _scored_docs(docs: Any) -> bool:
    return isinstance(docs, (list, tuple)) and all(isinstance(pair, tuple) and len(pair) == 2 and
                                                   isinstance(pair[0], Doc) for pair in docs)


def _append(path: Path, lines: list[str]) -> None:
    """Append `lines` in one write and flush it to the OS, so a killed process keeps all of them or a torn last."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(lines))


def _drop_torn_line(path: Path) -> None:
    """Cut what follows the last newline of `path` (the half of a line a killed process left), if anything."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


def _file_size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _size(retriever: Any, corpus: Sequence[Doc] | None) -> int | None:
    """Passages searched, where known without asking a service (which may not be up yet)."""
    corpus = corpus if corpus is not None else getattr(retriever, "corpus", None)
    if corpus is not None:
        return len(corpus)
    size = getattr(retriever, "corpus_size", None)
    return size if isinstance(size, int) else None

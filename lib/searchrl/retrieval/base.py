"""The retriever contract and the input checks every retriever shares.

A retriever answers a batch of queries with a ranked list of passages per query:

    retriever.search(["who founded Velmora?", "river through Ostrand"], k=3) -> [[Doc, Doc, Doc], [Doc, Doc, Doc]]

Defined results for awkward input (identical for every kind, enforced here rather than in each retriever):

- ``k < 1`` raises ``ValueError`` (a non-int ``k``, ``TypeError``); ``k`` larger than the corpus returns the whole corpus, ranked.
- An empty list of queries returns ``[]``.
- An empty or whitespace-only query returns ``[]`` for that query (the other queries are answered as usual).
- A query longer than ``MAX_QUERY_CHARS`` characters is cut to its first ``MAX_QUERY_CHARS`` characters, so a
  runaway generation cannot stall tokenisation or embedding.
- Building over an empty corpus raises ``ValueError``.

A built retriever is saved as a folder: ``retriever.json`` (kind, options, corpus size, format version),
``corpus.jsonl`` (one ``{"id", "title", "text"}`` object per line, in index order) and the kind's index files.
``searchrl.retrieval.registry.load_retriever`` rebuilds any kind from such a folder.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from searchrl.config.service import MAX_QUERY_CHARS
from searchrl.data.schema import Doc

MANIFEST_NAME = "retriever.json"
CORPUS_NAME = "corpus.jsonl"
FORMAT_VERSION = 1


@runtime_checkable
class Retriever(Protocol):
    """Anything that answers batches of queries with ranked passages (local index, HTTP client, test stub)."""

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Up to `k` passages per query, best first; one list per query, in query order."""
        ...

    def __len__(self) -> int:
        """Number of passages the retriever searches over."""
        ...


def check_corpus(corpus: Sequence[Doc]) -> list[Doc]:
    """Validate a corpus and return it as a list: non-empty, only `Doc`s, unique ids."""
    if isinstance(corpus, (str, bytes)) or not isinstance(corpus, Sequence):
        raise TypeError(f"corpus must be a list of Doc, got {type(corpus).__name__}")
    if len(corpus) == 0:
        raise ValueError("cannot build a retriever: the corpus is empty (pass at least one Doc)")
    seen: set[str] = set()
    for position, doc in enumerate(corpus):
        if not isinstance(doc, Doc):
            raise TypeError(
                f"corpus[{position}] is a {type(doc).__name__}, not a Doc; "
                "build passages with searchrl.data.schema.Doc(id, title, text)"
            )
        if doc.id in seen:
            # ids identify passages in recall metrics and saved indexes, so a duplicate would corrupt both
            raise ValueError(f"corpus has a duplicate Doc id {doc.id!r} (at position {position}); ids must be unique")
        seen.add(doc.id)
    return list(corpus)


def check_k(k: int, corpus_size: int) -> int:
    """Validate `k` and clamp it to the corpus size (asking for more passages than exist returns them all)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be a positive integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return min(k, corpus_size)


def clean_queries(queries: Sequence[str]) -> list[str]:
    """Strip each query and cut it to `MAX_QUERY_CHARS`; empty results stay as "" (answered with [])."""
    if isinstance(queries, str):
        # a bare string would otherwise be searched character by character
        raise TypeError("queries must be a list of strings; wrap a single query as [query]")
    if not isinstance(queries, Sequence):
        raise TypeError(f"queries must be a list of strings, got {type(queries).__name__}")
    cleaned = []
    for position, query in enumerate(queries):
        if not isinstance(query, str):
            raise TypeError(f"queries[{position}] is a {type(query).__name__}, not a str")
        cleaned.append(query.strip()[:MAX_QUERY_CHARS])
    return cleaned


def write_corpus(corpus: Sequence[Doc], path: Path) -> None:
    """Write passages as jsonl, one `{"id", "title", "text"}` object per line, in index order."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(
            json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n"
            for doc in corpus
        )


def read_corpus(path: Path) -> list[Doc]:
    """Read passages written by `write_corpus` (or any jsonl with id/title/text fields)."""
    docs = []
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                docs.append(Doc(id=str(record["id"]), title=record.get("title", ""), text=record["text"]))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{line_number}: not a passage record with id and text ({error})") from None
    return docs


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """Read `retriever.json` from a saved retriever folder, with errors that say what is missing."""
    directory = Path(directory)
    manifest_path = directory / MANIFEST_NAME
    if not directory.is_dir():
        raise FileNotFoundError(f"no saved retriever at {directory}: the folder does not exist")
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{directory} is not a saved retriever: {MANIFEST_NAME} is missing")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for key in ("kind", "options", "corpus_size"):
        if key not in manifest:
            raise ValueError(f"{manifest_path} has no {key!r} field; re-save the retriever")
    if manifest.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise ValueError(f"{manifest_path} was written by a newer searchrl (format {manifest['format_version']})")
    return manifest


class BaseRetriever(ABC):
    """Shared plumbing for local retrievers: input checks, empty-query handling and the save/load folder layout.

    Subclasses set `kind`, implement `_search_batch` (non-empty queries, `k` already clamped), `_options`,
    `_save_index` and `_load`.
    """

    kind: ClassVar[str] = ""

    def __init__(self, corpus: Sequence[Doc]) -> None:
        self.corpus: list[Doc] = check_corpus(corpus)

    def __len__(self) -> int:
        return len(self.corpus)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} passages, {self._options()})"

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Up to `k` passages per query, best first (see the module docstring for edge cases)."""
        k = check_k(k, len(self))
        cleaned = clean_queries(queries)
        results: list[list[Doc]] = [[] for _ in cleaned]
        live = [position for position, query in enumerate(cleaned) if query]
        if live:
            answers = self._search_batch([cleaned[position] for position in live], k)
            for position, docs in zip(live, answers):
                results[position] = docs
        return results

    @abstractmethod
    def _search_batch(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Answer non-empty, already truncated queries; `k` is between 1 and len(self)."""

    @abstractmethod
    def _options(self) -> dict[str, Any]:
        """Constructor options (JSON-serialisable) that `_load` needs to rebuild this retriever."""

    @abstractmethod
    def _save_index(self, directory: Path) -> None:
        """Write the kind's index files into `directory` (the manifest and corpus are written for you)."""

    @classmethod
    @abstractmethod
    def _load(cls, directory: Path, corpus: list[Doc], options: dict[str, Any], **overrides: Any) -> BaseRetriever:
        """Rebuild from the index files in `directory` without re-indexing the corpus."""

    def save(self, directory: str | Path) -> Path:
        """Save into `directory` (created if needed): manifest, corpus and index files. Returns the folder."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_corpus(self.corpus, directory / CORPUS_NAME)
        self._save_index(directory)
        # the manifest goes last so that a folder with a manifest is always complete
        manifest = {
            "kind": self.kind,
            "format_version": FORMAT_VERSION,
            "corpus_size": len(self),
            "options": self._options(),
        }
        (directory / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path, **overrides: Any) -> BaseRetriever:
        """Load a retriever of this kind saved by `save`. `overrides` change run-time options (e.g. device)."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        if manifest["kind"] != cls.kind:
            raise ValueError(
                f"{directory} holds a {manifest['kind']!r} retriever, not {cls.kind!r}; "
                "use searchrl.retrieval.load_retriever to load any kind"
            )
        corpus = read_corpus(directory / CORPUS_NAME)
        if len(corpus) != manifest["corpus_size"]:
            raise ValueError(
                f"{directory}: {CORPUS_NAME} has {len(corpus)} passages but the manifest says "
                f"{manifest['corpus_size']}; the folder is incomplete or was edited"
            )
        return cls._load(directory, corpus, dict(manifest["options"]), **overrides)


__all__ = [
    "MAX_QUERY_CHARS",
    "BaseRetriever",
    "Doc",
    "Retriever",
    "check_corpus",
    "check_k",
    "clean_queries",
    "read_corpus",
    "read_manifest",
    "write_corpus",
]

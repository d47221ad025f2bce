"""A client of Search-R1's retriever API: search any server that speaks it, as a run's retriever.

    retriever: search_r1+http://127.0.0.1:8000/retrieve          # a params file (no path: /retrieve)
    retriever = SearchR1Retriever("http://127.0.0.1:8000/retrieve", rollout=cfg, service=cfg)

The API (Search-R1's `search_r1/search/retrieval_server.py`, and our own service's ``POST /retrieve``):

- request ``{"queries": [str, ...], "topk": int, "return_scores": bool}``;
- answer ``{"result": [per query: [passage, ...]]}``, where a passage is ``{"document": DOC, "score": float}`` when
  scores were asked for, else DOC itself; DOC is a corpus row, ``{"id": ..., "contents": "\\"Title\\"\\ntext"}``
  (wiki-18's layout: the quoted title on the first line), or ``{"title", "text", "contents"}`` as Search-R1's BM25
  server sends without ids.

Each DOC becomes a `Doc`: its id (or, without one, ``sha1:`` and a digest of its contents, so a passage keeps one id
across searches), the first line of ``contents`` unquoted as the title and the rest as the text (``title`` and
``text`` fields win when present). The client asks for scores, so `search_scored` gives them.

Same rules as the client of our own service (`searchrl.retrieval.http`, whose retry loop, connections and cache it
reuses): input checks, empty queries answered with [] locally, queries cut to `MAX_QUERY_CHARS`, batches split to
`service_max_queries`, retries with doubling waits within `retriever_timeout_s`, a result cache
(`service_cache_size`), `service_empty_streak`, `wait_until_up(service_wait_s)` at start (it knocks with a one-query
search: the API has no health endpoint), and loud failures: a server that stays down raises
`ServiceUnavailableError`, an answer that is not one list of passages per query raises `ServiceError`. The API says
neither how many passages it holds nor which corpus, so `k` is sent as asked and the corpus is not checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from searchrl.config.service import ServiceConfig, search_r1_url, service_url
from searchrl.retrieval.base import Doc, check_k, clean_queries
from searchrl.retrieval.http import (
    CacheInfo,
    EmptyStreak,
    HTTPRetriever,
    KeepAliveConnections,
    LRUCache,
    Retries,
    RetryPolicy,
    ServiceError,
)

ScoredDoc = tuple[Doc, "float | None"]
_PROBE_QUERY = "retrieval service check"  # what `wait_until_up` searches for: any answer means the server is up


def parse_contents(contents: str) -> tuple[str, str]:
    """(title, text) of a Search-R1 corpus row's ``contents``: the first line, without its quotes, and the rest; a
    single line is all text."""
    first, newline, rest = contents.partition("\n")
    if not newline:
        return "", contents
    title = first.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, rest


def document_to_doc(document: Any) -> Doc:
    """A `Doc` from one DOC of Search-R1's answer; TypeError / KeyError for anything else."""
    if not isinstance(document, dict):
        raise TypeError(f"a passage must be an object, got {type(document).__name__}")
    contents = document.get("contents")
    if isinstance(document.get("text"), str):
        title, text = str(document.get("title") or ""), document["text"]
    elif isinstance(contents, str):
        title, text = parse_contents(contents)
    else:
        raise KeyError("contents")
    if document.get("id") is not None:
        passage_id = str(document["id"])
    else:
        body = contents if isinstance(contents, str) else f'"{title}"\n{text}'
        passage_id = "sha1:" + hashlib.sha1(body.encode("utf-8")).hexdigest()[:16]
    return Doc(passage_id, title, text)


class SearchR1Retriever:
    """Searches a server speaking Search-R1's retriever API at `url` (see the module docstring).

    Args:
        url: ``http://HOST:PORT/retrieve`` (also ``search_r1+http://...``; no path: /retrieve).
        rollout: timeouts and retries (a `RolloutConfig`, or a `RunConfig`); None: one attempt, no timeout of its
            own (the rollout engine then times out and retries the whole call).
        service: cache size, batch size and empty-result guard (a `ServiceConfig`, or a `RunConfig`).
        corpus: accepted for `make_retriever`'s sake and not used: the API cannot say which corpus it serves.
    """

    kind = "search_r1"
    wait_until_up = HTTPRetriever.wait_until_up  # the same wait, knocking with `_knock`

    def __init__(self, url: str, *, rollout: RetryPolicy | None = None, service: ServiceConfig | None = None,
                 corpus: Sequence[Doc] | None = None) -> None:
        parsed = search_r1_url(url) or service_url(url)
        if parsed is None:
            raise ValueError(f"{url!r} is not a Search-R1 retriever URL; write search_r1+http://HOST:PORT/retrieve")
        self.url = parsed
        self.retry = Retries.of(rollout)
        self.timeout_s, self.retries, self.backoff_s = self.retry.timeout_s, self.retry.retries, self.retry.backoff_s
        self.service = service if service is not None else ServiceConfig()
        self._path = urlsplit(self.url).path or "/retrieve"
        self._cache = LRUCache(self.service.service_cache_size)
        self._connections = KeepAliveConnections(self.url)
        self._empty = EmptyStreak(self.service.service_empty_streak, f"the Search-R1 retriever at {self.url}")
        self.requests = 0  # HTTP requests sent (attempts, retries included)

    def __repr__(self) -> str:
        return f"SearchR1Retriever({self.url!r})"

    # ---- the retriever contract -------------------------------------------------------------------------------

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Up to `k` passages per query, best first; one list per query (see `searchrl.retrieval.base`)."""
        return [[doc for doc, _ in docs] for docs in self.search_scored(queries, k)]

    def search_scored(self, queries: list[str], k: int) -> list[list[ScoredDoc]]:
        """Like `search`, with each passage's score as the server sent it (None where it sent none)."""
        check_k(k, 1)
        cleaned = clean_queries(queries)
        if not any(cleaned):
            return [[] for _ in cleaned]
        return self._cache.results(cleaned, k, lambda missing: self._fetch_watched(missing, k))

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the result cache so far."""
        return self._cache.info()

    def start_command(self) -> str:
        """A command that serves an index folder (DIR) where this client looks: our service answers /retrieve."""
        parts = urlsplit(self.url)
        host = "" if parts.hostname in ("127.0.0.1", "localhost") else f" --host {parts.hostname}"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"python -m searchrl.retrieval.serve --index DIR{host} --port {port}"

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        self._connections.close()

    # ---- internals ----------------------------------------------------------------------------------------------

    def _check_up(self) -> None:
        deadline = self.retry.deadline()
        self.retry.call(lambda: self._knock(deadline), deadline, who=f"the Search-R1 retriever at {self.url}",
                        hint="check it is running and reachable, or raise retriever_timeout_s / retriever_retries")

    def _knock(self, deadline: float | None) -> None:
        body = self._attempt({"queries": [_PROBE_QUERY], "topk": 1, "return_scores": True}, deadline)
        self._parse_results(body, 1)

    def _fetch_watched(self, queries: list[str], k: int) -> dict[str, list[ScoredDoc]]:
        deadline = self.retry.deadline()
        answers: dict[str, list[ScoredDoc]] = {}
        limit = self.service.service_max_queries
        for start in range(0, len(queries), limit):
            chunk = queries[start:start + limit]
            payload = {"queries": chunk, "topk": k, "return_scores": True}
            body = self.retry.call(
                lambda payload=payload: self._attempt(payload, deadline), deadline,
                who=f"the Search-R1 retriever at {self.url}",
                hint="check it is running (e.g. python -m searchrl.retrieval.serve --index DIR, or Search-R1's "
                     "retrieval_server.py) and reachable, or raise retriever_timeout_s / retriever_retries")
            for query, docs in zip(chunk, self._parse_results(body, len(chunk)), strict=True):
                answers[query] = docs[:k]
        self._empty.watch([answers[q] for q in queries])
        return answers

    def _attempt(self, payload: dict[str, Any], deadline: float | None) -> Any:
        # the request, statuses and JSON decoding are those of our own service's client
        return HTTPRetriever._attempt(self, "POST", self._path, payload, deadline)

    _prefix = ""  # read by HTTPRetriever._attempt: the whole path is the endpoint's

    def _parse_results(self, body: Any, expected: int) -> list[list[ScoredDoc]]:
        results = body.get("result") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != expected:
            got = f"{len(results)} result lists" if isinstance(results, list) else repr(body)[:200]
            raise ServiceError(f"the Search-R1 retriever at {self.url} answered {got} for {expected} queries; "
                               "expected {\"result\": [one list of passages per query]}")
        try:
            return [[self._scored(item) for item in docs] for docs in results]
        except (KeyError, TypeError, ValueError) as error:
            raise ServiceError(f"the Search-R1 retriever at {self.url} sent a passage that is neither "
                               f"{{\"document\": {{\"id\", \"contents\"}}, \"score\"}} nor {{\"id\", \"contents\"}} "
                               f"({type(error).__name__}: {error})") from None

    @staticmethod
    def _scored(item: Any) -> ScoredDoc:
        if isinstance(item, dict) and isinstance(item.get("document"), dict):
            score = item.get("score")
            return document_to_doc(item["document"]), None if score is None else float(score)
        return document_to_doc(item), None


__all__ = ["SearchR1Retriever", "document_to_doc", "parse_contents"]

"""A retriever that searches a shared retrieval service over HTTP, interchangeable with the in-process ones.

    retriever = HTTPRetriever("http://127.0.0.1:8000", rollout=cfg, service=cfg)   # or make_retriever("http://...")
    retriever.search(["who founded Velmora?"], k=3) -> [[Doc, Doc, Doc]]

Same contract as `searchrl.retrieval.base`: input checks, empty queries answered with [] locally, queries cut to
`MAX_QUERY_CHARS`, one result list per query. On top of it:

- **Timeouts and retries** come from the `RolloutConfig` passed as `rollout` (retriever_timeout_s,
  retriever_retries, retriever_backoff_s; a `RunConfig` is one): a connection failure, timeout or 5xx answer is
  retried with doubling waits, and a whole `search` call never outlasts retriever_timeout_s, so the rollout
  engine's own timeout (the same setting) still decides when a batch failed. A 4xx answer (a request the service
  refuses) is not retried: it would be refused again. Without `rollout`, one attempt and no timeout of its own,
  like an in-process retriever: the caller's (the rollout engine's) timeout and retries apply.
- **Loud failures**: a service that stays down raises `ServiceUnavailableError`; a malformed answer, a service
  over a different corpus than the run's, or `service_empty_streak` non-empty queries in a row without a passage
  raise `ServiceError`. Never an empty list standing in for an outage.
- **An LRU cache** of results (`service_cache_size` entries, one per query and k): rollouts repeat queries.

Only the standard library is used, so trainers need no web framework; one keep-alive connection per thread.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from searchrl.retrieval.base import Doc, check_k, clean_queries
from searchrl.retrieval.service import HEALTH_PATH, SEARCH_PATH, ServiceConfig, corpus_fingerprint, service_url

ScoredDoc = tuple[Doc, "float | None"]
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
_NO_TIMEOUT_S = None  # retriever_timeout_s == 0 means wait forever, as in the rollout engine


class RetryPolicy(Protocol):
    """The retry settings, as `searchrl.rollout.RolloutConfig` declares them (retrieval sits below the rollout
    layer, so it reads the fields rather than importing the class)."""

    retriever_timeout_s: float
    retriever_retries: int
    retriever_backoff_s: float


class ServiceError(RuntimeError):
    """The retrieval service answered, but not usefully (refused the request, malformed answer, wrong corpus)."""


class ServiceUnavailableError(ConnectionError):
    """The retrieval service could not be reached (or kept failing) within the configured retries and timeout."""


class _Retryable(Exception):
    """One failed attempt worth repeating (connection error, timeout, 5xx)."""


@dataclass
class CacheInfo:
    """Counts of the client's result cache (per query, not per request)."""

    hits: int
    misses: int
    size: int
    capacity: int


class _LRU:
    """A small thread-safe least-recently-used map."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Any) -> Any | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
            return None

    def put(self, key: Any, value: Any) -> None:
        if not self.capacity:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class HTTPRetriever:
    """Searches the retrieval service at `url` (see the module docstring).

    Args:
        url: the service, ``http://HOST:PORT`` (also ``http:HOST:PORT``; a path prefix is kept).
        rollout: timeouts and retries (a `RolloutConfig`, or a `RunConfig`, which is one); None: one attempt, no
            timeout of its own (the rollout engine then times out and retries the whole call).
        service: cache size and empty-result guard (a `ServiceConfig`, or a `RunConfig`).
        corpus: the passages this run expects; when given, the service must serve exactly these (checked once,
            on first contact), so that passage ids in recall metrics and trajectories mean the same thing.
    """

    kind = "http"

    def __init__(self, url: str, *, rollout: RetryPolicy | None = None, service: ServiceConfig | None = None,
                 corpus: Sequence[Doc] | None = None) -> None:
        parsed = service_url(url)
        if parsed is None:
            raise ValueError(f"{url!r} is not a service URL; write http://HOST:PORT")
        self.url = parsed
        self.rollout = rollout
        self.timeout_s = rollout.retriever_timeout_s if rollout is not None else 0.0
        self.retries = rollout.retriever_retries if rollout is not None else 0
        self.backoff_s = rollout.retriever_backoff_s if rollout is not None else 0.0
        self.service = service if service is not None else ServiceConfig()
        parts = urlsplit(self.url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._expected = None if corpus is None else (len(corpus), corpus_fingerprint(corpus))
        self._cache = _LRU(self.service.service_cache_size)
        self._local = threading.local()  # one keep-alive connection per thread
        self._health: dict[str, Any] | None = None
        self._state_lock = threading.Lock()
        self._empty_streak = 0
        self.requests = 0  # HTTP requests sent (attempts, retries included)

    def __repr__(self) -> str:
        return f"HTTPRetriever({self.url!r})"

    # ---- the retriever contract -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.health()["passages"])

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Up to `k` passages per query, best first; one list per query (see `searchrl.retrieval.base`)."""
        return [[doc for doc, _ in docs] for docs in self.search_scored(queries, k)]

    def search_scored(self, queries: list[str], k: int) -> list[list[ScoredDoc]]:
        """Like `search`, with each passage's score from the service (None where the retriever kind has none)."""
        check_k(k, 1)  # type and range, before any network call
        cleaned = clean_queries(queries)
        if not any(cleaned):
            return [[] for _ in cleaned]
        k = min(k, len(self))  # clamped to the corpus, as in-process; k=1000 and k=len(corpus) share cache entries
        results: list[list[ScoredDoc] | None] = [[] if not q else self._cache.get((q, k)) for q in cleaned]
        missing = list(dict.fromkeys(q for q, r in zip(cleaned, results) if r is None))  # each query asked once
        if missing:
            answers = self._fetch(missing, k)
            self._watch_empty_streak([answers[q] for q in missing])
            for query in missing:
                self._cache.put((query, k), answers[query])
            results = [answers[q] if r is None else r for q, r in zip(cleaned, results)]
        return [list(r) for r in results]

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the result cache so far (a query answered from the cache is a hit)."""
        return CacheInfo(self._cache.hits, self._cache.misses, len(self._cache), self._cache.capacity)

    def health(self) -> dict[str, Any]:
        """The service's /health answer (fetched with retries on first use, then kept); checks the corpus."""
        if self._health is None:
            answer = self._request("GET", HEALTH_PATH, None, deadline=self._deadline())
            if not isinstance(answer, dict) or not isinstance(answer.get("passages"), int):
                raise ServiceError(f"{self.url}{HEALTH_PATH} answered {str(answer)[:200]!r}, not a health record; "
                                   "is a searchrl retrieval service listening there?")
            self._check_corpus(answer)
            self._health = answer
        return self._health

    # ---- internals ----------------------------------------------------------------------------------------------

    def _check_corpus(self, health: dict[str, Any]) -> None:
        if not health.get("ok") or health["passages"] < 1:
            raise ServiceError(f"the retrieval service at {self.url} reports no passages ({health}); "
                               "start it on a built index (python -m searchrl.retrieval.serve build ...)")
        if self._expected is None:
            return
        size, fingerprint = self._expected
        if (health["passages"], health.get("corpus_fingerprint")) != (size, fingerprint):
            raise ServiceError(
                f"the retrieval service at {self.url} serves a different corpus ({health['passages']} passages, "
                f"fingerprint {health.get('corpus_fingerprint')}) than this run's ({size} passages, fingerprint "
                f"{fingerprint}); build its index from this run's corpus, or point the run at the right service"
            )

    def _watch_empty_streak(self, answers: list[list[ScoredDoc]]) -> None:
        limit = self.service.service_empty_streak
        with self._state_lock:
            for docs in answers:
                self._empty_streak = 0 if docs else self._empty_streak + 1
            streak = self._empty_streak
        if limit and streak >= limit:
            raise ServiceError(
                f"the retrieval service at {self.url} returned no passage for the last {streak} queries in a row; "
                "it is probably serving an empty or the wrong index (raise service_empty_streak, or 0 to allow this)"
            )

    def _deadline(self) -> float | None:
        return time.monotonic() + self.timeout_s if self.timeout_s else None

    def _fetch(self, queries: list[str], k: int) -> dict[str, list[ScoredDoc]]:
        """Answers for distinct, non-empty queries, in chunks the service accepts."""
        deadline = self._deadline()
        limit = min(self.service.service_max_queries, int(self.health()["limits"]["max_queries"]))
        answers: dict[str, list[ScoredDoc]] = {}
        for start in range(0, len(queries), limit):
            chunk = queries[start:start + limit]
            body = self._request("POST", SEARCH_PATH, {"queries": chunk, "top_k": k}, deadline=deadline)
            for query, docs in zip(chunk, self._parse_results(body, len(chunk)), strict=True):
                answers[query] = docs
        return answers

    def _parse_results(self, body: Any, expected: int) -> list[list[ScoredDoc]]:
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != expected:
            got = f"{len(results)} result lists" if isinstance(results, list) else repr(body)[:200]
            raise ServiceError(f"the retrieval service at {self.url} answered {got} for {expected} queries; "
                               "expected one list of passages per query")
        try:
            return [[(Doc(str(d["id"]), d.get("title", ""), d["text"]), d.get("score")) for d in docs]
                    for docs in results]
        except (KeyError, TypeError) as error:
            raise ServiceError(f"the retrieval service at {self.url} sent a passage without id/text ({error})") from None

    def _request(self, method: str, path: str, payload: Any, *, deadline: float | None) -> Any:
        """One JSON request, retried on connection failures, timeouts and 5xx with doubling waits."""
        failures: list[str] = []
        out_of_time = ""
        for attempt in range(self.retries + 1):
            if attempt:
                wait = self.backoff_s * 2 ** (attempt - 1)
                if deadline is not None and time.monotonic() + wait >= deadline:
                    out_of_time = f" within retriever_timeout_s={self.timeout_s}"
                    break
                time.sleep(wait)
            try:
                return self._attempt(method, path, payload, deadline)
            except _Retryable as error:
                failures.append(str(error))
        raise ServiceUnavailableError(
            f"the retrieval service at {self.url} failed {len(failures)} time(s){out_of_time} (last: {failures[-1]}); "
            "check it is running (python -m searchrl.retrieval.serve --index DIR) and reachable, or raise "
            "retriever_timeout_s / retriever_retries"
        )

    def _attempt(self, method: str, path: str, payload: Any, deadline: float | None) -> Any:
        timeout = _NO_TIMEOUT_S if deadline is None else deadline - time.monotonic()
        if timeout is not None and timeout <= 0:
            raise _Retryable(f"timed out (retriever_timeout_s={self.timeout_s})")
        body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.requests += 1
        connection = self._connection(timeout)
        try:
            connection.request(method, self._prefix + path, body=body, headers=headers)
            response = connection.getresponse()
            status, data = response.status, response.read()
        except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out, half-sent
            self._drop_connection()
            kind = f"timed out after {timeout:.3g} s" if isinstance(error, TimeoutError) else \
                f"{type(error).__name__}: {error}"
            raise _Retryable(kind) from None
        if status in _RETRYABLE_STATUS:
            raise _Retryable(f"HTTP {status}: {_detail(data)}")
        if status != 200:
            raise ServiceError(f"the retrieval service at {self.url} refused {method} {path} with HTTP {status}: "
                               f"{_detail(data)}")
        try:
            return json.loads(data)
        except ValueError:
            raise ServiceError(f"the retrieval service at {self.url} answered {method} {path} with non-JSON "
                               f"{data[:200]!r}") from None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = cls(self._host, self._port, timeout=timeout)
            self._local.connection = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        self._drop_connection()


def _detail(data: bytes) -> str:
    """The service's error message (FastAPI's {"detail": ...}) or the start of the body."""
    try:
        detail = json.loads(data).get("detail")
    except (ValueError, AttributeError):
        detail = None
    if detail is None:
        return data[:200].decode("utf-8", "replace")
    return detail if isinstance(detail, str) else json.dumps(detail)[:500]


__all__ = ["CacheInfo", "HTTPRetriever", "ServiceError", "ServiceUnavailableError"]

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
- **Waiting for a late service**: `wait_until_up(service_wait_s)` holds a run at start until the service answers,
  saying so every few seconds. After an outage the corpus is checked again on the next contact: a restarted
  service may serve another index.

Only the standard library is used, so trainers need no web framework; one keep-alive connection per thread.
The retry loop (`Retries`), the per-thread connections (`KeepAliveConnections`) and the cache (`LRUCache`) are
shared with the web-search retriever (`searchrl.retrieval.web`).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from searchrl.config.service import ServiceConfig
from searchrl.retrieval.base import Doc, check_k, clean_queries
from searchrl.retrieval.service import HEALTH_PATH, SEARCH_PATH, corpus_fingerprint, service_url

ScoredDoc = tuple[Doc, "float | None"]
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_NO_TIMEOUT_S = None  # retriever_timeout_s == 0 means wait forever, as in the rollout engine
_WAIT_POLL_S = 0.5  # how often `wait_until_up` knocks: cheap (one /health request), and a start is seen quickly
_WAIT_NOTICE_S = 5.0  # how often it says it is still waiting
T = TypeVar("T")


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


class RetryableFailure(Exception):
    """One failed attempt worth repeating (connection error, timeout, 5xx)."""


@dataclass(frozen=True)
class Retries:
    """How a remote retriever retries: `retries` more attempts after the first, waits of `backoff_s` doubling each
    time, and the whole call within `timeout_s` (0: no limit of its own)."""

    timeout_s: float = 0.0
    retries: int = 0
    backoff_s: float = 0.0

    @classmethod
    def of(cls, rollout: RetryPolicy | None) -> Retries:
        """The settings of a `RolloutConfig` (or `RunConfig`); None: one attempt, no timeout of its own, so the
        caller's (the rollout engine's) timeout and retries apply."""
        if rollout is None:
            return cls()
        return cls(rollout.retriever_timeout_s, rollout.retriever_retries, rollout.retriever_backoff_s)

    def deadline(self) -> float | None:
        """When a call starting now must be over (None: never)."""
        return time.monotonic() + self.timeout_s if self.timeout_s else None

    def time_left(self, deadline: float | None) -> float | None:
        """Seconds one attempt may still take before `deadline`; raises `RetryableFailure` when none are left."""
        if deadline is None:
            return _NO_TIMEOUT_S
        left = deadline - time.monotonic()
        if left <= 0:
            raise RetryableFailure(f"timed out (retriever_timeout_s={self.timeout_s})")
        return left

    def call(self, attempt: Callable[[], T], deadline: float | None, *, who: str, hint: str) -> T:
        """`attempt()`, repeated while it raises `RetryableFailure`, with doubling waits and within `deadline`.

        When every attempt failed, raises `ServiceUnavailableError` saying `who` failed how often, the last reason,
        then `hint` (what the user can check or change).
        """
        failures: list[str] = []
        out_of_time = ""
        for number in range(self.retries + 1):
            if number:
                wait = self.backoff_s * 2 ** (number - 1)
                if deadline is not None and time.monotonic() + wait >= deadline:
                    out_of_time = f" within retriever_timeout_s={self.timeout_s}"
                    break
                time.sleep(wait)
            try:
                return attempt()
            except RetryableFailure as error:
                failures.append(str(error))
        raise ServiceUnavailableError(
            f"{who} failed {len(failures)} time(s){out_of_time} (last: {failures[-1]}); {hint}"
        )


class KeepAliveConnections:
    """One keep-alive connection per thread to one host (an `http.client` connection serves one thread at a time)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._host, self._port = parts.hostname, parts.port
        self._local = threading.local()

    def exchange(self, method: str, target: str, body: bytes | None, headers: dict[str, str],
                 timeout: float | None, *, max_bytes: int | None = None) -> tuple[int, bytes, dict[str, str]]:
        """Send one request to `target` (path and query) and read the answer: (status, body, headers with
        lower-case names). With `max_bytes`, at most that much of the body is read (close the connection after).

        A refused, reset, timed-out or half-sent exchange raises `RetryableFailure` (and the connection is
        dropped, so the next attempt opens a fresh one).
        """
        connection = self._connection(timeout)
        try:
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read() if max_bytes is None else response.read(max_bytes)
            return response.status, data, {name.lower(): value for name, value in response.getheaders()}
        except (OSError, http.client.HTTPException) as error:
            self.close()
            timed_out = isinstance(error, TimeoutError) and timeout is not None  # else the OS gave up connecting
            kind = f"timed out after {timeout:.3g} s" if timed_out else f"{type(error).__name__}: {error}"
            raise RetryableFailure(kind) from None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._cls(self._host, self._port, timeout=timeout)
            self._local.connection = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


@dataclass
class CacheInfo:
    """Counts of the client's result cache (per query, not per request)."""

    hits: int
    misses: int
    size: int
    capacity: int


class LRUCache:
    """A small thread-safe least-recently-used map (capacity 0: stores nothing)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Any) -> Any | None:
        """The value under `key` (now the most recently used), or None; counted as a hit or a miss."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
            return None

    def put(self, key: Any, value: Any) -> None:
        """Store `value` under `key`, dropping the least recently used entry when full."""
        if not self.capacity:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def info(self) -> CacheInfo:
        """Hits and misses so far, with the current size and the capacity."""
        return CacheInfo(self.hits, self.misses, len(self), self.capacity)

    def results(self, queries: list[str], k: int, fetch) -> list[list[Any]]:
        """One result list per query of `queries` (cleaned; an empty one is answered with []): from the cache where
        it holds (query, k), the rest from `fetch(missing) -> {query: results}`, each distinct query asked once and
        its results cached."""
        results: list[list[Any] | None] = [[] if not q else self.get((q, k)) for q in queries]
        missing = list(dict.fromkeys(q for q, r in zip(queries, results) if r is None))
        if missing:
            answers = fetch(missing)
            for query in missing:
                self.put((query, k), answers[query])
            results = [answers[q] if r is None else r for q, r in zip(queries, results)]
        return [list(r) for r in results]


class EmptyStreak:
    """Non-empty queries answered without a passage, counted in a row across threads; at `limit` of them (0: never)
    the remote retriever is probably serving an empty or the wrong index, and `watch` raises."""

    def __init__(self, limit: int, who: str) -> None:
        self.limit, self.who = limit, who
        self._lock = threading.Lock()
        self._streak = 0

    def watch(self, answers: list[list[ScoredDoc]]) -> None:
        with self._lock:
            for docs in answers:
                self._streak = 0 if docs else self._streak + 1
            streak = self._streak
        if self.limit and streak >= self.limit:
            raise ServiceError(
                f"{self.who} returned no passage for the last {streak} queries in a row; "
                "it is probably serving an empty or the wrong index (raise service_empty_streak, or 0 to allow this)"
            )


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
        self.retry = Retries.of(rollout)
        self.timeout_s, self.retries, self.backoff_s = self.retry.timeout_s, self.retry.retries, self.retry.backoff_s
        self.service = service if service is not None else ServiceConfig()
        self._prefix = urlsplit(self.url).path.rstrip("/")
        self._expected = None if corpus is None else (len(corpus), corpus_fingerprint(corpus))
        self._cache = LRUCache(self.service.service_cache_size)
        self._connections = KeepAliveConnections(self.url)
        self._health: dict[str, Any] | None = None
        self._empty = EmptyStreak(self.service.service_empty_streak, f"the retrieval service at {self.url}")
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
        return self._cache.results(cleaned, k, lambda missing: self._fetch_watched(missing, k))

    def _fetch_watched(self, missing: list[str], k: int) -> dict[str, list[ScoredDoc]]:
        try:
            answers = self._fetch(missing, k)
        except ServiceUnavailableError:
            self._health = None  # a service that went away may come back over another index: check it again
            raise
        self._empty.watch([answers[q] for q in missing])
        return answers

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the result cache so far (a query answered from the cache is a hit)."""
        return self._cache.info()

    def health(self) -> dict[str, Any]:
        """The service's /health answer (fetched with retries on first use, then kept); checks the corpus."""
        if self._health is None:
            self._health = self._checked_health(self._request("GET", HEALTH_PATH, None, deadline=self._deadline()))
        return self._health

    def wait_until_up(self, wait_s: float, *, say: Callable[[str], None] = print,
                      every_s: float = _WAIT_NOTICE_S) -> float:
        """Hold on until the service answers /health (checked as `health` checks it), for at most `wait_s` seconds,
        saying every `every_s` seconds what it waits for; returns the seconds waited.

        A run calls this before its first search, so that a service still loading its index delays the run instead
        of failing it. Raises `ServiceUnavailableError` naming service_wait_s and the command that starts a service
        when none answered in time; a service that answers wrongly (another corpus, no passages) raises
        `ServiceError` at once, since waiting would not change it. `wait_s` 0: one `health()` call, with the
        client's own retries.
        """
        if not wait_s:
            self._check_up()
            return 0.0
        started = time.monotonic()
        deadline = started + wait_s
        next_notice, said = started, False
        while True:
            # one knock at a time: the client's retries and backoff would only blur when the service came up
            knock_deadline = min(deadline, time.monotonic() + (self.timeout_s or wait_s))
            try:
                self._knock(knock_deadline)
            except RetryableFailure as error:
                last = str(error)
            else:
                waited = time.monotonic() - started
                if said:
                    say(f"the retrieval service at {self.url} is up after {waited:.1f} s of waiting")
                return waited
            now = time.monotonic()
            if now >= next_notice:
                say(f"waiting for the retrieval service at {self.url} ({now - started:.0f}s of {wait_s:g}s, "
                    f"service_wait_s; last: {last}); start it with `{self.start_command()}`")
                next_notice, said = now + every_s, True
            time.sleep(max(0.0, min(_WAIT_POLL_S, deadline - now)))
            if time.monotonic() >= deadline:  # checked before knocking: a knock needs time left to mean anything
                raise ServiceUnavailableError(
                    f"the retrieval service at {self.url} did not answer within service_wait_s={wait_s:g} s (last: "
                    f"{last}); start it with `{self.start_command()}` (build DIR first with `python -m "
                    "searchrl.retrieval.serve build --corpus ... --out DIR`), or raise service_wait_s")

    def start_command(self) -> str:
        """The command that serves an index folder (DIR) where this client looks for the service."""
        parts = urlsplit(self.url)
        host = "" if parts.hostname in ("127.0.0.1", "localhost") else f" --host {parts.hostname}"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"python -m searchrl.retrieval.serve --index DIR{host} --port {port}"

    # ---- internals ----------------------------------------------------------------------------------------------

    def _check_up(self) -> None:
        """Reach the service once, with the client's own retries (`wait_until_up` with no wait)."""
        self.health()

    def _knock(self, deadline: float | None) -> None:
        """One attempt to reach the service (`wait_until_up`): its health, checked and kept; `RetryableFailure`
        while it does not answer."""
        self._health = self._checked_health(self._attempt("GET", HEALTH_PATH, None, deadline))

    def _checked_health(self, answer: Any) -> dict[str, Any]:
        if not isinstance(answer, dict) or not isinstance(answer.get("passages"), int):
            raise ServiceError(f"{self.url}{HEALTH_PATH} answered {str(answer)[:200]!r}, not a health record; "
                               "is a searchrl retrieval service listening there?")
        self._check_corpus(answer)
        return answer

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


    def _deadline(self) -> float | None:
        return self.retry.deadline()

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
        return self.retry.call(
            lambda: self._attempt(method, path, payload, deadline), deadline,
            who=f"the retrieval service at {self.url}",
            hint="check it is running (python -m searchrl.retrieval.serve --index DIR) and reachable, or raise "
                 "retriever_timeout_s / retriever_retries")

    def _attempt(self, method: str, path: str, payload: Any, deadline: float | None) -> Any:
        timeout = self.retry.time_left(deadline)
        body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.requests += 1
        status, data, _ = self._connections.exchange(method, self._prefix + path, body, headers, timeout)
        if status in RETRYABLE_STATUS:
            raise RetryableFailure(f"HTTP {status}: {error_detail(data)}")
        if status != 200:
            raise ServiceError(f"the retrieval service at {self.url} refused {method} {path} with HTTP {status}: "
                               f"{error_detail(data)}")
        try:
            return json.loads(data)
        except ValueError:
            raise ServiceError(f"the retrieval service at {self.url} answered {method} {path} with non-JSON "
                               f"{data[:200]!r}") from None

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        self._connections.close()


def error_detail(data: bytes) -> str:
    """The error message of an answer (FastAPI's {"detail": ...}; search APIs' {"message": ...} or {"error": ...},
    where an error may itself hold a message) or the start of the body."""
    try:
        answer = json.loads(data)
        detail = next((answer[key] for key in ("detail", "message", "error") if answer.get(key) is not None), None)
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        detail = detail["message"]
    if detail is None:
        return data[:200].decode("utf-8", "replace")
    return detail if isinstance(detail, str) else json.dumps(detail)[:500]


__all__ = [
    "CacheInfo",
    "EmptyStreak",
    "HTTPRetriever",
    "KeepAliveConnections",
    "LRUCache",
    "Retries",
    "RetryPolicy",
    "RetryableFailure",
    "ServiceError",
    "ServiceUnavailableError",
    "error_detail",
]

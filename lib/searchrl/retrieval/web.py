"""A retriever that asks a web search API, interchangeable with the local ones (R1-Searcher 4.4, R1-Searcher++ 6.2).

    retriever: web+https://api.search.example/v1/search        # a params file; the key comes from the environment
    retriever = WebSearchRetriever("https://api.search.example/v1/search", rollout=cfg, service=cfg, web=cfg)
    retriever.search(["who founded Velmora?"], k=3) -> [[Doc, Doc, Doc]]

Any JSON search API given by URL works: one request per query (GET with the query and a count as URL parameters,
or POST with them as a JSON body), and an answer holding a list of results with a title, a URL and a text. Where the
answer keeps them is a mapping of dotted paths (`web_fields`) whose defaults already read SearXNG, Brave, Bing,
SerpAPI and Google Programmable Search answers. Each result becomes a `Doc(id=url, title, text)`.

The key is read from an environment variable (`web_key_env`) at each request and sent in one header, or as one URL
parameter for APIs that take it so (`web_key_header`); it is never stored, logged or put into an error message.

Same contract and failure rules as the HTTP client of our own service (`searchrl.retrieval.http`, whose retry loop,
connections and cache this module reuses): input checks, empty queries answered with [] locally, a result cache
(`service_cache_size`), retries with doubling waits within `retriever_timeout_s`, and loud errors, never an empty
list standing in for an outage: an API that stays down raises `ServiceUnavailableError`; a refused key (401/403)
raises `WebSearchKeyError` naming the variable to set; a non-JSON answer or one without the result list raises
`ServiceError`.

Long texts (over `web_max_words` words) are summarised by a summariser, any callable (question, text) -> str, where
the question is the search query. The default, `OverlapSummarizer`, keeps the sentences sharing most words with the
query and needs no model; `ModelSummarizer` asks a local causal LM (passed in; this layer loads none), as the papers
had GPT-4o-mini summarise pages. With `web_fetch_pages` on, each result's page is downloaded and its text replaces
the snippet (off by default: a page download per result is slow and reaches every site in the results).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

from searchrl.config.service import WEB_SEARCH_PREFIX, ServiceConfig, is_web_search_name
from searchrl.config.web_search import DEFAULT_FIELDS, WebSearchConfig, web_search_problems, web_search_url
from searchrl.core.settings import raise_problems
from searchrl.retrieval.base import Doc, check_k, clean_queries
from searchrl.retrieval.http import (
    RETRYABLE_STATUS,
    CacheInfo,
    KeepAliveConnections,
    LRUCache,
    Retries,
    RetryableFailure,
    RetryPolicy,
    ServiceError,
    error_detail,
)
from searchrl.retrieval.web_text import (
    MISSING,
    SUMMARY_INSTRUCTION,
    ModelSummarizer,
    OverlapSummarizer,
    Summarizer,
    cut_words,
    keep_relevant_sentences,
    lookup,
    page_text,
    plain_text,
)

_PAGE_BYTES = 2 * 1024 * 1024  # enough for the text of any article; bounds a runaway download
_PAGE_TIMEOUT_S = 10.0
_MAX_REDIRECTS = 3



class WebSearchKeyError(ServiceError):
    """The search API's key is missing, or the API refused it (HTTP 401 / 403)."""


# ---- the retriever ----------------------------------------------------------------------------------------------


class WebSearchRetriever:
    """Searches the web through the JSON search API at `url` (see the module docstring).

    Args:
        url: the API's address, ``https://HOST/PATH``; fixed parameters may follow (``?format=json``).
        rollout: timeouts and retries (a `RolloutConfig`, or a `RunConfig`); None: one attempt, no timeout of its
            own (the rollout engine then times out and retries the whole call).
        service: the result cache's size (`service_cache_size` of a `ServiceConfig`, or a `RunConfig`).
        web: the API's request and answer shape, the key's variable and header, long-text handling (a
            `WebSearchConfig`, or a `RunConfig`).
        summarizer: shortens texts over `web_max_words` words, (question, text) -> str; None: `OverlapSummarizer`.

    The web has no corpus of its own: passage ids are the results' URLs.
    """

    kind = "web"

    def __init__(self, url: str, *, rollout: RetryPolicy | None = None, service: ServiceConfig | None = None,
                 web: WebSearchConfig | None = None, summarizer: Summarizer | None = None) -> None:
        parsed = web_search_url(WEB_SEARCH_PREFIX + url if not is_web_search_name(url) else url)
        self.url = parsed
        self.settings = web if web is not None else WebSearchConfig()
        raise_problems("web-search settings", web_search_problems(self.settings))
        self.fields = {**DEFAULT_FIELDS, **self.settings.web_fields}
        self.max_words = self.settings.web_max_words
        self.summarizer = summarizer if summarizer is not None else OverlapSummarizer(max(self.max_words, 1))
        self.retry = Retries.of(rollout)
        cache_size = (service if service is not None else ServiceConfig()).service_cache_size
        self._cache = LRUCache(cache_size)
        parts = urlsplit(self.url)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._connections = KeepAliveConnections(self.url)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._results_seen = False  # the result list has been found in an answer (so its absence means "none")
        self.requests = 0  # requests sent to the API (attempts, retries included); page downloads not counted
        self._api_key()  # a missing key fails now, not at the first search deep inside a run

    def __repr__(self) -> str:
        return f"WebSearchRetriever({self.url!r})"

    # ---- the retriever contract -------------------------------------------------------------------------------

    def __len__(self) -> int:
        """The web has no fixed size: as many passages as any k asks for."""
        return sys.maxsize

    def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """Up to `k` results per query, best first as the API ranks them; one list per query, in query order."""
        check_k(k, sys.maxsize)  # type and range, before any request
        return self._cache.results(clean_queries(queries), k, lambda missing: self._fetch(missing, k))

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the result cache so far (a query answered from the cache is a hit)."""
        return self._cache.info()

    def close(self) -> None:
        """Close this thread's connection and stop the worker threads."""
        self._connections.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # ---- internals ----------------------------------------------------------------------------------------------

    def _map(self, work: Callable[[str], list[Doc]], queries: list[str]) -> list[list[Doc]]:
        """`work` over `queries`, `web_parallel` at a time; the first failure is raised."""
        if self.settings.web_parallel == 1 or len(queries) == 1:
            return [work(query) for query in queries]
        with self._pool_lock:
            if self._pool is None:  # kept, so its threads keep their connections alive between batches
                self._pool = ThreadPoolExecutor(self.settings.web_parallel, thread_name_prefix="web-search")
        return list(self._pool.map(work, queries))

    def _fetch(self, missing: list[str], k: int) -> dict[str, list[Doc]]:
        """The API's results for each of `missing`, within one deadline for the whole batch."""
        deadline = self.retry.deadline()
        return dict(zip(missing, self._map(lambda query: self._search_one(query, k, deadline), missing)))

    def _search_one(self, query: str, k: int, deadline: float | None) -> list[Doc]:
        answer = self.retry.call(
            lambda: self._ask(query, k, deadline), deadline, who=f"the search API at {self.url}",
            hint="check the URL and that the API is reachable from here, or raise retriever_timeout_s / "
                 "retriever_retries")
        docs = [doc for doc in map(self._to_doc, self._result_list(answer)) if doc is not None][:k]
        return [self._shorten(query, doc, deadline) for doc in docs]

    def _api_key(self) -> str | None:
        """The key from the environment (read at each use, never kept); raises when the variable is unset."""
        variable = self.settings.web_key_env
        if not variable:
            return None
        key = os.environ.get(variable, "").strip()
        if not key:
            raise WebSearchKeyError(
                f"the web-search retriever needs the search API's key in the environment variable ${variable}: "
                f"export {variable}=<your key> (or set web_key_env to the variable that holds it, or to '' for an "
                "API that takes no key)")
        return key

    def _credentials(self) -> tuple[dict[str, str], dict[str, str]]:
        """(headers, URL parameters) of one request, the key placed where `web_key_header` says."""
        headers = {"Accept": "application/json", "User-Agent": "searchrl-web-search"}
        key, place = self._api_key(), self.settings.web_key_header
        if key is None:
            return headers, {}
        if place.startswith("?"):
            return headers, {place[1:].strip(): key}
        name, _, prefix = place.partition(":")
        headers[name.strip()] = f"{prefix.strip()} {key}" if prefix.strip() else key
        return headers, {}

    def _ask(self, query: str, k: int, deadline: float | None) -> Any:
        """One request to the API for `query`: its JSON answer, or an exception saying why not."""
        timeout = self.retry.time_left(deadline)
        parameters: dict[str, Any] = {self.settings.web_query_param: query}
        if self.settings.web_count_param:
            parameters[self.settings.web_count_param] = k
        headers, key_parameter = self._credentials()
        joiner = "&" if "?" in self._path else "?"
        if self.settings.web_method == "GET":
            target, body = self._path + joiner + urlencode({**parameters, **key_parameter}), None
        else:
            headers["Content-Type"] = "application/json"
            target = self._path + (joiner + urlencode(key_parameter) if key_parameter else "")
            body = json.dumps(parameters, ensure_ascii=False).encode("utf-8")
        self.requests += 1
        status, data, _ = self._connections.exchange(self.settings.web_method, target, body, headers, timeout)
        if status in RETRYABLE_STATUS:
            raise RetryableFailure(f"HTTP {status}: {error_detail(data)}")
        if status in (401, 403):
            raise WebSearchKeyError(
                f"the search API at {self.url} refused the key (HTTP {status}: {error_detail(data)}); check that "
                f"${self.settings.web_key_env or '(web_key_env is empty)'} (web_key_env) holds a valid key for it and "
                f"that web_key_header ({self.settings.web_key_header.partition(':')[0]!r}) names the header or "
                "?parameter it expects")
        if status != 200:
            raise ServiceError(f"the search API at {self.url} refused the search with HTTP {status}: "
                               f"{error_detail(data)}")
        try:
            return json.loads(data)
        except ValueError:
            raise ServiceError(f"the search API at {self.url} answered with non-JSON {data[:200]!r}; is the URL a "
                               "JSON search endpoint (some need a parameter such as ?format=json)?") from None

    def _result_list(self, answer: Any) -> list[Any]:
        results = lookup(answer, self.fields["results"])
        if results is MISSING and self._results_seen:
            return []  # the API names no result list when a query finds nothing
        if not isinstance(results, list):
            keys = ", ".join(map(str, answer)) if isinstance(answer, Mapping) else type(answer).__name__
            raise ServiceError(
                f"the search API at {self.url} answered without a result list at {self.fields['results']!r} (its "
                f"answer has: {keys[:300]}); set web_fields: {{results: <dotted path to the list>}}")
        self._results_seen = True
        return results

    def _to_doc(self, result: Any) -> Doc | None:
        """A result as a Doc (id: its URL), or None when it has neither title nor text."""
        if not isinstance(result, Mapping):
            raise ServiceError(f"the search API at {self.url} listed a result that is not an object: "
                               f"{str(result)[:200]!r}; check web_fields['results']")
        title, url, text = (lookup(result, self.fields[name]) for name in ("title", "url", "text"))
        title, text = plain_text(title), plain_text(text)  # a missing field reads as ""
        if not title and not text:
            return None
        url = url if isinstance(url, str) and url else ""
        doc_id = url or "web:" + hashlib.sha256(f"{title}\x1f{text}".encode()).hexdigest()[:16]
        return Doc(id=doc_id, title=title, text=text)

    def _shorten(self, query: str, doc: Doc, deadline: float | None) -> Doc:
        """The result with its page's text when pages are fetched, summarised when over `web_max_words` words."""
        text = doc.text
        if self.settings.web_fetch_pages and doc.id.startswith(("http://", "https://")):
            text = self._fetch_page(doc.id, deadline) or text
        if self.max_words and len(text.split()) > self.max_words:
            text = cut_words(self.summarizer(query, text), self.max_words)
        return doc if text == doc.text else Doc(id=doc.id, title=doc.title, text=text)

    def _fetch_page(self, url: str, deadline: float | None) -> str:
        """The text of the page at `url`, or "" when it cannot be read (dead links are common: not an outage)."""
        for _ in range(_MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                return ""
            try:
                left = self.retry.time_left(deadline)
            except RetryableFailure:
                return ""
            timeout = _PAGE_TIMEOUT_S if left is None else min(left, _PAGE_TIMEOUT_S)
            connections = KeepAliveConnections(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            try:
                status, body, headers = connections.exchange(
                    "GET", target, None, {"User-Agent": "searchrl-web-search", "Accept": "text/html,text/plain"},
                    timeout, max_bytes=_PAGE_BYTES)
            except RetryableFailure:
                return ""
            finally:
                connections.close()
            if status in (301, 302, 303, 307, 308) and headers.get("location"):
                url = urljoin(url, headers["location"])
                continue
            return page_text(body, headers.get("content-type", "")) if status == 200 else ""
        return ""


__all__ = ["DEFAULT_FIELDS", "SUMMARY_INSTRUCTION", "ModelSummarizer", "OverlapSummarizer", "Summarizer",
           "WebSearchConfig", "WebSearchKeyError", "WebSearchRetriever", "cut_words", "keep_relevant_sentences",
           "page_text", "plain_text", "web_search_problems", "web_search_url"]

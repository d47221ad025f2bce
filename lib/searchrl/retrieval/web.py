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

import difflib
import hashlib
import html
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

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
from searchrl.retrieval.service import WEB_SEARCH_PREFIX, ServiceConfig, is_web_search_name

Summarizer = Callable[[str, str], str]
"""(question, text) -> a shorter text keeping what bears on the question."""

# Where the answers of widely used search APIs keep their results; '|' separates alternatives tried in order.
DEFAULT_FIELDS = {
    "results": "results|web.results|webPages.value|organic_results|items",  # SearXNG | Brave | Bing | SerpAPI | Google
    "title": "title|name",
    "url": "url|link",
    "text": "snippet|content|description",
}
_METHODS = ("GET", "POST")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_PAGE_BYTES = 2 * 1024 * 1024  # enough for the text of any article; bounds a runaway download
_PAGE_TIMEOUT_S = 10.0
_MAX_REDIRECTS = 3


@dataclass(frozen=True)
class WebSearchConfig:
    """How the web-search retriever (``retriever: web+https://...``) talks to a search API and shortens long texts."""

    # == web search ==
    web_key_env: str = "SEARCHRL_SEARCH_API_KEY"
    """Environment variable holding the search API's key (the key is never written to settings, logs or errors);
    empty: the API takes no key (e.g. a SearXNG instance of your own)."""
    web_key_header: str = "X-API-Key"
    """Where the key goes: a header, with an optional value prefix after a colon (X-Subscription-Token for Brave,
    Ocp-Apim-Subscription-Key for Bing, 'Authorization: Bearer' sends 'Bearer <key>'), or ?name for a URL parameter
    (?api_key for SerpAPI, ?key for Google)."""
    web_method: str = "GET"
    """GET (query and count as URL parameters, after any the URL already has) or POST (as a JSON body)."""
    web_query_param: str = "q"
    """Name of the request parameter that carries the query."""
    web_count_param: str = "count"
    """Name of the request parameter that asks for top_k results (num for SerpAPI); empty: none sent. Results are
    cut to top_k either way."""
    web_fields: dict = field(default_factory=dict)
    """Where the API's JSON answer keeps things, as dotted paths with '|' between alternatives; keys results, title,
    url, text, each replacing its default (results|web.results|webPages.value|organic_results|items, title|name,
    url|link, snippet|content|description), e.g. {results: data.hits, text: body}."""
    web_max_words: int = 200
    """Result texts longer than this many words are summarised (default summariser: the sentences sharing most words
    with the query) and cut to it; 0: texts are kept whole."""
    web_fetch_pages: bool = False
    """Download each result's page and use its text in place of the API's snippet (summarised to web_max_words), as
    the papers read whole pages; a page that cannot be read keeps the snippet. Off: nothing but the API is called."""
    web_parallel: int = 4
    """Queries of one batch sent to the API at the same time (an API answers one query per request); 1: in turn."""

    def __post_init__(self) -> None:
        problems = [message for _, message in web_search_problems(self)]
        if problems:
            raise ValueError("invalid WebSearchConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict."""
        return {f.name: getattr(self, f.name) for f in fields(WebSearchConfig)}


def web_search_problems(values: Mapping[str, Any] | Any) -> list[tuple[str, str]]:
    """(field, message) for every invalid web-search setting of `values` (a mapping or an object with the names)."""
    get = values.get if isinstance(values, Mapping) else lambda name: getattr(values, name, None)
    problems = []
    # (name, is the value acceptable, what it must be); the header's name is what comes before an optional colon
    texts = (("web_key_env", lambda v: not v or _ENV_NAME.match(v), "an environment variable name (or empty)"),
             ("web_key_header", lambda v: v[1:].strip() if v.startswith("?") else
              _HEADER_NAME.match(v.partition(":")[0].strip()),
              "a header name, optionally followed by ': value prefix', or ?parameter"),
             ("web_query_param", lambda v: v.strip(), "a parameter name"),
             ("web_count_param", lambda v: True, "a parameter name (or empty: none sent)"))
    for name, acceptable, what in texts:
        value = get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append((name, f"{name} must be a string, got {value!r}"))
        elif not acceptable(value):
            problems.append((name, f"{name} must be {what}, got {value!r}"))
    method = get("web_method")
    if method is not None and method not in _METHODS:
        problems.append(("web_method", f"web_method must be GET or POST, got {method!r}"))
    mapping = get("web_fields")
    if mapping is not None:
        if not isinstance(mapping, Mapping):
            message = f"web_fields must be a mapping such as {{results: data.hits}}, got {mapping!r}"
            problems.append(("web_fields", message))
        else:
            for key, path in mapping.items():
                if key not in DEFAULT_FIELDS:
                    near = difflib.get_close_matches(str(key), DEFAULT_FIELDS, n=1)
                    hint = f" (did you mean {near[0]!r}?)" if near else ""
                    keys = ", ".join(DEFAULT_FIELDS)
                    problems.append(("web_fields", f"web_fields has an unknown key {key!r}{hint}; keys: {keys}"))
                elif not isinstance(path, str) or not all(part.strip() for part in path.split("|")):
                    message = f"web_fields[{key!r}] must be a dotted path such as data.hits, got {path!r}"
                    problems.append(("web_fields", message))
    for name, low in (("web_max_words", 0), ("web_parallel", 1)):
        value = get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append((name, f"{name} must be an integer, got {value!r}"))
        elif value < low:
            problems.append((name, f"{name} must be >= {low}, got {value!r}"))
    fetch = get("web_fetch_pages")
    if fetch is not None and not isinstance(fetch, bool):
        problems.append(("web_fetch_pages", f"web_fetch_pages must be true or false, got {fetch!r}"))
    return problems


def web_search_url(name: Any) -> str | None:
    """The search API URL a retriever name ``web+https://HOST/PATH[?fixed=parameters]`` points at; None for names
    that are not web searches; ValueError, saying what is wrong, for a ``web+`` name that is not a usable URL."""
    if not is_web_search_name(name):
        return None
    url = name.strip()[len(WEB_SEARCH_PREFIX):]
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"retriever {name!r}: write the search API's address after web+, e.g. "
                         "web+https://api.search.example/v1/search")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in range)
    except ValueError:
        raise ValueError(f"retriever {name!r}: the port is not a number between 0 and 65535") from None
    if parts.fragment:
        raise ValueError(f"retriever {name!r}: a search API URL takes no #fragment")
    return url


class WebSearchKeyError(ServiceError):
    """The search API's key is missing, or the API refused it (HTTP 401 / 403)."""


# ---- summarisers ------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
# Words that say nothing about what a query is after; they would make every sentence look relevant.
_FILLER = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is",
                     "are", "was", "were", "be", "been", "what", "who", "whom", "whose", "which", "when", "where",
                     "why", "how", "did", "do", "does", "that", "this", "it", "its", "as"})


def _content_words(text: str) -> set[str]:
    return {word for word in _WORD.findall(text.lower()) if word not in _FILLER}


def cut_words(text: str, max_words: int) -> str:
    """`text` cut to its first `max_words` words (whitespace between them normalised only when a cut is made)."""
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words])


def keep_relevant_sentences(question: str, text: str, max_words: int) -> str:
    """The sentences of `text` sharing most words with `question`, up to `max_words` words, in their page order.

    Ties go to the earlier sentence; a best sentence longer than the whole budget is cut to it.
    """
    sentences = [s.strip() for s in _SENTENCE_BREAK.split(text) if s and s.strip()]
    wanted = _content_words(question)
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(wanted & _content_words(sentences[i])), i))
    chosen: list[int] = []
    used = 0
    for index in ranked:
        size = len(sentences[index].split())
        if used + size <= max_words:
            chosen.append(index)
            used += size
    if not chosen and sentences:
        return cut_words(sentences[ranked[0]], max_words)
    return " ".join(sentences[i] for i in sorted(chosen))


@dataclass(frozen=True)
class OverlapSummarizer:
    """The default summariser: `keep_relevant_sentences` with a word budget; no model, deterministic."""

    max_words: int = 200

    def __call__(self, question: str, text: str) -> str:
        """The sentences of `text` most about `question`, at most `max_words` words."""
        return keep_relevant_sentences(question, text, self.max_words)


SUMMARY_INSTRUCTION = (
    "You are helping someone answer a question by searching the web. Below is a page that one of their searches "
    "found. In at most {max_words} words, write down what the page says that helps with the search, keeping names, "
    "dates and numbers exactly as the page gives them and leaving out everything else. If the page says nothing "
    "that helps, write: nothing relevant.\n\nSearch: {question}\n\nPage:\n{text}"
)


class ModelSummarizer:
    """Summarises long pages with a local causal LM and its tokenizer (e.g. from `searchrl.models.load_policy`).

    Greedy decoding of at most `max_new_tokens`; the page is cut to its first `max_page_tokens` tokens first so that
    one huge page cannot exhaust memory. The chat template is used when the tokenizer has one. Calls are serialised
    (a tokenizer and a model on one device serve one caller at a time).
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_words: int = 200, max_new_tokens: int = 256,
                 max_page_tokens: int = 2048) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_words = max_words
        self.max_new_tokens = max_new_tokens
        self.max_page_tokens = max_page_tokens
        self._lock = threading.Lock()

    def prompt(self, question: str, text: str) -> str:
        """The full prompt the model continues: instruction, search, page (cut), in the chat template if any."""
        page_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][:self.max_page_tokens]
        page = self.tokenizer.decode(page_ids, skip_special_tokens=True)
        request = SUMMARY_INSTRUCTION.format(max_words=self.max_words, question=question, text=page)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": request}], tokenize=False,
                                                      add_generation_prompt=True)
        return request + "\n\nSummary:"

    def __call__(self, question: str, text: str) -> str:
        """The model's summary of `text` for the search `question` (new tokens only, special tokens dropped)."""
        with self._lock:
            prompt = self.prompt(question, text)
            templated = bool(getattr(self.tokenizer, "chat_template", None))  # the template already adds BOS
            inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=not templated)
            inputs = inputs.to(self.model.device)
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else \
                self.tokenizer.eos_token_id
            output = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                                         pad_token_id=pad)
            new_tokens = output[0, inputs["input_ids"].shape[1]:]
            return self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip()


# ---- reading answers and pages ----------------------------------------------------------------------------------

_MISSING = object()


def _lookup(record: Any, paths: str) -> Any:
    """The value at the first of the '|'-separated dotted `paths` present in `record`, or `_MISSING`."""
    for path in paths.split("|"):
        value = record
        for part in path.strip().split("."):
            if not isinstance(value, Mapping) or part not in value:
                value = _MISSING
                break
            value = value[part]
        if value is not _MISSING:
            return value
    return _MISSING


_TAG = re.compile(r"<[^>]+>")


def plain_text(fragment: Any) -> str:
    """A snippet as plain text: tags (the <strong> highlights APIs add) removed, entities decoded, spaces collapsed."""
    if not isinstance(fragment, str):
        return ""
    return " ".join(html.unescape(_TAG.sub("", fragment)).split())


class _PageText(HTMLParser):
    """Collects the visible text of an HTML page, one line per block, without scripts, styles or page chrome."""

    _HIDDEN = frozenset({"script", "style", "noscript", "head", "template", "svg", "nav", "footer"})
    _BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                         "blockquote", "pre", "table", "ul", "ol", "dd", "dt"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hidden = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).split("\n"))
        return "\n".join(line for line in lines if line)


def page_text(body: bytes, content_type: str) -> str:
    """The readable text of a downloaded page (HTML or plain text); "" for anything else (PDF, images)."""
    charset = re.search(r"charset=([\w-]+)", content_type or "")
    try:
        decoded = body.decode(charset.group(1) if charset else "utf-8", "replace")
    except LookupError:  # a charset Python does not know: most of such a page still reads as UTF-8
        decoded = body.decode("utf-8", "replace")
    kind = (content_type or "text/html").split(";")[0].strip().lower()
    if kind == "text/plain":
        return decoded
    if kind not in ("text/html", "application/xhtml+xml"):
        return ""
    parser = _PageText()
    parser.feed(decoded)
    parser.close()
    return parser.text()


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
        problems = [message for _, message in web_search_problems(self.settings)]
        if problems:
            raise ValueError("invalid web-search settings: " + "; ".join(problems))
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
        cleaned = clean_queries(queries)
        results: list[list[Doc] | None] = [[] if not q else self._cache.get((q, k)) for q in cleaned]
        missing = list(dict.fromkeys(q for q, r in zip(cleaned, results) if r is None))  # each query asked once
        if missing:
            deadline = self.retry.deadline()
            answers = dict(zip(missing, self._map(lambda query: self._search_one(query, k, deadline), missing)))
            for query in missing:
                self._cache.put((query, k), answers[query])
            results = [answers[q] if r is None else r for q, r in zip(cleaned, results)]
        return [list(r) for r in results]

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the result cache so far (a query answered from the cache is a hit)."""
        return CacheInfo(self._cache.hits, self._cache.misses, len(self._cache), self._cache.capacity)

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
        results = _lookup(answer, self.fields["results"])
        if results is _MISSING and self._results_seen:
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
        title, url, text = (_lookup(result, self.fields[name]) for name in ("title", "url", "text"))
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

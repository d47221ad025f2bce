"""The retrieval service's settings: its limits, its client's cache, how long a run waits for it, the dense
retriever's encoder and prebuilt index, and the names that say a retriever is remote."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from searchrl.config.data_names import data_setting_problem, looks_like_path
from searchrl.core.settings import integer_problems, raise_problems, seconds_problems

MAX_QUERY_CHARS = 2000  # generous for any real question; bounds the cost of a runaway generation

__all__ = ["MAX_QUERY_CHARS", "SEARCH_R1_DEFAULT_PATH", "SEARCH_R1_PREFIX", "SERVICE_SCHEMES", "WEB_SEARCH_PREFIX",
           "ServiceConfig", "is_web_search_name", "search_r1_url", "service_problems", "service_url"]


SERVICE_SCHEMES = ("http", "https")


# `retriever: web+https://HOST/PATH` names a web search API (searchrl.retrieval.web parses it; declared here so that
# `service_options` can tell a remote retriever without importing the client that imports this module).
WEB_SEARCH_PREFIX = "web+"

# `retriever: search_r1+http://HOST:PORT/retrieve` names any server speaking Search-R1's retriever API (POST
# /retrieve with {"queries", "topk", "return_scores"}); searchrl.retrieval.search_r1 is its client.
SEARCH_R1_PREFIX = "search_r1+"
SEARCH_R1_DEFAULT_PATH = "/retrieve"  # Search-R1's endpoint, used when the URL names no path


@dataclass(frozen=True)
class ServiceConfig:
    """Limits of the shared retrieval service, the cache of its HTTP client, and how long a run waits for it."""

    # == retrieval service ==
    service_cache_size: int = 4096
    """Search results the HTTP and web-search retrievers keep in memory (LRU, one entry per query and top_k); 0: no
    cache."""
    service_max_queries: int = 256
    """Most queries the service answers in one request (more: 413); the client splits larger batches to fit."""
    service_max_query_chars: int = MAX_QUERY_CHARS
    """Longest query the service accepts (longer: 422); the client cuts queries to the retrievers' own limit."""
    service_max_top_k: int = 100
    """Largest top_k the service accepts in one request (larger: 422)."""
    service_max_body_bytes: int = 4 * 1024 * 1024
    """Largest request body the service reads (larger: 413, before any of it is parsed)."""
    service_empty_streak: int = 256
    """The HTTP retriever stops loudly after this many non-empty queries in a row got no passage at all (a service
    serving an empty or the wrong index); 0: never."""
    service_wait_s: float = 300.0
    """Seconds a run waits at start for its retrieval service to answer (it may still be loading its index), saying
    so every few seconds, before it stops loudly naming the command that starts one; 0: no wait beyond the client's
    own retries. Mid-run outages are bounded by retriever_outage_s."""

    # == retrieval ==
    retriever_model: str = ""
    """The dense retriever's encoder (retriever: dense, and `serve build --retriever dense`): any sentence-transformers
    or Hugging Face encoder folder or hub id, e.g. intfloat/e5-base-v2 (Search-R1, R-Search) or
    BAAI/bge-large-en-v1.5 (R1-Searcher, R1-Searcher++); a hub id downloads on first use. Its family's conventions
    are applied from one table (searchrl.retrieval.encoders): E5's "query: " / "passage: " prefixes and mean
    pooling, BGE's search instruction on queries only and CLS pooling, normalised embeddings. Empty: the bundled
    all-MiniLM-L6-v2, offline. Ignored by bm25 and remote retrievers (a service encodes with its own index's)."""
    retriever_index: str = ""
    """A prebuilt faiss index file searched by retriever: dense in place of encoding the corpus, e.g. Search-R1's
    e5_Flat.index (with corpus: its wiki-18.jsonl and retriever_model: intfloat/e5-base-v2), or one written by
    `searchrl index`. Row i of the index is passage i of the corpus file, which is read by offset and never held in
    memory; the index is memory-mapped. Refused before any search, with what to do, when its dimension, size,
    encoder or corpus does not match (searchrl.retrieval.prebuilt). Empty: the dense retriever encodes the corpus."""

    def __post_init__(self) -> None:
        raise_problems("ServiceConfig", service_problems(self))

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict."""
        return {f.name: getattr(self, f.name) for f in fields(ServiceConfig)}


# Inclusive lower bounds of the settings: integers, then seconds (any number).
_MINIMUMS = {"service_cache_size": 0, "service_max_queries": 1, "service_max_query_chars": 1, "service_max_top_k": 1,
             "service_max_body_bytes": 1024, "service_empty_streak": 0}


_SECONDS_MINIMUMS = {"service_wait_s": 0.0}


def service_problems(values: Mapping[str, Any] | Any) -> list[tuple[str, str]]:
    """(field, message) for every out-of-range service setting of `values` (a mapping or an object with the names)."""
    get = values.get if isinstance(values, Mapping) else lambda name: getattr(values, name, None)
    problems = integer_problems(get, _MINIMUMS) + seconds_problems(get, _SECONDS_MINIMUMS)
    model = get("retriever_model")
    if model is not None and not isinstance(model, str):
        message = f"retriever_model must be a model folder or hub id (a string), got {type(model).__name__}"
        problems.append(("retriever_model", message))
    return problems + _index_problems(get)


def _index_problems(get) -> list[tuple[str, str]]:
    """retriever_index names an existing file, searched by the dense retriever over a corpus file."""
    index = get("retriever_index")
    if index is None or index == "":
        return []
    if not isinstance(index, str):
        why = f"retriever_index must be the path of a faiss index file (a string), got {type(index).__name__}"
        return [("retriever_index", why)]
    whys = []
    retriever, corpus = get("retriever"), get("corpus")
    if isinstance(retriever, str) and retriever.strip().lower() != "dense":
        whys.append(f"retriever_index is searched by the dense retriever; set retriever: dense (it is {retriever!r}), "
                    "or leave retriever_index empty")
    if get("dataset") == "synthetic":
        whys.append("retriever_index searches a passage file, but dataset is synthetic (its world makes its own "
                    "passages); set dataset to a QA file and corpus to the index's passage file, or leave "
                    "retriever_index empty")
    elif corpus is not None and not corpus:
        whys.append("retriever_index needs corpus: the passage file the index was built over (row i of the index "
                    "is its passage i), e.g. wiki-18.jsonl")
    if not looks_like_path(index):  # a catalogue name (e.g. wiki-18-e5-index), present when the run loads its data
        problem = data_setting_problem("retriever_index", index)
        if problem:
            whys.append(problem)
    elif not Path(index).expanduser().is_file():
        whys.append(f"retriever_index: no such file {index!r} (relative paths start at {Path.cwd()}); give a faiss "
                    "index file, or build one with searchrl index --corpus CORPUS --out INDEX")
    return [("retriever_index", why) for why in whys]


def is_web_search_name(name: Any) -> bool:
    """Whether a retriever name points at a web search API (``web+https://...``; checked in full by the registry)."""
    return isinstance(name, str) and name.strip().lower().startswith(WEB_SEARCH_PREFIX)


def service_url(name: str) -> str | None:
    """The base URL a retriever name points at, or None when the name is not a service (e.g. "bm25").

    Accepts ``http://HOST:PORT[/prefix]``, ``https://...`` and the short ``http:HOST:PORT``. A name that starts
    like a service but is not a usable URL raises ValueError saying what is wrong.
    """
    if not isinstance(name, str):
        return None
    text = name.strip()
    scheme, colon, rest = text.partition(":")
    if not colon or scheme.lower() not in SERVICE_SCHEMES:
        return None
    if not rest.startswith("//"):
        rest = "//" + rest  # the short form http:HOST:PORT
    url = f"{scheme.lower()}:{rest}".rstrip("/")
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"retriever {name!r} names a service without a host; write e.g. http://127.0.0.1:8000")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in range)
    except ValueError:
        raise ValueError(f"retriever {name!r}: the port is not a number between 0 and 65535") from None
    if parts.query or parts.fragment:
        raise ValueError(f"retriever {name!r}: a service URL takes no ?query or #fragment")
    return url


def search_r1_url(name: Any) -> str | None:
    """The URL a ``search_r1+http://HOST:PORT[/PATH]`` retriever name points at (``search-r1+`` and any case are
    accepted; no path: ``/retrieve``), or None when the name is not of that form. A name with the prefix but no
    usable http(s) URL after it raises ValueError saying what to write."""
    if not isinstance(name, str):
        return None
    head, plus, rest = name.strip().partition("+")
    if not plus or head.lower().replace("-", "_") != SEARCH_R1_PREFIX[:-1]:
        return None
    hint = "write search_r1+http://HOST:PORT/retrieve (a server speaking Search-R1's retriever API)"
    try:
        url = service_url(rest)
    except ValueError as error:
        raise ValueError(f"retriever {name!r}: {error}; {hint}") from None
    if url is None:
        raise ValueError(f"retriever {name!r} names no http(s) URL after {SEARCH_R1_PREFIX!r}; {hint}")
    return url if urlsplit(url).path else url + SEARCH_R1_DEFAULT_PATH

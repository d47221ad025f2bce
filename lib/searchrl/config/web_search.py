"""The settings of the web-search retriever (`retriever: web+https://HOST/PATH`, `searchrl.retrieval.web`), and the
check of its name: declared here, apart from the client, so that RunConfig inherits them without the client."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from searchrl.config.service import WEB_SEARCH_PREFIX, is_web_search_name
from searchrl.core.settings import integer_problems, raise_problems

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
        raise_problems("WebSearchConfig", web_search_problems(self))

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
    problems += integer_problems(get, {"web_max_words": 0, "web_parallel": 1})
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


__all__ = ["DEFAULT_FIELDS", "WebSearchConfig", "web_search_problems", "web_search_url"]

"""Retrievers by name: build one from a corpus, or load any saved one from its folder.

Besides the registered kinds, a name may point at a shared retrieval service, ``http://HOST:PORT`` (or
``http:HOST:PORT``): `make_retriever` then returns an `HTTPRetriever` and the registry's name check accepts it.
Likewise ``web+https://HOST/PATH`` names a web search API: `make_retriever` returns a `WebSearchRetriever`; and
``search_r1+http://HOST:PORT/retrieve`` any server speaking Search-R1's retriever API: a `SearchR1Retriever`; and
``replay:<run folder>`` the searches that run recorded: a `ReplayRetriever`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchrl.config.names import remote_retriever_key, retriever_key
from searchrl.config.replay import replay_record
from searchrl.config.service import search_r1_url
from searchrl.core.registry import Registry
from searchrl.retrieval.base import BaseRetriever, Doc, read_manifest
from searchrl.retrieval.bm25 import BM25Retriever
from searchrl.retrieval.dense import DenseRetriever
from searchrl.retrieval.http import HTTPRetriever
from searchrl.retrieval.replay import ReplayRetriever
from searchrl.retrieval.search_r1 import SearchR1Retriever
from searchrl.retrieval.service import service_url
from searchrl.retrieval.web import WebSearchRetriever, web_search_url


class RetrieverRegistry(Registry):
    """The retriever registry, which also answers to service URLs and web search API URLs (they name a service,
    not a registered kind)."""

    def key(self, name: str) -> str:
        remote = remote_retriever_key(name)  # the schema's check of these names, so that both say the same
        return remote if remote is not None else super().key(name)

    def get(self, name: str):
        key = self.key(name)
        if service_url(key) is not None:
            return HTTPRetriever
        if search_r1_url(key) is not None:
            return SearchR1Retriever
        if replay_record(key) is not None:
            return ReplayRetriever
        return WebSearchRetriever if web_search_url(key) is not None else super().get(key)

    def describe(self) -> str:
        service = "  http://HOST:PORT  a shared retrieval service (python -m searchrl.retrieval.serve --index DIR)"
        web = ("  web+https://HOST/PATH  a web search API (JSON; key from $SEARCHRL_SEARCH_API_KEY; web_* settings; "
               "long pages summarised)")
        search_r1 = ("  search_r1+http://HOST:PORT/retrieve  any server speaking Search-R1's retriever API (ours answers "
                     "it too)")
        replay = ("  replay:RUN_DIR  the searches that run recorded (RUN_DIR/retrieval/), answered again without index "
                  "or API; replay_fallback answers what the record lacks")
        return f"{super().describe()}\n{service}\n{web}\n{search_r1}\n{replay}"


# name (the class's `kind`, also written into saved manifests) -> retriever class, built as cls(corpus, **options).
RETRIEVERS: Registry[type[BaseRetriever]] = RetrieverRegistry("retriever", normalize=retriever_key)
RETRIEVERS.register(BM25Retriever.kind, BM25Retriever, doc="BM25 over the corpus (bm25s)")
RETRIEVERS.register(DenseRetriever.kind, DenseRetriever,
                    doc="dense embeddings (sentence-transformers) in a faiss index")


def retriever_class(name: str) -> type[BaseRetriever]:
    """The class registered under `name`; unknown names raise ValueError with the known names and a suggestion."""
    return RETRIEVERS.get(name)


def make_retriever(name: str, corpus: Sequence[Doc], **options: Any
                   ) -> BaseRetriever | HTTPRetriever | WebSearchRetriever | SearchR1Retriever | ReplayRetriever:
    """Build the retriever registered under `name` over `corpus`, passing `options` to its constructor.

    For a service URL, the client to that service (`HTTPRetriever(url, corpus=corpus, **options)`; options
    `rollout` and `service` take a RolloutConfig / ServiceConfig or the RunConfig). For a web search
    (``web+https://...``), `WebSearchRetriever(url, **options)` (also `web`: a WebSearchConfig or the RunConfig, and
    `summarizer`); the web has no corpus of its own, so `corpus` is not used. For a Search-R1 retriever API
    (``search_r1+http://...``), `SearchR1Retriever(url, **options)` (`rollout`, `service`; the API cannot say which
    corpus it serves, so `corpus` is not checked). For a replay (``replay:<run folder>``), a `ReplayRetriever` over
    that run's record; option `fallback` names a live retriever for what the record lacks, built over `corpus` with
    options `fallback_options` at the first miss.
    """
    record = replay_record(name)
    if record is not None:
        fallback, fallback_options = options.pop("fallback", ""), options.pop("fallback_options", {})
        if options:
            raise TypeError(f"ReplayRetriever has no option(s) {', '.join(sorted(options))}; accepted: fallback, "
                            "fallback_options")
        live = (lambda: make_retriever(fallback, corpus, **fallback_options)) if fallback else None
        return ReplayRetriever(record, fallback=live)
    search_r1 = search_r1_url(name)
    if search_r1 is not None:
        return SearchR1Retriever(search_r1, corpus=corpus, **options)
    url = service_url(name)
    if url is not None:
        return HTTPRetriever(url, corpus=corpus, **options)
    web_url = web_search_url(name)
    if web_url is not None:
        return WebSearchRetriever(web_url, **options)
    cls = retriever_class(name)
    accepted = [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - {p.name for p in accepted})
    if unknown:
        # say which options exist rather than letting a bare TypeError from __init__ through
        raise TypeError(
            f"{cls.__name__} has no option(s) {', '.join(unknown)}; accepted: {', '.join(p.name for p in accepted)}"
        )
    return cls(corpus, **options)


def load_retriever(directory: str | Path, **overrides: Any) -> BaseRetriever:
    """Load a retriever of any kind saved with `save(directory)`.

    `overrides` set run-time options that do not change the index (e.g. device="cuda" for a dense retriever).
    """
    manifest = read_manifest(directory)
    return retriever_class(manifest["kind"]).load(directory, **overrides)


__all__ = ["RETRIEVERS", "load_retriever", "make_retriever", "retriever_class"]

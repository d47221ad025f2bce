"""What the retrieval service and its HTTP client agree on: the settings, the service names, the wire format.

One index can serve many trainers: `python -m searchrl.retrieval.serve --index DIR` answers searches over HTTP,
and a run picks it with ``retriever: http://HOST:PORT`` (or ``http:HOST:PORT``) in place of ``bm25`` / ``dense``.

Wire format (JSON):

- ``POST /search`` ``{"queries": [str, ...], "top_k": int}`` ->
  ``{"results": [[{"id", "title", "text", "score"}, ...], ...]}``: one list per query, in query order, best first;
  ``score`` is the retriever's own score (BM25) or null where the kind does not expose one.
- ``GET /health`` -> ``{"ok", "passages", "retriever", "uptime_s", "corpus_fingerprint", "limits"}``.

This module imports neither the server's web framework nor the network, so the client and the settings check load
anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from searchrl.config.service import is_web_search_name, service_url
from searchrl.retrieval.base import Doc

__all__ = ["HEALTH_PATH", "SEARCH_PATH", "corpus_fingerprint", "doc_to_json", "service_options", "service_url"]


SEARCH_PATH = "/search"


HEALTH_PATH = "/health"


def corpus_fingerprint(corpus: Sequence[Doc]) -> str:
    """A short digest of the passages (ids, titles, texts, in order): equal digests mean the same corpus."""
    digest = hashlib.sha256()
    for doc in corpus:
        for part in (doc.id, doc.title, doc.text):
            digest.update(part.encode("utf-8"))
            digest.update(b"\x1f")  # a separator, so that ("ab", "c") and ("a", "bc") differ
        digest.update(b"\x1e")
    return digest.hexdigest()[:16]


def doc_to_json(doc: Doc, score: float | None) -> dict[str, Any]:
    """One passage as the service sends it."""
    return {"id": doc.id, "title": doc.title, "text": doc.text, "score": score}


def service_options(cfg: Any) -> dict[str, Any]:
    """Keyword options for `make_retriever` from a run's settings: a service retriever (`http://host:port`) takes the
    run's timeouts and retries (`rollout`) and its client settings (`service`); a web search (`web+https://...`)
    takes those and its own settings (`web`: the WebSearchConfig fields a RunConfig carries); an in-process
    retriever takes none."""
    if service_url(cfg.retriever):
        return {"rollout": cfg, "service": cfg}
    if is_web_search_name(cfg.retriever):
        return {"rollout": cfg, "service": cfg, "web": cfg}
    return {}

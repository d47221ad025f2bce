"""What the retrieval service and its HTTP client agree on: the settings, the service names, the wire format.

One index can serve many trainers: `python -m searchrl.retrieval.serve --index DIR` answers searches over HTTP,
and a run picks it with ``retriever: http://HOST:PORT`` (or ``http:HOST:PORT``) in place of ``bm25`` / ``dense``.

Wire format (JSON):

- ``POST /search`` ``{"queries": [str, ...], "top_k": int}`` ->
  ``{"results": [[{"id", "title", "text", "score"}, ...], ...]}``: one list per query, in query order, best first;
  ``score`` is the retriever's own score (BM25) or null where the kind does not expose one.
- ``GET /health`` -> ``{"ok", "passages", "retriever", "uptime_s", "corpus_fingerprint", "limits"}``.
- ``POST /retrieve``, Search-R1's retriever API: ``{"queries": [str, ...], "topk": int, "return_scores": bool}`` ->
  ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``, or ``[[{"id", "contents"}, ...], ...]``
  without scores; ``contents`` is the quoted title, a newline and the text (wiki-18's corpus rows).

This module imports neither the server's web framework nor the network, so the client and the settings check load
anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from searchrl.config.names import retriever_key
from searchrl.config.replay import replay_record
from searchrl.config.service import SEARCH_R1_DEFAULT_PATH, is_web_search_name, search_r1_url, service_url
from searchrl.retrieval.base import Doc

__all__ = ["HEALTH_PATH", "SEARCH_PATH", "SEARCH_R1_PATH", "corpus_fingerprint", "doc_to_json", "search_r1_document",
           "search_r1_url", "service_options", "service_url"]


SEARCH_PATH = "/search"


HEALTH_PATH = "/health"


SEARCH_R1_PATH = SEARCH_R1_DEFAULT_PATH


# id(corpus) -> (its length, its first and last passage, digest): a run names the same in-memory corpus at every
# stage, probe, recording and service check, and hashing every passage each time costs seconds on a large one. An
# entry counts only while the length and the very objects at both ends are unchanged.
_DIGESTS: dict[int, tuple[int, Any, Any, str]] = {}


def corpus_fingerprint(corpus: Sequence[Doc]) -> str:
    """A short digest of the passages (ids, titles, texts, in order): equal digests mean the same corpus.

    A corpus that carries its own `fingerprint` (a `searchrl.data.corpus_file.CorpusFile`: the file's size, offsets
    and edges) gives that instead, so a 21M-passage file is not read through to be named. An in-memory corpus is
    hashed once and remembered while its length and end passages stay the same objects."""
    own = getattr(corpus, "fingerprint", None)
    if isinstance(own, str) and own:
        return own
    ends = (corpus[0], corpus[-1]) if len(corpus) else (None, None)
    known = _DIGESTS.get(id(corpus))
    if known is not None and known[0] == len(corpus) and known[1] is ends[0] and known[2] is ends[1]:
        return known[3]
    digest = hashlib.sha256()
    for doc in corpus:
        for part in (doc.id, doc.title, doc.text):
            digest.update(part.encode("utf-8"))
            digest.update(b"\x1f")  # a separator, so that ("ab", "c") and ("a", "bc") differ
        digest.update(b"\x1e")
    value = digest.hexdigest()[:16]
    if len(_DIGESTS) > 16:
        _DIGESTS.clear()
    _DIGESTS[id(corpus)] = (len(corpus), *ends, value)
    return value


def doc_to_json(doc: Doc, score: float | None) -> dict[str, Any]:
    """One passage as the service sends it."""
    return {"id": doc.id, "title": doc.title, "text": doc.text, "score": score}


def search_r1_document(doc: Doc) -> dict[str, str]:
    """One passage as Search-R1's retriever API sends it: a wiki-18 corpus row, the quoted title on the first line
    of ``contents``."""
    return {"id": doc.id, "contents": f'"{doc.title}"\n{doc.text}'}


def service_options(cfg: Any, name: str | None = None) -> dict[str, Any]:
    """Keyword options for `make_retriever` from a run's settings, for retriever `name` (default: the run's): a
    service retriever (`http://host:port`) takes the run's timeouts and retries (`rollout`) and its client settings
    (`service`); a web search (`web+https://...`) takes those and its own settings (`web`: the WebSearchConfig fields
    a RunConfig carries); a Search-R1 retriever API (`search_r1+http://...`) the first two; the dense retriever its
    encoder (`retriever_model`, when set) and its prebuilt index file (`retriever_index`, when set); a replay
    (`replay:...`) its `replay_fallback` and that one's options; BM25 none."""
    name = cfg.retriever if name is None else name
    if replay_record(name) is not None:
        fallback = getattr(cfg, "replay_fallback", "")
        return {"fallback": fallback, "fallback_options": service_options(cfg, fallback)} if fallback else {}
    if service_url(name) or search_r1_url(name):
        return {"rollout": cfg, "service": cfg}
    if is_web_search_name(name):
        return {"rollout": cfg, "service": cfg, "web": cfg}
    if not (isinstance(name, str) and retriever_key(name) == "dense"):
        return {}
    options: dict[str, Any] = {}
    if getattr(cfg, "retriever_model", ""):
        options["model_name_or_path"] = cfg.retriever_model
    if getattr(cfg, "retriever_index", ""):
        from searchrl.data.catalog import resolve_index

        options["index_file"] = str(resolve_index(cfg.retriever_index))  # a catalogue name or a path
    return options

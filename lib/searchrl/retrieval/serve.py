"""The shared retrieval service: one index, searched over HTTP by many trainers and evaluations.

Build an index folder once, then serve it (loopback by default):

    python -m searchrl.retrieval.serve build --corpus passages.jsonl --retriever bm25 --out indexes/wiki-bm25
    python -m searchrl.retrieval.serve build --corpus synthetic --world-entities 200 --out indexes/world-bm25
    python -m searchrl.retrieval.serve --index indexes/wiki-bm25 --port 8000

or serve a prebuilt faiss index over its passage file in place (Search-R1's wiki-18 release, or one written by
`searchrl index`; `searchrl.retrieval.prebuilt`):

    python -m searchrl.retrieval.serve --faiss-index e5_Flat.index --corpus wiki-18.jsonl \
        --retriever-model intfloat/e5-base-v2

and point runs at it with ``retriever: http://127.0.0.1:8000``. The index folder is a saved retriever
(`BaseRetriever.save`: ``retriever.json`` with kind and options, ``corpus.jsonl``, the kind's index files), so
`searchrl.retrieval.load_retriever` opens the same folder in-process and answers identically.

Endpoints and the JSON they speak are described in `searchrl.retrieval.service`. Beside its own ``POST /search``
the service answers Search-R1's retriever API, ``POST /retrieve`` (`searchrl.retrieval.search_r1`), so Search-R1's
own training code, or ``retriever: search_r1+http://HOST:PORT/retrieve``, can search it. Requests to either are
refused with a message that names the limit: a body over ``service_max_body_bytes`` or more than
``service_max_queries`` queries (413), a query over ``service_max_query_chars`` characters or top_k outside
1..``service_max_top_k`` (422).

Searches run one at a time (a lock): the retrievers are not written for concurrent use, and on a CPU-bound index
parallel searches would only share the same cores. Clients batch their queries instead.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import uvicorn
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, Field
except ImportError as error:  # the service's own dependencies; the HTTP client needs none of them
    raise ImportError(f"the retrieval service needs fastapi and uvicorn ({error}): pip install fastapi uvicorn "
                      "(or the project's `serve` extra)") from None

from searchrl.config.service import ServiceConfig
from searchrl.retrieval.base import BaseRetriever, Doc, check_k, clean_queries
from searchrl.retrieval.bm25 import BM25Retriever, top_k_indices
from searchrl.retrieval.dense import DenseRetriever
from searchrl.retrieval.registry import RETRIEVERS, load_retriever, make_retriever
from searchrl.retrieval.service import (
    HEALTH_PATH,
    SEARCH_PATH,
    SEARCH_R1_PATH,
    corpus_fingerprint,
    doc_to_json,
    search_r1_document,
    search_r1_url,
    service_url,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
SEARCH_R1_DEFAULT_TOPK = 3  # passages per query when a /retrieve request names none (Search-R1's server: --topk 3)

ScoredDoc = tuple[Doc, "float | None"]


# ---- searching with scores ------------------------------------------------------------------------------------------

def scored_search(retriever: BaseRetriever, queries: list[str], k: int) -> list[list[ScoredDoc]]:
    """`retriever.search(queries, k)` with each passage's score: BM25's own score, the dense retriever's inner
    product (cosine similarity), None for kinds without one.

    The passages are exactly those `search` returns: queries are cleaned and empty ones answered with nothing as
    `search` does, and BM25's ranking is computed from the index's scores with the retriever's own tokenizer and
    top-k selection (the service's tests compare them).
    """
    if isinstance(retriever, BM25Retriever):
        scorer = _bm25_scored
    elif isinstance(retriever, DenseRetriever):
        scorer = DenseRetriever.scored_batch
    else:
        return [[(doc, None) for doc in docs] for docs in retriever.search(queries, k)]
    k = check_k(k, len(retriever))
    cleaned = clean_queries(queries)
    results: list[list[ScoredDoc]] = [[] for _ in cleaned]
    live = [position for position, query in enumerate(cleaned) if query]
    if live:
        for position, docs in zip(live, scorer(retriever, [cleaned[p] for p in live], k), strict=True):
            results[position] = docs
    return results


def _bm25_scored(retriever, queries: list[str], k: int) -> list[list[ScoredDoc]]:
    results: list[list[ScoredDoc]] = []
    for ids in retriever._query_token_ids(queries):
        if not ids:  # every word unknown or a stopword: no ranking at all, as in BM25Retriever
            results.append([])
            continue
        scores = retriever._index.get_scores_from_ids(ids)
        results.append([(retriever.corpus[int(i)], float(scores[i])) for i in top_k_indices(scores, k)])
    return results


# ---- the web application --------------------------------------------------------------------------------------------

class _BodyLimit:
    """Refuses request bodies over `max_bytes` with 413 before parsing them (declared length or counted bytes)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def _message(self, size: str) -> str:
        return (f"the request body is {size} bytes; this service reads at most {self.max_bytes} "
                "(service_max_body_bytes): send fewer or shorter queries per request")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await JSONResponse({"detail": self._message(declared.decode())}, status_code=413)(scope, receive, send)
            return
        received = 0

        async def counted_receive() -> dict:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:  # a body without a declared length (chunked) that runs over
                raise HTTPException(status_code=413, detail=self._message(f"more than {self.max_bytes}"))
            return message

        await self.app(scope, counted_receive, send)


class SearchRequest(BaseModel):
    """The body of POST /search."""

    queries: list[str] = Field(description="questions to search for, answered in this order")
    top_k: int = Field(3, strict=True, description="passages per query")


class SearchR1Request(BaseModel):
    """The body of POST /retrieve: Search-R1's retriever API."""

    queries: list[str] = Field(description="questions to search for, answered in this order")
    topk: int | None = Field(None, strict=True, description=f"passages per query; missing, null or 0: "
                                                            f"{SEARCH_R1_DEFAULT_TOPK}")
    return_scores: bool = Field(False, description="wrap each passage as {document, score}")


def create_app(retriever: BaseRetriever, service: ServiceConfig | None = None) -> FastAPI:
    """The FastAPI application serving `retriever` under the limits of `service` (defaults when None)."""
    service = service or ServiceConfig()
    started = time.monotonic()
    lock = threading.Lock()
    fingerprint = corpus_fingerprint(retriever.corpus)
    limits = {"max_queries": service.service_max_queries, "max_query_chars": service.service_max_query_chars,
              "max_top_k": service.service_max_top_k, "max_body_bytes": service.service_max_body_bytes}

    app = FastAPI(title="searchrl retrieval service", description=__doc__.split("\n\n")[0])
    app.add_middleware(_BodyLimit, max_bytes=service.service_max_body_bytes)

    @app.get(HEALTH_PATH)
    def health() -> dict[str, Any]:
        return {"ok": True, "passages": len(retriever), "retriever": retriever.kind,
                "uptime_s": round(time.monotonic() - started, 3), "corpus_fingerprint": fingerprint, "limits": limits}

    def checked_search(queries: list[str], top_k: int, top_k_name: str) -> list[list[ScoredDoc]]:
        """The answers to one request's queries, after refusing what the limits do not allow."""
        if len(queries) > service.service_max_queries:
            raise HTTPException(413, f"{len(queries)} queries in one request; this service answers at most "
                                     f"{service.service_max_queries} (service_max_queries): split the batch")
        for position, query in enumerate(queries):
            if len(query) > service.service_max_query_chars:
                raise HTTPException(422, f"queries[{position}] has {len(query)} characters; this service accepts at "
                                         f"most {service.service_max_query_chars} (service_max_query_chars)")
        # top_k beyond the corpus means "all of it", as in-process; the limit bounds what is actually sent
        if not 1 <= min(top_k, len(retriever)) <= service.service_max_top_k:
            raise HTTPException(422, f"{top_k_name} must be between 1 and {service.service_max_top_k} "
                                     f"(service_max_top_k), got {top_k}")
        with lock:
            return scored_search(retriever, queries, top_k)

    @app.post(SEARCH_PATH)
    def search(request: SearchRequest) -> dict[str, Any]:
        # a plain `def`: FastAPI runs it on a worker thread, so /health answers while a search runs
        answers = checked_search(request.queries, request.top_k, "top_k")
        return {"results": [[doc_to_json(doc, score) for doc, score in docs] for docs in answers]}

    @app.post(SEARCH_R1_PATH)
    def retrieve(request: SearchR1Request) -> dict[str, Any]:
        # Search-R1's API: {"result": per query, [{"document": {id, contents}, "score"}] or [{id, contents}]}
        answers = checked_search(request.queries, request.topk or SEARCH_R1_DEFAULT_TOPK, "topk")
        if request.return_scores:
            return {"result": [[{"document": search_r1_document(doc), "score": score} for doc, score in docs]
                               for docs in answers]}
        return {"result": [[search_r1_document(doc) for doc, _ in docs] for docs in answers]}

    return app


# ---- running it -----------------------------------------------------------------------------------------------------

def bind(host: str = DEFAULT_HOST, port: int = 0) -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening: port 0 picks a free one (`sock.getsockname()[1]`).

    Connections are refused until a server starts on it, so a client can be pointed at the port first.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class ServiceThread:
    """A uvicorn server for `app` on a background thread (tests, benchmarks, notebooks): start, url, stop.

    Use as a context manager; `sock` (from `bind`) fixes the port in advance, else a free loopback port is taken.
    """

    def __init__(self, app: Any, sock: socket.socket | None = None, *, log_level: str = "warning") -> None:
        self.sock = sock or bind()
        host, port = self.sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        config = uvicorn.Config(app, log_level=log_level, lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="retrieval-service", daemon=True)

    def start(self, timeout_s: float = 10.0) -> ServiceThread:
        """Start serving; returns once the server accepts connections (raises if it did not within timeout_s)."""
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the retrieval service at {self.url} did not start within {timeout_s} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the server to finish its requests and exit; waits for the thread."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        self.sock.close()

    def __enter__(self):  # returns self (typing.Self needs Python 3.11)
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def build_index(corpus: Sequence[Doc], retriever: str, out: str | Path, **options: Any) -> Path:
    """Build a `retriever` kind over `corpus` and save it as a service index folder at `out`."""
    if service_url(retriever) is not None or search_r1_url(retriever) is not None:
        raise ValueError(f"{retriever!r} is a service, not a retriever kind to build; use one of "
                         f"{', '.join(RETRIEVERS.names())}")
    return make_retriever(retriever, corpus, **options).save(out)


def _read_corpus_argument(args: argparse.Namespace) -> list[Doc]:
    if args.corpus == "synthetic":
        from searchrl.data.synthetic import make_world

        world = make_world(seed=args.world_seed, n_entities=args.world_entities,
                           words_per_passage=args.world_passage_words)
        return world.corpus
    from searchrl.data.loaders import load_corpus

    return load_corpus(args.corpus)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m searchrl.retrieval.serve build",
                                     description="Build a retrieval service index folder from a corpus.")
    parser.add_argument("--corpus", required=True,
                        help="passages (jsonl: id, title, text; or tsv), or 'synthetic' for the synthetic world")
    parser.add_argument("--retriever", default="bm25", help=f"retriever kind: {', '.join(RETRIEVERS.names())}")
    parser.add_argument("--out", required=True, help="folder to write the index into")
    parser.add_argument("--retriever-model", default="",
                        help="dense: the encoder, a sentence-transformers / Hugging Face folder or hub id (as "
                             "retriever_model; e.g. intfloat/e5-base-v2); default: the bundled all-MiniLM-L6-v2")
    parser.add_argument("--world-seed", type=int, default=0, help="synthetic world: seed (as world_seed)")
    parser.add_argument("--world-entities", type=int, default=200, help="synthetic world: entities (world_entities)")
    parser.add_argument("--world-passage-words", type=int, default=100,
                        help="synthetic world: words per passage (world_passage_words)")
    return parser


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m searchrl.retrieval.serve",
        description="Serve a retrieval index over HTTP (build one first: python -m searchrl.retrieval.serve build).")
    parser.add_argument("--index", help="index folder written by `build` (or any saved retriever)")
    parser.add_argument("--faiss-index", help="instead of --index: a prebuilt faiss index file (e.g. Search-R1's "
                                              "e5_Flat.index), searched in place over --corpus")
    parser.add_argument("--corpus", help="with --faiss-index: the jsonl passage file the index was built over")
    parser.add_argument("--retriever-model", default="",
                        help="with --faiss-index: the encoder its vectors came from (as retriever_model, e.g. "
                             "intfloat/e5-base-v2); default: the bundled all-MiniLM-L6-v2")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--device", default=None, help="dense retriever: device for the query encoder (cpu, cuda)")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--access-log", action="store_true",
                        help="log every request (off by default: at hundreds of requests per second it costs time)")
    for name, default in ServiceConfig().to_dict().items():
        if name.startswith("service_max_"):
            parser.add_argument("--" + name.removeprefix("service_").replace("_", "-"), type=int, default=default,
                                dest=name, help=f"{name} (default {default})")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: `build ...` writes an index folder; otherwise serve `--index DIR` until interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["build"]:
        args = _build_parser().parse_args(argv[1:])
        corpus = _read_corpus_argument(args)
        options = {"model_name_or_path": args.retriever_model} if args.retriever_model else {}
        out = build_index(corpus, args.retriever, args.out, **options)
        print(f"built a {args.retriever} index over {len(corpus)} passages in {out}; serve it with "
              f"python -m searchrl.retrieval.serve --index {out}")
        return
    parser = _serve_parser()
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {"show_progress": False}  # searches run inside requests: no bars
    if args.device:
        overrides["device"] = args.device
    if bool(args.index) == bool(args.faiss_index):
        parser.error("give either --index DIR (a folder written by `build`) or --faiss-index FILE with --corpus FILE")
    if args.faiss_index:
        if not args.corpus:
            parser.error("--faiss-index needs --corpus, the passage file the index was built over")
        from searchrl.data.corpus_file import CorpusFile

        retriever = make_retriever("dense", CorpusFile(args.corpus), index_file=args.faiss_index,
                                   model_name_or_path=args.retriever_model or None, **overrides)
        args.index = args.faiss_index
    else:
        retriever = load_retriever(args.index, **overrides)
    service = ServiceConfig(**{k: v for k, v in vars(args).items() if k.startswith("service_")})
    print(f"serving {retriever!r} from {args.index} at http://{args.host}:{args.port}", flush=True)
    uvicorn.run(create_app(retriever, service), host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.access_log)


if __name__ == "__main__":
    main()

"""Search-R1's retriever API, both ways: our client against a server written here from Search-R1's documented shapes,
and Search-R1-shaped requests answered by our service. Everything listens on 127.0.0.1 only.

The shapes (Search-R1's search_r1/search/retrieval_server.py): POST /retrieve with
{"queries": [...], "topk": k, "return_scores": bool} -> {"result": [per query: [{"document": DOC, "score": s}, ...]]},
or [per query: [DOC, ...]] without scores; DOC is a corpus row {"id": ..., "contents": '"Title"\\ntext'}.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.request import Request, urlopen

import pytest

from searchrl.config import RunConfig
from searchrl.config.names import remote_retriever_key
from searchrl.config.service import ServiceConfig, search_r1_url
from searchrl.core.registry import UnknownNameError
from searchrl.data.schema import Doc
from searchrl.retrieval import RETRIEVERS, BM25Retriever, make_retriever
from searchrl.retrieval.http import ServiceError, ServiceUnavailableError
from searchrl.retrieval.search_r1 import SearchR1Retriever, parse_contents
from searchrl.retrieval.serve import ServiceThread, bind, create_app
from searchrl.retrieval.service import service_options
from searchrl.rollout import RolloutConfig

ROWS = [
    {"id": "0", "contents": '"Velmora"\nVelmora is a harbour city founded by fishermen.'},
    {"id": "1", "contents": '"Ostrand River"\nThe Ostrand River flows west into the Grey Sea.'},
    {"id": "2", "contents": '"Pellinor Bridge"\nA stone bridge with nine arches.\nIt crosses the Ostrand.'},
]
FAST = RolloutConfig(retriever_timeout_s=5.0, retriever_retries=1, retriever_backoff_s=0.01)


class SearchR1Shaped(BaseHTTPRequestHandler):
    """Answers POST /retrieve as Search-R1's server does: rows ranked by words shared with the query."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body))
        mode = self.server.mode
        if self.path != "/retrieve" or mode == "fail":
            self.send_response(404 if self.path != "/retrieve" else 500)
            self.end_headers()
            return
        topk = body.get("topk") or 3
        result = []
        for query in body["queries"]:
            words = set(query.lower().split())
            ranked = sorted(ROWS, key=lambda row: -len(words & set(row["contents"].lower().split())))[:topk]
            rows = [{k: v for k, v in row.items() if k != "id"} if mode == "no-ids" else row for row in ranked]
            if body.get("return_scores"):
                result.append([{"document": row, "score": float(len(rows) - i)} for i, row in enumerate(rows)])
            else:
                result.append(rows)
        if mode == "short":
            result = result[:-1]
        data = json.dumps({"result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def shaped_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearchR1Shaped)
    server.requests, server.mode = [], "ok"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    yield server
    server.shutdown()
    server.server_close()


# ---- our client, their server ---------------------------------------------------------------------------------


def test_our_client_reads_search_r1_answers(shaped_server):
    client = SearchR1Retriever(shaped_server.url, rollout=FAST)
    results = client.search_scored(["harbour city fishermen", "stone bridge arches"], k=2)
    assert [[doc.id for doc, _ in docs] for docs in results] == [["0", "1"], ["2", "0"]]
    velmora, score = results[0][0]
    assert velmora == Doc("0", "Velmora", "Velmora is a harbour city founded by fishermen.") and score == 2.0
    bridge = results[1][0][0]
    assert (bridge.title, bridge.text) == ("Pellinor Bridge", "A stone bridge with nine arches.\nIt crosses the Ostrand.")
    path, body = shaped_server.requests[-1]
    assert path == "/retrieve"
    assert body == {"queries": ["harbour city fishermen", "stone bridge arches"], "topk": 2, "return_scores": True}


def test_batches_are_split_and_results_cached(shaped_server):
    client = SearchR1Retriever(shaped_server.url, rollout=FAST, service=ServiceConfig(service_max_queries=2))
    queries = ["harbour", "river", "bridge", "sea", "arches"]
    assert len(client.search(queries, k=1)) == 5
    assert [len(body["queries"]) for _, body in shaped_server.requests] == [2, 2, 1]
    client.search(["harbour", ""], k=1)  # cached, and the empty query answered locally
    assert len(shaped_server.requests) == 3 and client.cache_info().hits == 1


def test_passages_without_ids_get_stable_ones(shaped_server):
    shaped_server.mode = "no-ids"
    client = SearchR1Retriever(shaped_server.url, rollout=FAST, service=ServiceConfig(service_cache_size=0))
    first = client.search(["harbour city"], k=1)[0][0]
    again = client.search(["harbour city"], k=1)[0][0]
    assert first.id.startswith("sha1:") and first.id == again.id and first.title == "Velmora"


def test_a_wrong_number_of_result_lists_fails_loudly(shaped_server):
    shaped_server.mode = "short"
    client = SearchR1Retriever(shaped_server.url, rollout=FAST)
    with pytest.raises(ServiceError, match="1 result lists for 2 queries"):
        client.search(["harbour", "river"], k=1)


def test_a_failing_or_absent_server_is_retried_then_unavailable(shaped_server):
    shaped_server.mode = "fail"
    client = SearchR1Retriever(shaped_server.url, rollout=FAST)
    with pytest.raises(ServiceUnavailableError, match="failed 2 time"):
        client.search(["harbour"], k=1)
    assert len(shaped_server.requests) == 2
    sock = bind()  # bound, never listening: refused
    port = sock.getsockname()[1]
    try:
        down = SearchR1Retriever(f"http://127.0.0.1:{port}/retrieve", rollout=FAST)
        with pytest.raises(ServiceUnavailableError):
            down.search(["harbour"], k=1)
        with pytest.raises(ServiceUnavailableError, match="service_wait_s"):
            down.wait_until_up(0.6, say=lambda line: None, every_s=10)
    finally:
        sock.close()


def test_wait_until_up_knocks_with_a_search(shaped_server):
    client = SearchR1Retriever(shaped_server.url, rollout=FAST)
    assert client.wait_until_up(5.0, say=lambda line: None) < 5.0
    assert client.wait_until_up(0) == 0.0
    assert shaped_server.requests[0][1]["topk"] == 1


def test_contents_are_split_into_title_and_text():
    assert parse_contents('"A title"\nline one\nline two') == ("A title", "line one\nline two")
    assert parse_contents("no title line") == ("", "no title line")
    assert parse_contents('""\ntext only') == ("", "text only")


# ---- the name ---------------------------------------------------------------------------------------------------


def test_the_name_picks_the_client_and_passes_the_schema(shaped_server):
    name = "search_r1+" + shaped_server.url
    assert search_r1_url(name) == shaped_server.url
    assert search_r1_url("Search-R1+http://127.0.0.1:9") == "http://127.0.0.1:9/retrieve"  # no path: /retrieve
    assert search_r1_url("bm25") is None and search_r1_url("http://127.0.0.1:9") is None
    assert remote_retriever_key(name) == name  # the schema's plain-data check
    with pytest.raises(UnknownNameError, match="search_r1"):
        remote_retriever_key("search_r1+ftp://example")
    assert RETRIEVERS.key(name) == name and RETRIEVERS.problem("search_r1+nothing") is not None
    cfg = RunConfig(retriever=name, retriever_timeout_s=5.0)
    retriever = make_retriever(cfg.retriever, [], **service_options(cfg))
    assert isinstance(retriever, SearchR1Retriever) and retriever.timeout_s == 5.0
    assert retriever.search(["harbour"], k=1)[0][0].id == "0"


# ---- their requests, our service --------------------------------------------------------------------------------


CORPUS = [Doc(row["id"], *parse_contents(row["contents"])) for row in ROWS]


@pytest.fixture(scope="module")
def our_service():
    bm25 = BM25Retriever(CORPUS, show_progress=False)
    with ServiceThread(create_app(bm25, ServiceConfig(service_max_queries=4, service_max_top_k=3))) as running:
        running.bm25 = bm25
        yield running


def _post(url: str, payload: dict) -> tuple[int, dict]:
    request = Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except Exception as error:  # noqa: BLE001  (HTTPError carries the status and the detail)
        return error.code, json.loads(error.read())


def test_our_service_answers_search_r1_requests_with_scores(our_service):
    status, body = _post(our_service.url + "/retrieve",
                         {"queries": ["harbour city", "stone bridge"], "topk": 2, "return_scores": True})
    assert status == 200 and list(body) == ["result"] and len(body["result"]) == 2
    expected = our_service.bm25.search(["harbour city", "stone bridge"], k=2)
    for items, docs in zip(body["result"], expected, strict=True):
        assert [item["document"]["id"] for item in items] == [doc.id for doc in docs]
        for item, doc in zip(items, docs, strict=True):
            assert set(item) == {"document", "score"} and isinstance(item["score"], float)
            assert item["document"] == {"id": doc.id, "contents": f'"{doc.title}"\n{doc.text}'}
    assert body["result"][0][0]["document"] == ROWS[0]  # a wiki-18 corpus row, as it went in


def test_our_service_answers_without_scores_and_with_the_default_topk(our_service):
    status, body = _post(our_service.url + "/retrieve", {"queries": ["harbour city"], "return_scores": False})
    assert status == 200 and len(body["result"][0]) == 3
    assert all(set(doc) == {"id", "contents"} for doc in body["result"][0])
    status, body = _post(our_service.url + "/retrieve", {"queries": ["harbour city"], "topk": None})
    assert status == 200 and len(body["result"][0]) == 3 and "id" in body["result"][0][0]


def test_our_service_applies_its_limits_to_search_r1_requests(our_service):
    assert _post(our_service.url + "/retrieve", {"queries": ["a"] * 5, "topk": 1})[0] == 413
    status, body = _post(our_service.url + "/retrieve", {"queries": ["a"], "topk": -1})
    assert status == 422 and "topk" in body["detail"]


def test_our_client_and_our_service_agree(our_service):
    # the API does not say its limits: the client splits batches to its own service_max_queries
    client = SearchR1Retriever(our_service.url + "/retrieve", rollout=FAST, service=ServiceConfig(service_max_queries=4))
    queries = ["harbour city", "river sea", "nine arches", "fishermen", "Ostrand"]
    assert [[d.id for d in docs] for docs in client.search(queries, k=2)] == \
        [[d.id for d in docs] for docs in our_service.bm25.search(queries, k=2)]
    assert client.search(["harbour city"], k=1)[0] == our_service.bm25.search(["harbour city"], k=1)[0]


def test_a_dense_service_sends_cosine_scores_in_search_order(monkeypatch):
    """Dense passages come with their inner-product scores (cosine over normalised vectors), best first, the same
    passages `search` returns; an empty query gets an empty list, as from `search`."""
    import numpy as np

    from fakes import BagOfWordsEncoder
    from searchrl.retrieval import dense as dense_module
    from searchrl.retrieval.dense import DenseRetriever
    from searchrl.retrieval.serve import scored_search

    encoder = BagOfWordsEncoder(64)
    monkeypatch.setattr(dense_module, "_load_encoder", lambda model_name_or_path, device: encoder)
    dense = DenseRetriever(CORPUS, model_name_or_path="fake-encoder", cache_dir=None, show_progress=False)
    queries = ["harbour city", "", "stone bridge"]
    scored = scored_search(dense, queries, 3)
    assert [[doc.id for doc, _ in docs] for docs in scored] == [[d.id for d in docs] for docs in dense.search(queries, 3)]
    assert scored[1] == []
    for query, docs in zip(queries, scored):
        if not query:
            continue
        scores = [score for _, score in docs]
        assert scores == sorted(scores, reverse=True) and all(isinstance(s, float) for s in scores)
        vector = encoder.encode([query], batch_size=1, show_progress_bar=False, convert_to_numpy=True,
                                normalize_embeddings=True)[0]
        for doc, score in docs:
            passage = encoder.encode([doc.as_text()], batch_size=1, show_progress_bar=False, convert_to_numpy=True,
                                     normalize_embeddings=True)[0]
            assert score == pytest.approx(float(np.dot(vector, passage)), abs=1e-5)
    with ServiceThread(create_app(dense, ServiceConfig())) as running:
        status, body = _post(running.url + "/retrieve", {"queries": ["harbour city"], "topk": 2, "return_scores": True})
    assert status == 200 and [item["score"] for item in body["result"][0]] == pytest.approx(
        [score for _, score in scored[0][:2]], abs=1e-6)

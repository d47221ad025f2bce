"""The shared retrieval service and its HTTP client: same answers as in-process, limits, retries, loud failures.

Every server runs in this process on a free loopback port; nothing leaves the machine.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from fakes import MiniProtocol, ScriptedGenerator
from searchrl.config import RunConfig
from searchrl.config.service import ServiceConfig, service_problems
from searchrl.data.schema import Doc
from searchrl.data.synthetic import make_world
from searchrl.retrieval import MAX_QUERY_CHARS, RETRIEVERS, BM25Retriever, Retriever, load_retriever, make_retriever
from searchrl.retrieval.http import HTTPRetriever, ServiceError, ServiceUnavailableError
from searchrl.retrieval.registry import retriever_class
from searchrl.retrieval.serve import ServiceThread, bind, build_index, create_app, main, scored_search
from searchrl.retrieval.service import corpus_fingerprint, service_url
from searchrl.rollout import RetrieverError, RolloutConfig, SearchRollout

PASSAGES = [
    ("Velmora", "Velmora is a harbour city on the northern coast, founded by fishermen in the ninth century."),
    ("Ostrand River", "The Ostrand River flows west through three valleys before reaching the Grey Sea."),
    ("Kaelith Dunmore", "Kaelith Dunmore was a painter known for storm scenes and portraits of sailors."),
    ("Pellinor Bridge", "Pellinor Bridge is a stone bridge with nine arches crossing the Ostrand River."),
    ("Quillon Observatory", "Quillon Observatory houses a large telescope used to map comets and planets."),
    ("Tessaly Vorne", "Tessaly Vorne was a chemist who discovered a green dye made from lichen."),
]
CORPUS = [Doc(id=f"p{i}", title=title, text=text) for i, (title, text) in enumerate(PASSAGES)]
FAST = RolloutConfig(retriever_timeout_s=5.0, retriever_retries=0, retriever_backoff_s=0.01)


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever(CORPUS, show_progress=False)


@pytest.fixture(scope="module")
def service(bm25):
    with ServiceThread(create_app(bm25)) as running:
        yield running


@pytest.fixture(scope="module")
def tight_service(bm25):
    limits = ServiceConfig(service_max_queries=4, service_max_query_chars=50, service_max_top_k=3,
                           service_max_body_bytes=2048)
    with ServiceThread(create_app(bm25, limits)) as running:
        yield running


def post(url: str, body: bytes | object, *, chunked: bool = False) -> tuple[int, str]:
    """POST /search with a raw body; (status, detail message)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    if chunked:
        connection.request("POST", "/search", body=iter([data[i:i + 512] for i in range(0, len(data), 512)]),
                           headers={"Content-Type": "application/json"}, encode_chunked=True)
    else:
        connection.request("POST", "/search", body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = json.loads(response.read())
    connection.close()
    detail = payload.get("detail")
    return response.status, detail if isinstance(detail, str) else json.dumps(detail)


def ids(results: list[list[Doc]]) -> list[list[str]]:
    return [[doc.id for doc in docs] for docs in results]


# ---- same answers as in-process -------------------------------------------------------------------------------------

def test_service_answers_exactly_as_the_in_process_retriever_on_a_synthetic_world():
    world = make_world(seed=3, n_entities=40, n_questions_per_type=20)
    local = BM25Retriever(world.corpus, show_progress=False)
    questions = [row["question"] for row in world.splits["train"]][:60]
    questions += ["", "the of and", "zzyzx qwrtp", world.corpus[5].title]
    with ServiceThread(create_app(local)) as running:
        remote = HTTPRetriever(running.url, rollout=FAST, corpus=world.corpus)
        for k in (1, 3, 25):
            assert remote.search(questions, k) == local.search(questions, k)
        assert len(remote) == len(world.corpus)


def test_scores_are_bm25_scores_best_first(bm25, service):
    remote = HTTPRetriever(service.url, rollout=FAST)
    (scored,) = remote.search_scored(["stone bridge with nine arches"], 3)
    assert [doc.id for doc, _ in scored] == ["p3", "p0", "p1"]  # p3 matches; the rest are score-0 padding
    assert scored[0][1] > 0 and [score for _, score in scored[1:]] == [0.0, 0.0]
    assert scored == scored_search(bm25, ["stone bridge with nine arches"], 3)[0]


def test_a_saved_index_folder_serves_what_it_was_built_from(tmp_path):
    folder = build_index(CORPUS, "bm25", tmp_path / "index", show_progress=False)
    assert (folder / "retriever.json").is_file() and (folder / "corpus.jsonl").is_file()
    loaded = load_retriever(folder, show_progress=False)
    with ServiceThread(create_app(loaded)) as running:
        assert ids(HTTPRetriever(running.url).search(["green dye from lichen"], 1)) == [["p5"]]


def test_build_command_writes_an_index_of_the_synthetic_world(tmp_path, capsys):
    main(["build", "--corpus", "synthetic", "--world-entities", "30", "--out", str(tmp_path / "world")])
    assert "built a bm25 index over 90 passages" in capsys.readouterr().out
    assert len(load_retriever(tmp_path / "world", show_progress=False)) == 90


# ---- health and request limits --------------------------------------------------------------------------------------

def test_health_reports_passages_kind_uptime_and_limits(service):
    health = HTTPRetriever(service.url).health()
    assert health["ok"] is True and health["passages"] == 6 and health["retriever"] == "bm25"
    assert health["uptime_s"] >= 0 and health["corpus_fingerprint"] == corpus_fingerprint(CORPUS)
    assert health["limits"]["max_queries"] == ServiceConfig().service_max_queries


def test_too_many_queries_is_413_naming_the_limit(tight_service):
    status, detail = post(tight_service.url, {"queries": ["a"] * 5, "top_k": 1})
    assert status == 413 and "5 queries" in detail and "at most 4 (service_max_queries)" in detail


def test_an_overlong_query_is_422_naming_it(tight_service):
    status, detail = post(tight_service.url, {"queries": ["ok", "x" * 51], "top_k": 1})
    assert status == 422 and "queries[1] has 51 characters" in detail and "at most 50" in detail


@pytest.mark.parametrize("top_k", [0, 4])
def test_top_k_out_of_range_is_422(tight_service, top_k):
    status, detail = post(tight_service.url, {"queries": ["Velmora"], "top_k": top_k})
    assert status == 422 and "top_k must be between 1 and 3 (service_max_top_k)" in detail


def test_malformed_requests_are_422(tight_service):
    assert post(tight_service.url, {"queries": "Velmora", "top_k": 1})[0] == 422  # a string is not a list
    assert post(tight_service.url, {"queries": ["Velmora"], "top_k": "2"})[0] == 422  # no silent coercion
    assert post(tight_service.url, b"{not json")[0] == 422


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_byte_limit_is_413(tight_service, chunked):
    # 3 queries of 40 characters fit every other limit; the padding field makes the body 3 kB
    status, detail = post(tight_service.url, {"queries": ["y" * 40] * 3, "top_k": 1, "pad": "z" * 3000},
                          chunked=chunked)
    assert status == 413 and "at most 2048 (service_max_body_bytes)" in detail


def test_the_client_splits_batches_to_the_service_limit(bm25, tight_service):
    remote = HTTPRetriever(tight_service.url, rollout=FAST)
    queries = [f"{title} question" for title, _ in PASSAGES] * 2 + ["Grey Sea"]  # 7 distinct queries
    assert remote.search(queries, 2) == bm25.search(queries, 2)
    assert remote.requests == 1 + 2  # health, then 7 distinct queries in chunks of at most 4


def test_a_request_the_service_refuses_is_not_retried(tight_service):
    remote = HTTPRetriever(tight_service.url, rollout=RolloutConfig(retriever_retries=3, retriever_backoff_s=5.0))
    started = time.perf_counter()
    with pytest.raises(ServiceError, match="HTTP 422.*service_max_query_chars"):
        remote.search(["x" * 60], 1)
    assert remote.requests == 2 and time.perf_counter() - started < 2  # health + one refused search, no waiting


# ---- retries, timeouts, loud failures -------------------------------------------------------------------------------

def test_the_client_retries_until_a_late_service_is_up(bm25):
    sock = bind()  # the port is reserved but refuses connections until the server starts
    running = ServiceThread(create_app(bm25), sock)
    starter = threading.Timer(0.4, running.start)
    starter.start()
    try:
        remote = HTTPRetriever(running.url, rollout=RolloutConfig(retriever_timeout_s=10.0, retriever_retries=6,
                                                                  retriever_backoff_s=0.1))
        assert ids(remote.search(["telescope used to map comets"], 1)) == [["p4"]]
        assert remote.requests >= 3  # at least one refused attempt before the health check and the search
    finally:
        starter.join()
        running.stop()


def test_a_service_that_stays_down_is_a_loud_error_not_empty_results():
    sock = bind()
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        remote = HTTPRetriever(url, rollout=RolloutConfig(retriever_timeout_s=5.0, retriever_retries=2,
                                                          retriever_backoff_s=0.01))
        started = time.perf_counter()
        with pytest.raises(ServiceUnavailableError, match=r"failed 3 time\(s\).*ConnectionRefusedError"):
            remote.search(["Velmora"], 3)
        assert remote.requests == 3 and time.perf_counter() - started < 2
    finally:
        sock.close()


def test_a_hung_service_times_out_within_the_rollout_timeout():
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # connections complete in the backlog, but nothing ever answers
    try:
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        remote = HTTPRetriever(url, rollout=RolloutConfig(retriever_timeout_s=0.5, retriever_retries=3,
                                                          retriever_backoff_s=0.1))
        started = time.perf_counter()
        with pytest.raises(ServiceUnavailableError, match="timed out"):
            remote.search(["Velmora"], 3)
        assert time.perf_counter() - started < 1.5  # the whole call, retries included, stays within the timeout
    finally:
        hung.close()


def test_a_service_over_another_corpus_is_refused(service):
    other = CORPUS[:-1] + [Doc("p5", "Tessaly Vorne", "A different text.")]
    with pytest.raises(ServiceError, match="serves a different corpus"):
        make_retriever(service.url, other).search(["Velmora"], 1)


def test_nothing_for_every_query_is_a_loud_error(service):
    remote = HTTPRetriever(service.url, rollout=FAST, service=ServiceConfig(service_empty_streak=3))
    assert remote.search(["the of", "zzyzx"], 2) == [[], []]  # two in a row: still the retriever's answer
    assert ids(remote.search(["Velmora"], 1)) == [["p0"]]  # a hit resets the streak
    remote.search(["qqq one", "qqq two"], 2)
    with pytest.raises(ServiceError, match="no passage for the last 3 queries in a row"):
        remote.search(["qqq zzz"], 2)


# ---- the cache ------------------------------------------------------------------------------------------------------

def test_repeated_queries_are_answered_from_the_cache(service):
    remote = HTTPRetriever(service.url, rollout=FAST, service=ServiceConfig(service_cache_size=2))
    first = remote.search(["Velmora", "Velmora", "Grey Sea"], 2)  # the duplicate is asked once
    requests = remote.requests
    assert remote.search(["Grey Sea", "Velmora"], 2) == [first[2], first[0]] and remote.requests == requests
    info = remote.cache_info()
    assert (info.hits, info.misses, info.size, info.capacity) == (2, 3, 2, 2)
    remote.search(["painter"], 2)  # a third entry evicts the least recently used ("Grey Sea")
    remote.search(["Velmora"], 2)
    assert remote.requests == requests + 1
    remote.search(["Grey Sea"], 2)
    assert remote.requests == requests + 2 and remote.cache_info().hits == 3


def test_cache_size_zero_asks_every_time(service):
    remote = HTTPRetriever(service.url, rollout=FAST, service=ServiceConfig(service_cache_size=0))
    remote.search(["Velmora"], 1)
    remote.search(["Velmora"], 1)
    assert remote.requests == 3 and remote.cache_info().hits == 0


# ---- names and settings ---------------------------------------------------------------------------------------------

def test_service_names_are_retrievers_for_the_registry_and_the_run_config(service):
    assert service_url("http:127.0.0.1:8000") == service_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert service_url("bm25") is None and service_url("mymodule:thing") is None
    assert RETRIEVERS.problem("http://127.0.0.1:8000") is None and RETRIEVERS.problem("bm25") is None
    assert "without a host" in RETRIEVERS.problem("http://")
    assert "port" in RETRIEVERS.problem("http://127.0.0.1:99999")
    assert retriever_class("http:localhost:9") is HTTPRetriever
    assert "http://HOST:PORT" in RETRIEVERS.describe()
    assert RunConfig(retriever="http:127.0.0.1:8000").retriever == "http:127.0.0.1:8000"
    with pytest.raises(ValueError, match="without a host"):
        RunConfig(retriever="http://")
    remote = make_retriever(service.url.replace("http://", "http:"), CORPUS, rollout=FAST)
    assert isinstance(remote, HTTPRetriever) and isinstance(remote, Retriever) and len(remote) == 6


def test_service_settings_are_checked():
    assert service_problems({"service_cache_size": -1, "service_max_queries": 0}) == [
        ("service_cache_size", "service_cache_size must be >= 0, got -1"),
        ("service_max_queries", "service_max_queries must be >= 1, got 0"),
    ]
    with pytest.raises(ValueError, match="service_max_body_bytes must be >= 1024"):
        ServiceConfig(service_max_body_bytes=10)


# ---- the retriever contract, for the in-process retriever and the client alike --------------------------------------

@pytest.fixture(params=["in-process", "http"])
def retriever(request, bm25, service):
    return bm25 if request.param == "in-process" else HTTPRetriever(service.url, rollout=FAST)


@pytest.mark.parametrize("bad_k", [0, -3])
def test_contract_k_below_one_is_an_error(retriever, bad_k):
    with pytest.raises(ValueError, match="k must be at least 1"):
        retriever.search(["Velmora"], k=bad_k)


def test_contract_k_must_be_an_int(retriever):
    with pytest.raises(TypeError, match="positive integer"):
        retriever.search(["Velmora"], k=2.5)


def test_contract_a_bare_string_is_not_a_batch(retriever):
    with pytest.raises(TypeError, match=r"wrap a single query as \[query\]"):
        retriever.search("Velmora", k=2)


def test_contract_empty_and_unknown_queries_get_empty_results(retriever):
    assert retriever.search([], k=3) == []
    results = ids(retriever.search(["", "   \n", "the of and", "Who founded the harbour city Velmora?"], k=2))
    assert results[:3] == [[], [], []] and results[3][0] == "p0"


def test_contract_a_huge_query_is_cut_not_fatal(retriever):
    huge = "Velmora " + "x" * 100_000
    assert ids(retriever.search([huge], k=2))[0][0] == "p0"
    assert retriever.search([huge[:MAX_QUERY_CHARS] + " Quillon telescope"], k=2) == retriever.search([huge], k=2)


def test_contract_k_beyond_the_corpus_returns_every_passage_once(retriever):
    (docs,) = retriever.search(["Ostrand River"], k=1000)
    assert sorted(doc.id for doc in docs) == [doc.id for doc in CORPUS] and docs[0].id in {"p1", "p3"}


def test_contract_batch_equals_one_by_one(retriever):
    queries = ["stone bridge", "green dye", "painter of storms"]
    assert retriever.search(queries, k=3) == [retriever.search([q], k=3)[0] for q in queries]


# ---- through the rollout engine (as tests/test_retriever_contract.py checks in-process retrievers) ------------------

def _rollout(tokenizer, retriever, script, **cfg):
    config = RolloutConfig(**{"retriever_backoff_s": 0.01, **cfg})
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, ScriptedGenerator(tokenizer, [script]), config)
    return engine.run([tokenizer("question", add_special_tokens=False)["input_ids"]])


def test_rollout_counts_empty_results_from_the_service(tokenizer, service):
    remote = HTTPRetriever(service.url, rollout=FAST)
    (traj,) = _rollout(tokenizer, remote, ["<search>the of and</search>", "<answer>x</answer>"])
    assert traj.num_searches == 1 and traj.empty_results == 1 and traj.doc_ids == [[]]
    (traj,) = _rollout(tokenizer, remote, ["<search>Pellinor Bridge</search>", "<answer>x</answer>"])
    assert traj.empty_results == 0 and traj.doc_ids == [["p3", "p0", "p1"]]  # a match, then score-0 padding


def test_rollout_stops_loudly_when_the_service_is_down(tokenizer):
    sock = bind()
    try:
        cfg = {"retriever_timeout_s": 2.0, "retriever_retries": 1, "retriever_backoff_s": 0.01}
        remote = HTTPRetriever(f"http://127.0.0.1:{sock.getsockname()[1]}", rollout=RolloutConfig(**cfg))
        with pytest.raises(RetrieverError, match="failed 2 times in a row.*ServiceUnavailableError"):
            _rollout(tokenizer, remote, ["<search>Velmora</search>", "<answer>x</answer>"], **cfg)
    finally:
        sock.close()


def test_a_corpus_is_hashed_once_and_again_when_its_length_or_ends_change():
    corpus = [Doc(id=str(i), title=f"t{i}", text=f"passage {i}") for i in range(4)]
    first = corpus_fingerprint(corpus)
    assert corpus_fingerprint(list(corpus)) == first  # the same passages in another list: the same digest
    corpus.append(Doc(id="4", title="t4", text="passage 4"))
    assert corpus_fingerprint(corpus) != first
    corpus[-1] = Doc(id="4", title="t4", text="another passage")  # same length, a new passage at an end
    changed = corpus_fingerprint(corpus)
    assert changed not in (first, corpus_fingerprint(corpus[:4] + [Doc(id="4", title="t4", text="passage 4")]))

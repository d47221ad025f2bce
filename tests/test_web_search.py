"""The web-search retriever against a fake search API on loopback: answers as Docs, field mappings, the key, retries,
loud failures, the cache, long texts summarised, and the name in the registry and RunConfig.

Every server runs in this process on a free 127.0.0.1 port; nothing leaves the machine.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlsplit

import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.data.schema import Doc
from searchrl.retrieval import RETRIEVERS, Retriever, make_retriever
from searchrl.retrieval.http import ServiceError, ServiceUnavailableError
from searchrl.retrieval.service import service_options
from searchrl.retrieval.web import (
    SUMMARY_INSTRUCTION,
    ModelSummarizer,
    WebSearchConfig,
    WebSearchKeyError,
    WebSearchRetriever,
    keep_relevant_sentences,
    page_text,
)
from searchrl.rollout import RolloutConfig

KEY = "test-key-not-secret-4711"
RETRY = RolloutConfig(retriever_timeout_s=5.0, retriever_retries=2, retriever_backoff_s=0.01)

HITS = [
    {"title": "Velmora", "url": "https://example.test/velmora",
     "content": "Velmora is a <strong>harbour city</strong> founded by fishermen &amp; traders."},
    {"title": "Ostrand River", "url": "https://example.test/ostrand", "content": "The Ostrand flows west."},
    {"title": "Pellinor Bridge", "url": "https://example.test/pellinor", "content": "A bridge with nine arches."},
    {"title": "Quillon Observatory", "url": "https://example.test/quillon", "content": "It maps comets."},
]
LONG_PAGE = ("Velmora has a long history. Its market sells fish and salt every morning. Velmora was founded in "
             "the ninth century by fishermen from the north. Tourists visit the old lighthouse. Rain is common in "
             "autumn and the winters are mild.")
FOUNDING = "Velmora was founded in the ninth century by fishermen from the north."


class FakeSearchAPI:
    """A JSON search API on 127.0.0.1: each request gets the next scripted reply, then `default`; requests are
    recorded (method, path, query parameters, headers, JSON body). `pages` serves (status, content type, body) by
    path, for page downloads."""

    def __init__(self) -> None:
        self.default: tuple[int, object] = (200, {"results": HITS})
        self.replies: list[tuple[int, object]] = []
        self.pages: dict[str, tuple[int, str, bytes]] = {}
        self.requests: list[dict] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if parts.path in api.pages:
                    status, content_type, data = api.pages[parts.path]
                    return self._send(status, data, content_type)
                api.requests.append({"method": self.command, "path": parts.path, "query": parse_qs(parts.query),
                                     "headers": dict(self.headers.items()),
                                     "body": json.loads(body) if body else None})
                status, reply = api.replies.pop(0) if api.replies else api.default
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self._send(status, data, "application/json")

            def _send(self, status: int, data: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        # a short poll, so that shutdown() at the end of each test does not wait half a second
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("SEARCHRL_SEARCH_API_KEY", KEY)


@pytest.fixture
def api():
    with FakeSearchAPI() as running:
        yield running


def retriever(api: FakeSearchAPI, rollout: RolloutConfig | None = RETRY, **settings) -> WebSearchRetriever:
    return WebSearchRetriever(api.url, rollout=rollout, web=WebSearchConfig(**settings))


# ---- answers as documents -------------------------------------------------------------------------------------------

def test_results_become_docs_cut_to_k_with_the_query_and_count_sent(api):
    web = retriever(api)
    assert isinstance(web, Retriever)
    (docs,) = web.search(["  who founded Velmora?  "], k=2)
    assert docs == [
        Doc("https://example.test/velmora", "Velmora", "Velmora is a harbour city founded by fishermen & traders."),
        Doc("https://example.test/ostrand", "Ostrand River", "The Ostrand flows west."),
    ]
    (request,) = api.requests
    assert request["method"] == "GET" and request["path"] == "/search"
    assert request["query"] == {"q": ["who founded Velmora?"], "count": ["2"]}


def test_fixed_parameters_in_the_url_are_kept_and_post_sends_a_json_body(api):
    web = WebSearchRetriever(api.url + "?format=json", rollout=RETRY,
                             web=WebSearchConfig(web_method="POST", web_query_param="query", web_count_param="num"))
    web.search(["Velmora"], k=3)
    (request,) = api.requests
    assert request["method"] == "POST" and request["query"] == {"format": ["json"]}
    assert request["body"] == {"query": "Velmora", "num": 3}


BING = {"webPages": {"value": [{"name": "Velmora - Wiki", "url": "https://b.test/1", "snippet": "A harbour city."}]}}
BRAVE = {"web": {"results": [{"title": "Velmora - Wiki", "url": "https://b.test/1", "description": "A harbour city."}]}}
CUSTOM = {"data": {"hits": [{"headline": "Velmora - Wiki", "link": {"href": "https://b.test/1"}, "body": "A harbour city."}]}}


@pytest.mark.parametrize(("answer", "fields"), [
    (BING, {}),  # the defaults read Bing's and Brave's shapes as they are
    (BRAVE, {}),
    (CUSTOM, {"results": "data.hits", "title": "headline", "url": "link.href", "text": "body"}),
], ids=["bing-defaults", "brave-defaults", "custom-mapping"])
def test_field_mappings_read_each_api_shape(api, answer, fields):
    api.default = (200, answer)
    (docs,) = retriever(api, web_fields=fields).search(["Velmora"], k=5)
    assert docs == [Doc("https://b.test/1", "Velmora - Wiki", "A harbour city.")]


def test_a_batch_is_answered_in_query_order_with_empty_queries_answered_locally(api):
    web = retriever(api, web_parallel=3)
    results = web.search(["alpha", "", "beta", "gamma", "   ", "delta"], k=1)
    assert [len(docs) for docs in results] == [1, 0, 1, 1, 0, 1]
    assert sorted(r["query"]["q"][0] for r in api.requests) == ["alpha", "beta", "delta", "gamma"]
    assert web.search([], k=1) == [] and web.search([""], k=1) == [[]]
    with pytest.raises(ValueError, match="k must be at least 1"):
        web.search(["alpha"], k=0)


# ---- the key --------------------------------------------------------------------------------------------------------

def test_the_key_is_sent_in_the_configured_header_and_never_shown(api):
    retriever(api).search(["Velmora"], k=1)
    bearer = retriever(api, web_key_header="Authorization: Bearer")
    bearer.search(["Ostrand"], k=1)
    retriever(api, web_key_header="?api_key").search(["Pellinor"], k=1)  # SerpAPI and Google take it in the URL
    assert api.requests[0]["headers"]["X-API-Key"] == KEY
    assert api.requests[1]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert api.requests[2]["query"]["api_key"] == [KEY] and "X-API-Key" not in api.requests[2]["headers"]
    assert KEY not in repr(bearer) and KEY not in str(vars(bearer))


def test_a_missing_key_fails_at_construction_naming_the_variable(api, monkeypatch):
    monkeypatch.delenv("SEARCHRL_SEARCH_API_KEY")
    with pytest.raises(WebSearchKeyError, match=r"\$SEARCHRL_SEARCH_API_KEY"):
        retriever(api)
    monkeypatch.setenv("MY_SEARCH_KEY", "other")
    retriever(api, web_key_env="MY_SEARCH_KEY").search(["Velmora"], k=1)  # another variable, as configured
    assert api.requests[0]["headers"]["X-API-Key"] == "other"
    retriever(api, web_key_env="").search(["Velmora"], k=1)  # an API without a key
    assert "X-API-Key" not in api.requests[1]["headers"]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_raises_naming_the_variable_without_retrying(api, status):
    api.default = (status, {"message": "invalid subscription key"})
    web = retriever(api)
    with pytest.raises(WebSearchKeyError, match=rf"HTTP {status}.*SEARCHRL_SEARCH_API_KEY") as caught:
        web.search(["Velmora"], k=1)
    assert KEY not in str(caught.value) and len(api.requests) == 1


# ---- retries and loud failures --------------------------------------------------------------------------------------

def test_a_503_is_retried_then_answered(api):
    api.replies = [(503, {"error": "busy"}), (429, {"error": "slow down"})]
    web = retriever(api)
    (docs,) = web.search(["Velmora"], k=1)
    assert docs[0].title == "Velmora" and web.requests == len(api.requests) == 3


def test_an_api_that_stays_down_raises_rather_than_answering_nothing():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    web = WebSearchRetriever(f"http://127.0.0.1:{port}/search", rollout=RETRY)
    with pytest.raises(ServiceUnavailableError, match=r"search API at .* failed 3 time\(s\)"):
        web.search(["Velmora"], k=1)


def test_an_api_answering_503_every_time_raises_after_the_retries(api):
    api.default = (503, {"error": "down for maintenance"})
    with pytest.raises(ServiceUnavailableError, match="down for maintenance"):
        retriever(api).search(["Velmora"], k=1)
    assert len(api.requests) == RETRY.retriever_retries + 1


def test_malformed_answers_raise(api):
    api.default = (200, b"<html>not json</html>")
    with pytest.raises(ServiceError, match="non-JSON"):
        retriever(api).search(["Velmora"], k=1)
    api.default = (200, {"hits": HITS})  # JSON, but no result list where the mapping looks
    with pytest.raises(ServiceError, match=r"without a result list .* set web_fields"):
        retriever(api).search(["Velmora"], k=1)
    api.default = (200, {"results": ["just a string"]})
    with pytest.raises(ServiceError, match="not an object"):
        retriever(api).search(["Velmora"], k=1)
    api.default = (400, {"message": "bad count"})
    with pytest.raises(ServiceError, match="HTTP 400: bad count"):
        retriever(api).search(["Velmora"], k=1)


def test_once_the_result_list_was_seen_an_answer_without_one_means_no_results(api):
    web = retriever(api)
    web.search(["Velmora"], k=1)
    api.default = (200, {"query": "zzyzx", "note": "no results"})  # some APIs leave the list out when empty
    assert web.search(["zzyzx"], k=1) == [[]]


# ---- the cache ------------------------------------------------------------------------------------------------------

def test_a_cached_query_sends_no_second_request(api):
    web = retriever(api)
    first = web.search(["Velmora", "Velmora"], k=2)  # the same query twice in a batch is asked once
    again = web.search(["Velmora"], k=2)
    assert first == [again[0], again[0]] and len(api.requests) == 1
    info = web.cache_info()
    assert (info.hits, info.size) == (1, 1)
    web.search(["Velmora"], k=3)  # another k is another entry
    assert len(api.requests) == 2


# ---- long texts -----------------------------------------------------------------------------------------------------

def test_the_default_summariser_keeps_the_sentence_about_the_query():
    kept = keep_relevant_sentences("when was Velmora founded", LONG_PAGE, max_words=16)
    assert kept == FOUNDING
    assert keep_relevant_sentences("Velmora founded", LONG_PAGE, max_words=3) == "Velmora was founded"  # cut to fit


def test_long_result_texts_are_summarised_and_short_ones_left_alone(api):
    api.default = (200, {"results": [{"title": "Velmora", "url": "https://x.test/v", "content": LONG_PAGE},
                                     {"title": "Ostrand", "url": "https://x.test/o", "content": "Short text."}]})
    (docs,) = retriever(api, web_max_words=16).search(["when was Velmora founded"], k=2)
    assert docs[0].text == FOUNDING
    assert docs[1].text == "Short text."


def test_a_pluggable_summariser_gets_the_query_and_the_long_text(api):
    api.default = (200, {"results": [{"title": "Velmora", "url": "https://x.test/v", "content": LONG_PAGE},
                                     {"title": "Ostrand", "url": "https://x.test/o", "content": "Short text."}]})
    calls = []

    def summarise(question: str, text: str) -> str:
        calls.append((question, text))
        return "founded in the ninth century " * 10  # a talkative summariser is still cut to web_max_words

    web = WebSearchRetriever(api.url, rollout=RETRY, web=WebSearchConfig(web_max_words=20), summarizer=summarise)
    (docs,) = web.search(["when was Velmora founded"], k=2)
    assert calls == [("when was Velmora founded", LONG_PAGE)]
    assert len(docs[0].text.split()) == 20 and docs[1].text == "Short text."


def test_the_model_summariser_prompts_the_model_with_the_search_and_the_page(tiny_policy):
    model, tokenizer = tiny_policy
    summarizer = ModelSummarizer(model, tokenizer, max_words=50, max_new_tokens=3)
    prompt = summarizer.prompt("when was Velmora founded", LONG_PAGE)
    request = SUMMARY_INSTRUCTION.format(max_words=50, question="when was Velmora founded", text=LONG_PAGE)
    assert request in prompt and prompt != request  # inside the chat template
    seen = []
    generate = model.generate

    def recording_generate(**inputs):
        seen.append(tokenizer.decode(inputs["input_ids"][0]))
        return generate(**inputs)

    model.generate = recording_generate
    try:
        summary = summarizer("when was Velmora founded", LONG_PAGE)
    finally:
        del model.generate
    assert seen == [prompt] and isinstance(summary, str)
    # the summary is the model's new tokens only: at most 3 of them, none of the page or the instruction
    assert len(tokenizer(summary, add_special_tokens=False)["input_ids"]) <= 3 + 2  # +2: re-tokenising may split
    assert LONG_PAGE[:40] not in summary and FOUNDING not in summary and "helping someone" not in summary


def test_fetched_pages_replace_snippets_and_unreadable_pages_keep_them(api):
    host = api.url.removesuffix("/search")
    html = (f"<html><head><title>t</title><script>var x = 1;</script></head><body><nav>Menu</nav>"
            f"<p>{LONG_PAGE}</p></body></html>").encode()
    api.pages = {"/velmora": (200, "text/html; charset=utf-8", html), "/gone": (404, "text/html", b"gone")}
    api.default = (200, {"results": [{"title": "Velmora", "url": f"{host}/velmora", "content": "snippet one"},
                                     {"title": "Gone", "url": f"{host}/gone", "content": "snippet two"}]})
    web = retriever(api, web_fetch_pages=True, web_max_words=16)
    (docs,) = web.search(["when was Velmora founded"], k=2)
    assert docs[0].text == FOUNDING
    assert docs[1].text == "snippet two"
    assert "var x" not in page_text(html, "text/html") and "Menu" not in page_text(html, "text/html")
    assert page_text(b"caf\xc3\xa9", "text/plain; charset=no-such-charset") == "caf\u00e9"


# ---- by name: registry and RunConfig --------------------------------------------------------------------------------

def test_the_registry_and_run_config_accept_a_web_search_name_and_build_it(api):
    name = "web+" + api.url
    assert RETRIEVERS.problem(name) is None and "web+https://HOST/PATH" in RETRIEVERS.describe()
    cfg = RunConfig.from_params({"retriever": name, "web_key_header": "Authorization: Bearer",
                                 "web_fields": {"text": "content"}, "retriever_retries": 1})
    web = make_retriever(cfg.retriever, [], **service_options(cfg))
    assert isinstance(web, WebSearchRetriever) and web.url == api.url and web.retry.retries == 1
    web.search(["Velmora"], k=1)
    assert api.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(("params", "message"), [
    ({"retriever": "web"}, "needs the search API's address"),
    ({"retriever": "web+ftp://example.test/search"}, "write the search API's address after web+"),
    ({"web_key_evn": "MY_KEY"}, "did you mean 'web_key_env'"),
    ({"web_fields": {"resluts": "data.hits"}}, "did you mean 'results'"),
    ({"web_method": "FETCH"}, "web_method must be GET or POST"),
    ({"web_parallel": 0}, "web_parallel must be >= 1"),
])
def test_run_config_rejects_typos_and_bad_web_settings(params, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_params(params)

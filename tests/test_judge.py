"""The LLM judge (ACC_L): verdict parsing, the setting string, an OpenAI-compatible endpoint played by a local fake
server (verdicts, request shape, retries, errors), the on-disk cache, and a local causal LM as judge."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from searchrl.core.registry import UnknownNameError
from searchrl.judge import (
    EndpointJudge,
    JudgeEndpointError,
    LocalJudge,
    VerdictCache,
    judge_prompt,
    judge_setting_problem,
    make_judge,
    parse_verdict,
    score_records,
)

# ------------------------------------------------------------------------------------------------ verdict parsing


@pytest.mark.parametrize("reply, correct", [
    ("yes", 1), ("Yes.", 1), ("YES", 1), ("**Yes**", 1), ("True", 1), ("correct", 1), ("Correct, it names Paris.", 1),
    ("no", 0), ("No.", 0), ("NO", 0), ("False", 0), ("Incorrect.", 0), ("wrong", 0), ("Not correct.", 0),
    ("Verdict: yes", 1), ("Judgement: False", 0), ("The predicted answer is correct.", 1),
    ("The predicted answer isn't correct.", 0), ("The prediction is not right; the correct answer is Lyon.", 0),
    ("The correct answer is Berlin, so the prediction is wrong.", 0),
    ("<think>Paris is the capital, so it matches... no doubt.</think>Yes", 1),
    ("Yes or no: no", 0),  # an echo of the instruction is not a verdict
    ("I think yes", 1),
])
def test_parse_verdict_reads_common_replies(reply, correct):
    verdict = parse_verdict(reply)
    assert (verdict.correct, verdict.parsed, verdict.raw) == (correct, True, reply)


@pytest.mark.parametrize("reply", ["", None, "Paris", "maybe", "I cannot tell.", "It depends on the year.", "<think>yes"])
def test_parse_verdict_unparseable_scores_zero(reply):
    verdict = parse_verdict(reply)
    assert verdict.correct == 0 and not verdict.parsed


def test_prompt_holds_question_all_golden_answers_and_prediction():
    text = judge_prompt("  Capital of France? ", ["Paris", "City of Paris"], " paris ")
    assert "Question: Capital of France?\n" in text
    assert "Golden answers: Paris | City of Paris\n" in text
    assert "Predicted answer: paris\n" in text
    assert "yes" in text and "no" in text


# ------------------------------------------------------------------------------------------------ setting string


def test_setting_string_picks_backend_model_and_url():
    assert make_judge("none") is None and make_judge("") is None and make_judge(None) is None
    judge = make_judge("openai:gpt-4o-mini@http://127.0.0.1:8000/v1/")
    assert isinstance(judge, EndpointJudge)
    assert (judge.model, judge.url) == ("gpt-4o-mini", "http://127.0.0.1:8000/v1/chat/completions")
    assert judge.name == "openai:gpt-4o-mini"
    # model names may hold ':' and '/'
    judge = make_judge("OpenAI: llama3:8b@https://host/v1/chat/completions", timeout=5)
    assert (judge.model, judge.url, judge.timeout) == ("llama3:8b", "https://host/v1/chat/completions", 5.0)
    assert make_judge(judge) is judge


def test_setting_string_errors_say_what_to_fix(monkeypatch):
    with pytest.raises(UnknownNameError, match="did you mean 'openai'"):
        make_judge("opnai:gpt-4o-mini@http://h/v1")
    with pytest.raises(ValueError, match="names no model"):
        make_judge("openai:@http://h/v1")
    assert judge_setting_problem("openai:m@http://h/v1") is None
    assert judge_setting_problem("local:smollm2-135m-instruct") is None
    assert judge_setting_problem("off") is None
    assert "did you mean 'local'" in judge_setting_problem("locl:x")
    assert "names no model" in judge_setting_problem("openai:")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere:9/v1")
    assert make_judge("openai:m").url == "http://elsewhere:9/v1/chat/completions"


# ------------------------------------------------------------------------------------------------ fake server


class FakeJudgeServer:
    """POST /v1/chat/completions: "Yes" when the prompt's prediction is one of its golden answers, else "No".

    `fail_next` requests answer HTTP `fail_status` first, and so does every request whose prediction is in
    `fail_predictions`; `delay` seconds pass before each answer."""

    def __init__(self):
        self.requests: list[dict] = []
        self.fail_next, self.fail_status, self.delay = 0, 500, 0.0
        self.fail_predictions: set[str] = set()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append({"path": self.path, "body": body,
                                            "auth": self.headers.get("Authorization")})
                    failing = server.fail_next > 0
                    server.fail_next -= failing
                time.sleep(server.delay)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "no such route"})
                prompt = body["messages"][-1]["content"]
                golden = re.search(r"^Golden answers: (.*)$", prompt, re.MULTILINE)[1].split(" | ")
                predicted = re.search(r"^Predicted answer: (.*)$", prompt, re.MULTILINE)[1]
                if failing or predicted in server.fail_predictions:
                    return self._send(server.fail_status, {"error": "try later"})
                reply = "Yes" if predicted in golden else "No"
                self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def judge(self, **options):
        options = {"backoff": 0.01, "timeout": 5.0, **options}
        return EndpointJudge("judge-model", self.base_url, **options)


@pytest.fixture
def server():
    fake = FakeJudgeServer()
    fake.thread.start()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def records():
    return [
        {"question": "Capital of France?", "golden_answers": ["Paris", "City of Paris"], "prediction": "Paris"},
        {"question": "Capital of Italy?", "golden_answers": ["Rome"], "prediction": "Milan"},
        {"question": "Capital of Spain?", "golden_answers": ["Madrid"], "prediction": "  "},  # empty: not asked
        {"question": "Capital of Peru?", "golden_answers": ["Lima"], "prediction": "Lima"},
    ]


def test_endpoint_verdicts_and_request_shape(server, monkeypatch):
    monkeypatch.setenv("SEARCHRL_JUDGE_API_KEY", "sk-test")
    rows = records()
    summary = score_records(rows, server.judge(concurrency=3), progress=False)
    assert [r["judge"] for r in rows] == [1, 0, 0, 1]
    assert [r["judge_raw"] for r in rows] == ["Yes", "No", "", "Yes"]
    assert summary.mean == 0.5 and (summary.n, summary.correct, summary.asked, summary.empty) == (4, 2, 3, 1)
    assert (summary.cached, summary.unparsed, summary.judge) == (0, 0, "openai:judge-model")

    assert len(server.requests) == 3
    seen = sorted(r["body"]["messages"][0]["content"] for r in server.requests)
    assert seen == sorted(judge_prompt(r["question"], r["golden_answers"], r["prediction"])
                          for r in rows if r["prediction"].strip())
    for request in server.requests:
        assert request["path"] == "/v1/chat/completions"
        assert request["auth"] == "Bearer sk-test"
        body = request["body"]
        assert body["model"] == "judge-model" and body["temperature"] == 0
        assert body["max_tokens"] == 32
        assert [m["role"] for m in body["messages"]] == ["user"]


def test_endpoint_keeps_order_under_concurrency(server):
    golden = [[f"a{i}"] for i in range(12)]
    predictions = [f"a{i}" if i % 3 == 0 else "wrong" for i in range(12)]
    verdicts = server.judge(concurrency=4).judge([f"q{i}" for i in range(12)], golden, predictions)
    assert [v.correct for v in verdicts] == [1, 0, 0] * 4


def test_endpoint_retries_a_500_then_succeeds(server):
    server.fail_next = 2
    verdicts = server.judge(max_retries=2).judge(["Capital of Peru?"], [["Lima"]], ["Lima"])
    assert [v.correct for v in verdicts] == [1]
    assert len(server.requests) == 3  # two 500s, then the answer


def test_endpoint_gives_up_after_retries(server):
    server.fail_next, server.fail_status = 10, 503
    with pytest.raises(JudgeEndpointError, match=r"failed 2 times; last error: HTTP 503"):
        server.judge(max_retries=1).judge(["q"], [["a"]], ["a"])
    assert len(server.requests) == 2


def test_endpoint_client_error_is_not_retried_and_says_what_to_fix(server):
    server.fail_next, server.fail_status = 1, 401
    with pytest.raises(JudgeEndpointError, match=r"HTTP 401.*SEARCHRL_JUDGE_API_KEY"):
        server.judge(max_retries=3).judge(["q"], [["a"]], ["a"])
    assert len(server.requests) == 1
    wrong_path = EndpointJudge("m", server.base_url.removesuffix("/v1"), backoff=0.01)
    with pytest.raises(JudgeEndpointError, match=r"HTTP 404.*ends in /v1"):
        wrong_path.judge(["q"], [["a"]], ["a"])


def test_endpoint_timeout_is_retried_then_reported(server):
    server.delay = 0.5
    with pytest.raises(JudgeEndpointError, match="failed 1 times"):
        server.judge(timeout=0.1, max_retries=0).judge(["q"], [["a"]], ["a"])


def test_connection_refused_gives_a_clear_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    judge = EndpointJudge("m", f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01, timeout=2)
    started = time.monotonic()
    with pytest.raises(JudgeEndpointError, match=r"127\.0\.0\.1:\d+/v1/chat/completions failed 2 times.*"
                                                 r"cannot connect.*refused.*Is the server running"):
        judge.judge(["q1", "q2", "q3"], [["a"]] * 3, ["a"] * 3)
    assert time.monotonic() - started < 2  # the first request fails alone; no thread waits on the others


# ------------------------------------------------------------------------------------------------ cache


def test_cache_hit_avoids_a_second_request(server, tmp_path):
    path = tmp_path / "judge_cache.jsonl"
    first = score_records(records(), server.judge(), cache=path, progress=False)
    assert first.asked == 3 and len(server.requests) == 3
    assert len(path.read_text().splitlines()) == 3

    again = records()
    second = score_records(again, server.judge(), cache=path, progress=False)
    assert len(server.requests) == 3  # nothing new was asked
    assert (second.asked, second.cached, second.empty, second.mean) == (0, 3, 1, 0.5)
    assert [r["judge"] for r in again] == [1, 0, 0, 1]

    changed = records()
    changed[1]["prediction"] = "Rome"  # a new prediction is a new key
    third = score_records(changed, server.judge(), cache=path, progress=False)
    assert (third.asked, third.cached, third.mean) == (1, 2, 0.75) and len(server.requests) == 4

    other_model = EndpointJudge("another-model", server.base_url, backoff=0.01)
    assert score_records(records(), other_model, cache=path, progress=False).asked == 3  # verdicts are per judge


def test_cache_survives_a_torn_last_line(server, tmp_path):
    path = tmp_path / "cache.jsonl"
    score_records(records()[:1], server.judge(), cache=path, progress=False)
    with path.open("a") as handle:
        handle.write('{"key": "abc", "ra')  # a crash mid-write
    cache = VerdictCache(path)
    assert (len(cache), cache.skipped_lines) == (1, 1)
    summary = score_records(records(), server.judge(), cache=cache, progress=False)
    assert (summary.cached, summary.asked) == (1, 2)
    reread = VerdictCache(path)
    assert (len(reread), reread.skipped_lines) == (3, 1)


@pytest.mark.parametrize("concurrency, kept", [(1, ["Paris"]), (3, ["Paris", "Lima"])])
def test_replies_a_failed_batch_got_are_cached_before_the_error(server, tmp_path, concurrency, kept):
    """One request of a batch fails after its retries: the replies the batch already got (all the others, when they
    run concurrently; those before it, one at a time) are cached, and a rerun asks only for the rest."""
    path = tmp_path / "cache.jsonl"
    rows = records()
    server.fail_predictions = {"Milan"}  # the second question asked
    with pytest.raises(JudgeEndpointError, match="failed 2 times"):
        score_records(rows, server.judge(max_retries=1, concurrency=concurrency), cache=path, progress=False)
    cached = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(c["prediction"] for c in cached) == sorted(kept)
    assert [rows[0]["judge"], rows[0]["judge_raw"]] == [1, "Yes"]  # the records that got a verdict hold it

    server.fail_predictions, server.requests = set(), []
    summary = score_records(records(), server.judge(), cache=path, progress=False)
    assert (summary.cached, summary.asked, summary.mean) == (len(kept), 3 - len(kept), 0.5)
    assert len(server.requests) == 3 - len(kept)


def test_dataframe_records_get_judge_columns(server):
    frame = pd.DataFrame(records())
    summary = score_records(frame, server.judge(), progress=False)
    assert frame["judge"].tolist() == [1, 0, 0, 1] and frame["judge_parsed"].all()
    assert summary.mean == 0.5


def test_records_missing_fields_are_rejected(server):
    with pytest.raises(KeyError, match="record 0 lacks prediction"):
        score_records([{"question": "q", "golden_answers": ["a"]}], server.judge(), progress=False)
    with pytest.raises(ValueError, match="needs a judge"):
        score_records(records(), "none", progress=False)


# ------------------------------------------------------------------------------------------------ local LM


def test_local_judge_runs_greedily_and_returns_zero_or_one(tiny_policy):
    model, tokenizer = tiny_policy
    judge = LocalJudge(model, tokenizer, name="local:tiny", batch_size=2, max_new_tokens=4)
    rows = records()
    side = tokenizer.padding_side
    summary = score_records(rows, judge, progress=False)
    assert tokenizer.padding_side == side
    assert [r["judge"] in (0, 1) for r in rows] == [True] * 4
    assert all(isinstance(r["judge_raw"], str) for r in rows)
    assert rows[2]["judge"] == 0 and rows[2]["judge_raw"] == ""  # empty prediction, never asked
    assert summary.n == 4 and summary.asked == 3 and summary.unparsed <= 3
    # greedy: the same chats give the same replies
    chats = [[{"role": "user", "content": judge_prompt(r["question"], r["golden_answers"], r["prediction"])}]
             for r in rows]
    replies = judge.complete(chats)
    assert replies == judge.complete(chats)
    # each batched reply is its own chat's: left padding leaves every row continuing where it would alone
    assert replies == LocalJudge(model, tokenizer, name="local:tiny", batch_size=1, max_new_tokens=4).complete(chats)
    # a reply holds only the new tokens, never the prompt, and the verdict is what the reply says
    assert not any(r["question"] in reply for r, reply in zip(rows, replies))
    assert all(r["judge"] == parse_verdict(r["judge_raw"]).correct for r in rows if r["prediction"].strip())


def test_local_setting_loads_a_model_by_name():
    judge = make_judge("local:tiny-random", device="cpu", max_new_tokens=2)
    assert isinstance(judge, LocalJudge) and judge.name == "local:tiny-random" and judge.max_new_tokens == 2
    verdicts = judge.judge(["Capital of Peru?"], [["Lima"]], ["Lima"])
    assert len(verdicts) == 1 and verdicts[0].correct in (0, 1)

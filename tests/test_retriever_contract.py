"""The retriever contract, enforced where the rollout uses it: one result list per query or a clear error, empty
results counted, timeouts and bounded retries, a retriever that stays down stops the run, and an evaluation that
fails keeps what it scored and continues from there."""

from __future__ import annotations

import json
import time

import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.data.schema import make_row
from searchrl.evaluation.evaluate import evaluate
from searchrl.rollout import RetrieverError, RolloutConfig, SearchRollout, summarize

SCRIPT = [["<search>Entity1</search>", "<answer>1901</answer>"]]


class Short(FakeRetriever):
    def search(self, queries, k):
        return super().search(queries, k)[:-1]  # one list too few: zip would silently drop a search


class Empty(FakeRetriever):
    def search(self, queries, k):
        return [[] for _ in queries]


class Slow(FakeRetriever):
    def search(self, queries, k):
        time.sleep(2.0)
        return super().search(queries, k)


class Flaky(FakeRetriever):
    """Fails the first `failures` calls, then answers."""

    def __init__(self, failures: int):
        super().__init__()
        self.failures, self.attempts = failures, 0

    def search(self, queries, k):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError("retrieval service unavailable")
        return super().search(queries, k)


class DownAfterOneCall(FakeRetriever):
    def search(self, queries, k):
        if self.calls:
            raise ConnectionError("went down")
        return super().search(queries, k)


def _rollout(tokenizer, retriever, **cfg):
    cfg = {"retriever_backoff_s": 0.01, **cfg}
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, ScriptedGenerator(tokenizer, SCRIPT),
                           RolloutConfig(**cfg))
    return engine.run([tokenizer("question", add_special_tokens=False)["input_ids"]])


def test_a_short_result_list_is_an_error_not_a_dropped_search(tokenizer):
    with pytest.raises(RetrieverError, match="returned 0 result lists for 1 queries"):
        _rollout(tokenizer, Short())


def test_empty_results_are_counted(tokenizer):
    (traj,) = _rollout(tokenizer, Empty())
    assert traj.num_searches == 1 and traj.empty_results == 1 and traj.doc_ids == [[]]
    assert summarize([traj])["search/empty_results"] == 1.0
    (traj,) = _rollout(tokenizer, FakeRetriever())
    assert traj.empty_results == 0


def test_a_hung_retriever_times_out_and_stops_the_run(tokenizer):
    started = time.perf_counter()
    with pytest.raises(RetrieverError, match="failed 2 times in a row.*TimeoutError"):
        _rollout(tokenizer, Slow(), retriever_timeout_s=0.2, retriever_retries=1)
    assert time.perf_counter() - started < 1.5  # did not wait for the hung calls


def test_failures_are_retried_with_backoff_then_raised(tokenizer):
    flaky = Flaky(failures=2)
    (traj,) = _rollout(tokenizer, flaky, retriever_retries=2)
    assert flaky.attempts == 3 and traj.num_searches == 1 and traj.doc_ids == [["1", "0", "2"]]
    down = Flaky(failures=100)
    with pytest.raises(RetrieverError, match="failed 3 times in a row.*ConnectionError: retrieval service"):
        _rollout(tokenizer, down, retriever_retries=2)
    assert down.attempts == 3


def test_a_failed_evaluation_keeps_its_records_and_a_rerun_continues(tokenizer, tmp_path):
    rows = [make_row(f"q{i}", f"When was Entity{i} founded?", [str(1900 + i)]) for i in range(4)]
    scripts = [[f"<search>Entity{i}</search>", f"<answer>{1900 + i}</answer>"] for i in range(4)]
    path = tmp_path / "records.jsonl"
    cfg = RolloutConfig(max_completion_tokens=512, retriever_retries=0)
    with pytest.raises(RetrieverError):  # the first batch's search succeeds, the second batch's fails
        evaluate(None, tokenizer, MiniProtocol(), DownAfterOneCall(), rows, generator=ScriptedGenerator(tokenizer, scripts),
                 rollout=cfg, batch_size=2, progress=False, records_path=path)
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["q0", "q1"]
    rerun = ScriptedGenerator(tokenizer, scripts[2:])
    result = evaluate(None, tokenizer, MiniProtocol(), FakeRetriever(), rows, generator=rerun, rollout=cfg,
                      batch_size=2, progress=False, records_path=path, resume=True)
    assert list(result.records["id"]) == ["q0", "q1", "q2", "q3"] and result.config["resumed_questions"] == 2
    assert list(result.records["em"]) == [1.0] * 4
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["q0", "q1", "q2", "q3"]


def test_an_evaluation_never_rides_out_an_outage_whatever_the_run_allows(tokenizer):
    # retriever_outage_s lets training rollouts answer a failed search with a notice; scored questions must not be.
    rows = [make_row(f"q{i}", f"When was Entity{i} founded?", [str(1900 + i)]) for i in range(4)]
    scripts = [[f"<search>Entity{i}</search>", f"<answer>{1900 + i}</answer>"] for i in range(4)]
    cfg = RolloutConfig(max_completion_tokens=512, retriever_retries=0, retriever_outage_s=600)
    with pytest.raises(RetrieverError, match=r"retriever_outage_s=0\)"):
        evaluate(None, tokenizer, MiniProtocol(), DownAfterOneCall(), rows, generator=ScriptedGenerator(tokenizer, scripts),
                 rollout=cfg, batch_size=2, progress=False)

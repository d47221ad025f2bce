"""Retrieval service faults: a run waits for a service that starts late (and fails clearly, in time, when none
comes), and a mid-run outage is ridden out within retriever_outage_s, its failed searches counted, then stops the
run loudly with its checkpoints kept for a resume.

Every server runs in this process on a free loopback port; nothing leaves the machine.
"""

from __future__ import annotations

import threading
import time

import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.config import ConfigError, RunConfig
from searchrl.config.service import ServiceConfig
from searchrl.data.schema import Doc
from searchrl.data.synthetic import make_world
from searchrl.retrieval import BM25Retriever
from searchrl.retrieval.http import HTTPRetriever, ServiceError, ServiceUnavailableError
from searchrl.retrieval.serve import ServiceThread, bind, create_app
from searchrl.rollout import RolloutConfig, SearchRollout, summarize
from searchrl.rollout.engine import SEARCH_FAILED_NOTICE, RetrieverDownError
from searchrl.runs.checkpoints import last_complete_checkpoint
from searchrl.runs.folder import RUN_DIR_ENV

CORPUS = [Doc(id=f"p{i}", title=f"Entity{i}", text=f"Entity{i} was founded in {1900 + i}.") for i in range(6)]
QUICK = RolloutConfig(retriever_timeout_s=2.0, retriever_retries=0, retriever_backoff_s=0.01)


class DownForCalls(FakeRetriever):
    """Answers (as `inner`, else as FakeRetriever), except calls number `first` to `last` (counting from 1), which
    fail as a dead service does, each after `delay_s`."""

    def __init__(self, first: int, last: float, inner=None, delay_s: float = 0.0):
        super().__init__()
        self.first, self.last, self.inner, self.delay_s = first, last, inner, delay_s
        self.attempts = self.failed_queries = 0

    def search(self, queries, k):
        self.attempts += 1
        if self.first <= self.attempts <= self.last:
            time.sleep(self.delay_s)
            self.failed_queries += len(queries)
            raise ConnectionError("retrieval service unavailable")
        return (self.inner or super()).search(queries, k)

    def __len__(self):
        return len(self.inner) if self.inner is not None else super().__len__()


# ---- at start: wait for the service, or fail clearly within the bound ----------------------------------------------

def test_a_late_service_is_waited_for_with_a_clear_message_then_searched():
    running = ServiceThread(create_app(BM25Retriever(CORPUS, show_progress=False)), bind())
    starter = threading.Timer(1.2, running.start)
    starter.start()
    said: list[str] = []
    try:
        remote = HTTPRetriever(running.url, rollout=QUICK, corpus=CORPUS)
        waited = remote.wait_until_up(20, say=said.append, every_s=0.5)
        assert 1.0 < waited < 10
        port = running.url.rsplit(":", 1)[1]
        assert said[0].startswith(f"waiting for the retrieval service at {running.url} (0s of 20s, service_wait_s; "
                                  "last: ConnectionRefusedError")
        assert said[0].endswith(f"start it with `python -m searchrl.retrieval.serve --index DIR --port {port}`")
        assert len(said) >= 3 and said[-1].startswith(f"the retrieval service at {running.url} is up after")
        assert [[d.id for d in docs] for docs in remote.search(["Entity4 founded"], 1)] == [["p4"]]
    finally:
        starter.join()
        running.stop()


def test_a_service_that_never_comes_is_a_clear_error_within_the_bound():
    sock = bind()  # reserved, refusing connections: nothing will ever listen
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        said: list[str] = []
        started = time.perf_counter()
        with pytest.raises(ServiceUnavailableError, match=r"did not answer within service_wait_s=1.5 s .*"
                           r"ConnectionRefusedError.*start it with `python -m searchrl.retrieval.serve --index DIR "
                           r"--port \d+`.*or raise service_wait_s"):
            HTTPRetriever(url, rollout=QUICK).wait_until_up(1.5, say=said.append, every_s=0.5)
        assert 1.5 <= time.perf_counter() - started < 3.0
        assert said and all(line.startswith(f"waiting for the retrieval service at {url}") for line in said)
    finally:
        sock.close()


def test_a_service_over_another_corpus_is_refused_at_once_not_waited_for():
    with ServiceThread(create_app(BM25Retriever(CORPUS[:3], show_progress=False))) as running:
        started = time.perf_counter()
        with pytest.raises(ServiceError, match="serves a different corpus"):
            HTTPRetriever(running.url, rollout=QUICK, corpus=CORPUS).wait_until_up(30, say=lambda line: None)
        assert time.perf_counter() - started < 2


def test_a_run_waits_for_its_service_before_any_search(tmp_path, monkeypatch, capsys):
    from searchrl.experiments.experiment import Experiment

    params = {"model": "tiny-random", "world_entities": 40, "n_train": 4, "n_eval": 2, "rl_steps": 0,
              "sft_examples": 0, "world_passage_words": 20, "output_root": str(tmp_path), "service_wait_s": 20}
    world = make_world(seed=0, n_entities=40, words_per_passage=20, knowledge=RunConfig.from_params(params))
    running = ServiceThread(create_app(BM25Retriever(world.corpus, show_progress=False)), bind())
    starter = threading.Timer(1.0, running.start)
    starter.start()
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    try:
        exp = Experiment(RunConfig.from_params({**params, "retriever": running.url}), notebook="t")
        assert exp.retriever.health()["passages"] == len(world.corpus)
    finally:
        starter.join()
        running.stop()
    out = capsys.readouterr().out
    assert f"waiting for the retrieval service at {running.url}" in out and "is up after" in out


# ---- mid-run: failed searches counted, the rollouts go on, a long outage stops the run -----------------------------

def _rollouts(tokenizer, retriever, batches: int, **cfg) -> tuple[SearchRollout, list]:
    """`batches` one-question rollouts on one engine (as a trainer's steps share one), each searching once."""
    script = [["<search>Entity1</search>", "<answer>1901</answer>"]] * batches
    config = RolloutConfig(**{"retriever_backoff_s": 0.01, "retriever_retries": 1, **cfg})
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, ScriptedGenerator(tokenizer, script), config)
    prompt = tokenizer("question", add_special_tokens=False)["input_ids"]
    return engine, [engine.run([prompt])[0] for _ in range(batches)]


def test_failed_searches_are_counted_and_the_rollouts_go_on(tokenizer, capsys):
    flaky = DownForCalls(first=2, last=5)  # with one retry: batches 2 and 3 fail twice each, batch 4 answers
    engine, trajs = _rollouts(tokenizer, flaky, batches=5, retriever_outage_s=30)
    assert [t.failed_searches for t in trajs] == [0, 1, 1, 0, 0]
    assert [t.doc_ids for t in trajs] == [[["1", "0", "2"]], [[]], [[]], [["1", "0", "2"]], [["1", "0", "2"]]]
    assert all(t.num_searches == 1 and t.empty_results == 0 for t in trajs)
    # the rollout went on after the notice: each one still reached its answer turn
    assert all(tokenizer.decode(t.completion_ids).count("<answer>1901</answer>") == 1 for t in trajs)
    assert engine.failed_searches == 2 and flaky.attempts == 7
    failed = trajs[1]
    observation = tokenizer.decode([i for i, m in zip(failed.completion_ids, failed.env_mask) if m == 0])
    assert SEARCH_FAILED_NOTICE in observation  # masked out of the loss, and not posing as an empty result
    assert summarize(trajs)["search/failed_searches"] == pytest.approx(2 / 5)
    assert summarize(trajs[3:])["search/failed_searches"] == 0.0
    assert "retriever down for" in capsys.readouterr().err


def test_an_outage_past_retriever_outage_s_stops_the_run_loudly(tokenizer, capsys):
    # down from the second call on, each failure taking 0.2 s: a failed batch (two attempts) lasts about 0.4 s
    down = DownForCalls(first=2, last=float("inf"), delay_s=0.2)
    with pytest.raises(RetrieverDownError, match=r"failed 2 times in a row.*answered nothing for \d+\.\d s "
                       r"\(retriever_outage_s=1\).*retriever_outage_s"):
        _rollouts(tokenizer, down, batches=8, retriever_outage_s=1.0)
    assert 5 <= down.attempts <= 7  # batches 2 (and 3) were ridden out, then the outage outlasted the bound
    assert "retriever down for" in capsys.readouterr().err


def test_without_retriever_outage_s_the_first_failed_batch_stops_the_run(tokenizer):
    with pytest.raises(RetrieverDownError, match=r"retriever_outage_s=0\)"):
        _rollouts(tokenizer, DownForCalls(first=2, last=3), batches=3)


def test_a_contract_breach_is_never_ridden_out(tokenizer):
    class Short(FakeRetriever):
        def search(self, queries, k):
            return []

    from searchrl.rollout import RetrieverError

    with pytest.raises(RetrieverError, match="returned 0 result lists") as caught:
        _rollouts(tokenizer, Short(), batches=1, retriever_outage_s=30)
    assert not isinstance(caught.value, RetrieverDownError)


def test_the_client_checks_the_corpus_again_after_an_outage():
    bm25 = BM25Retriever(CORPUS, show_progress=False)
    sock = bind()
    port = sock.getsockname()[1]
    with ServiceThread(create_app(bm25), sock) as running:
        remote = HTTPRetriever(running.url, rollout=QUICK, corpus=CORPUS)
        remote.search(["Entity2"], 1)
    with pytest.raises(ServiceUnavailableError):
        remote.search(["Entity3"], 1)  # down: no answer, and the next contact checks /health again
    other = ServiceThread(create_app(BM25Retriever(CORPUS[:4], show_progress=False)), bind(port=port))
    with other, pytest.raises(ServiceError, match="serves a different corpus"):
        remote.search(["Entity3"], 1)  # the same address, restarted over another index


# ---- training: the outage is logged per step and in the history; past the bound, checkpoints stay ------------------
# Marked slow: they train the tiny-searcher model (a policy that searches), built in about a minute when not cached;
# once cached each takes seconds.

def _training(tmp_path, monkeypatch, **changes):
    from searchrl.experiments.experiment import Experiment

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    params = {"model": "tiny-searcher", "world_entities": 40, "n_train": 8, "n_eval": 2, "sft_examples": 0,
              "prompts_per_step": 1, "num_generations": 2, "max_searches": 1, "max_completion_tokens": 96,
              "save_steps": 1, "output_root": str(tmp_path), "retriever_retries": 0, "retriever_backoff_s": 0.01,
              **changes}
    return Experiment(RunConfig.from_params(params), notebook="t")


@pytest.mark.slow
def test_training_rides_out_an_outage_and_logs_its_failed_searches(tmp_path, monkeypatch):
    exp = _training(tmp_path, monkeypatch, rl_steps=5, retriever_outage_s=60)
    exp.retriever = flaky = DownForCalls(first=2, last=3, inner=exp.retriever)
    exp.train_rl(exp.load_model())
    history = exp.history.to_frame()
    steps = history.dropna(subset=["search/failed_searches"])
    assert steps["step"].tolist() == [1, 2, 3, 4, 5]  # training continued through the outage
    samples = exp.cfg.prompts_per_step * exp.cfg.num_generations
    assert flaky.failed_queries > 0 and (steps["search/failed_searches"] * samples).sum() == flaky.failed_queries


@pytest.mark.slow
def test_an_outage_past_the_bound_stops_training_and_keeps_checkpoints_to_resume(tmp_path, monkeypatch):
    exp = _training(tmp_path, monkeypatch, rl_steps=4)
    healthy = exp.retriever
    exp.retriever = DownForCalls(first=3, last=float("inf"), inner=healthy)
    with pytest.raises(RetrieverDownError, match="retriever_outage_s=0"):
        exp.train_rl(exp.load_model())
    checkpoint, _ = last_complete_checkpoint(exp.run_dir / "checkpoints" / "rl")
    assert checkpoint is not None
    again = _training(tmp_path, monkeypatch, rl_steps=4, resume=True)
    again.train_rl(again.load_model())
    assert again.history.to_frame()["step"].dropna().astype(int).max() == 4


# ---- the settings -------------------------------------------------------------------------------------------------

def test_the_wait_and_outage_settings_are_declared_once_and_checked():
    assert RunConfig().service_wait_s == ServiceConfig().service_wait_s > 0
    assert RunConfig().retriever_outage_s == RolloutConfig().retriever_outage_s == 0
    assert RunConfig(retriever_outage_s=30).rollout_config().retriever_outage_s == 30
    with pytest.raises(ValueError, match="service_wait_s must be >= 0"):
        ServiceConfig(service_wait_s=-1)
    with pytest.raises(ValueError, match="service_wait_s must be a number of seconds"):
        ServiceConfig(service_wait_s="soon")
    with pytest.raises(ValueError, match="retriever_outage_s must be >= 0"):
        RolloutConfig(retriever_outage_s=-5)
    with pytest.raises(ConfigError, match="service_wait_s"):
        RunConfig.from_params({"service_wait_s": -1})

"""Recorded and replayed retrieval: every run records its searches, `retriever: replay:<run folder>` answers them
again without the index, a search the record lacks fails loudly (or falls through to a live retriever), and a rerun
from a replay reproduces the run's trajectories token for token."""

from __future__ import annotations

import json

import pytest
import torch

from fakes import MiniProtocol, ScriptedGenerator
from searchrl.config import ConfigError, RolloutConfig, RunConfig
from searchrl.config.replay import DOCUMENTS_FILE, RECORD_FOLDER, SEARCHES_FILE
from searchrl.data.schema import Doc
from searchrl.retrieval import make_retriever
from searchrl.retrieval.bm25 import BM25Retriever
from searchrl.retrieval.recording import RecordingRetriever
from searchrl.retrieval.replay import ReplayMissError, ReplayRetriever
from searchrl.retrieval.service import corpus_fingerprint, service_options
from searchrl.rollout import SearchRollout
from searchrl.runs.folder import RUN_DIR_ENV

CORPUS = [Doc(f"p{i}", f"Entity{i}", f"Entity{i} was founded in {1900 + i} by Founder{i}.") for i in range(8)]
QUERIES = ["Entity1 founded", "Founder3", "when was Entity5 founded", "Entity1 founded"]


class Versions:
    """A web search stand-in: the same URL comes back with a text that depends on the call (a changing page)."""

    def __init__(self):
        self.calls = 0

    def search(self, queries, k):
        self.calls += 1
        return [[Doc("https://x.example/a", "A", f"version {self.calls} for {q}")] for q in queries]

    def __len__(self):
        return 1


class Scored:
    """A service client stand-in: answers with scores (`search_scored`), as the HTTP and Search-R1 clients do."""

    def search_scored(self, queries, k):
        return [[(doc, 10.0 - rank) for rank, doc in enumerate(CORPUS[:k])] for _ in queries]

    def search(self, queries, k):
        return [[doc for doc, _ in docs] for docs in self.search_scored(queries, k)]

    def __len__(self):
        return len(CORPUS)


def _record(tmp_path, inner, batches, k=2):
    recorder = RecordingRetriever(inner, tmp_path / "run" / RECORD_FOLDER, corpus=CORPUS)
    return recorder, [recorder.search(batch, k) for batch in batches]


def test_a_replay_answers_every_recorded_search_as_the_retriever_did(tmp_path):
    bm25 = BM25Retriever(CORPUS, show_progress=False)
    recorder, answers = _record(tmp_path, bm25, [QUERIES[:2], QUERIES[2:]])
    assert answers == [bm25.search(QUERIES[:2], 2), bm25.search(QUERIES[2:], 2)]  # recording changes nothing
    assert repr(recorder) == repr(bm25) and len(recorder) == len(CORPUS)
    folder = tmp_path / "run" / RECORD_FOLDER
    lines = [json.loads(line) for line in (folder / SEARCHES_FILE).read_text().splitlines()]
    assert [line["query"] for line in lines] == QUERIES and {line["top_k"] for line in lines} == {2}
    assert {line["corpus"] for line in lines} == {corpus_fingerprint(CORPUS)}
    stored = [json.loads(line)["ref"] for line in (folder / DOCUMENTS_FILE).read_text().splitlines()]
    assert len(stored) == len(set(stored))  # each document's text stored once, however often it came back

    replay = make_retriever(f"replay:{tmp_path / 'run'}", [])  # no corpus, no index
    assert isinstance(replay, ReplayRetriever)
    assert replay.search(QUERIES[:2], 2) == answers[0] and replay.search(QUERIES[2:], 2) == answers[1]
    assert replay.corpus_fingerprint == replay.fingerprint == corpus_fingerprint(CORPUS)
    assert replay.corpus_fingerprint in repr(replay)  # an evaluation's settings name the corpus replayed
    assert RecordingRetriever(replay, tmp_path / "rerun").corpus_fingerprint == corpus_fingerprint(CORPUS)


def test_a_search_the_record_lacks_fails_loudly_and_is_never_retried(tmp_path, tokenizer):
    _record(tmp_path, BM25Retriever(CORPUS, show_progress=False), [QUERIES])
    replay = ReplayRetriever(tmp_path / "run")
    with pytest.raises(ReplayMissError) as missed:
        replay.search(["Entity7 founded"], 2)
    message = str(missed.value)
    assert "'Entity7 founded'" in message and str(tmp_path / "run" / RECORD_FOLDER) in message
    assert "replay_fallback" in message and "params.yaml" in message
    with pytest.raises(ReplayMissError, match="recorded with top_k 2"):
        replay.search(["Founder3"], 3)  # recorded, but for another top_k
    # In a rollout: raised at once, not retried, and not answered "search failed" within an outage allowance.
    rollout = RolloutConfig(top_k=2, max_searches=1, max_completion_tokens=64, retriever_retries=3,
                            retriever_backoff_s=5.0, retriever_outage_s=600.0)
    generator = ScriptedGenerator(tokenizer, [["<search>Entity7 founded</search>", "<answer>1907</answer>"]])
    engine = SearchRollout(MiniProtocol(), replay, tokenizer, generator, rollout)
    with pytest.raises(ReplayMissError, match="Entity7 founded"):
        engine.run([tokenizer("Question: when?", add_special_tokens=False)["input_ids"]])
    assert engine.retrieval_s < 1.0  # no backoff waited


def test_a_miss_falls_through_to_the_live_retriever_and_is_recorded(tmp_path):
    bm25 = BM25Retriever(CORPUS, show_progress=False)
    _record(tmp_path, bm25, [QUERIES[:1]])
    options = service_options(RunConfig(retriever=f"replay:{tmp_path / 'run'}", replay_fallback="bm25"))
    assert options == {"fallback": "bm25", "fallback_options": {}}
    replay = make_retriever(f"replay:{tmp_path / 'run'}", CORPUS, **options)
    again = RecordingRetriever(replay, tmp_path / "rerun" / RECORD_FOLDER, corpus=CORPUS)
    assert again.search(["Entity1 founded", "Entity6"], 2) == bm25.search(["Entity1 founded", "Entity6"], 2)
    assert replay.misses == 1
    lines = [json.loads(line) for line in (tmp_path / "rerun" / RECORD_FOLDER / SEARCHES_FILE).read_text().splitlines()]
    assert [line["query"] for line in lines] == ["Entity1 founded", "Entity6"]
    assert ReplayRetriever(tmp_path / "rerun").search(["Entity6"], 2) == bm25.search(["Entity6"], 2)


def test_scores_are_recorded_and_replayed_where_the_retriever_gives_them(tmp_path):
    _record(tmp_path, Scored(), [["q"]])
    line = json.loads((tmp_path / "run" / RECORD_FOLDER / SEARCHES_FILE).read_text())
    assert line["scores"] == [10.0, 9.0] and line["ids"] == ["p0", "p1"]
    assert ReplayRetriever(tmp_path / "run").search_scored(["q"], 2) == Scored().search_scored(["q"], 2)


def test_a_query_recorded_with_changing_answers_is_replayed_in_recorded_order(tmp_path):
    web = Versions()
    _, answers = _record(tmp_path, web, [["a"], ["a"], ["b"]], k=1)
    texts = [json.loads(line)["text"] for line in
             (tmp_path / "run" / RECORD_FOLDER / DOCUMENTS_FILE).read_text().splitlines()]
    assert texts == ["version 1 for a", "version 2 for a", "version 3 for b"]  # one id, three texts, all kept
    replay = ReplayRetriever(tmp_path / "run")
    assert replay.search(["a"], 1) == answers[0] and replay.search(["a"], 1) == answers[1]
    assert replay.search(["a"], 1) == answers[1]  # past the record's answers: the last one again
    assert replay.search(["b"], 1) == answers[2]


def test_retrievers_and_processes_sharing_a_record_keep_their_documents_apart(tmp_path):
    other = [Doc(doc.id, doc.title, "another text of " + doc.id) for doc in CORPUS]  # the same ids, other passages
    folder = tmp_path / "run" / RECORD_FOLDER
    ours = RecordingRetriever(BM25Retriever(CORPUS, show_progress=False), folder, corpus=CORPUS)
    theirs = RecordingRetriever(BM25Retriever(other, show_progress=False), folder, corpus=other)  # a 2nd benchmark
    second = RecordingRetriever(BM25Retriever(other, show_progress=False), folder, corpus=other, process=1)
    first_answer, other_answer = ours.search(["Entity2"], 1), theirs.search(["Entity3"], 1)
    rank_answer = second.search(["Entity2"], 1)
    assert first_answer[0][0].id == rank_answer[0][0].id and first_answer != rank_answer
    assert (folder / "searches.rank1.jsonl").is_file()
    assert ReplayRetriever(folder).search(["Entity2", "Entity3"], 1) == first_answer + other_answer
    assert ReplayRetriever(folder, process=1).search(["Entity2"], 1) == rank_answer  # its own record first
    assert ReplayRetriever(folder).corpus_fingerprints == [corpus_fingerprint(CORPUS), corpus_fingerprint(other)]


def test_a_killed_run_keeps_its_record_and_a_resumed_one_appends(tmp_path):
    bm25 = BM25Retriever(CORPUS, show_progress=False)
    _record(tmp_path, bm25, [QUERIES[:2]])
    searches = tmp_path / "run" / RECORD_FOLDER / SEARCHES_FILE
    with open(searches, "a", encoding="utf-8") as handle:
        handle.write('{"query": "Entity4", "top_k"')  # killed mid-line
    assert ReplayRetriever(tmp_path / "run").searches == 2
    documents = tmp_path / "run" / RECORD_FOLDER / DOCUMENTS_FILE
    with open(documents, "a", encoding="utf-8") as handle:
        handle.write('{"ref": "p9", "id": "p9", "ti')  # and the other file too
    _record(tmp_path, bm25, [QUERIES[2:3]])  # the resumed run: its lines start after the torn ones
    replay = ReplayRetriever(tmp_path / "run")
    assert replay.searches == 3 and replay.search(QUERIES[2:3], 2) == bm25.search(QUERIES[2:3], 2)


def test_the_schema_checks_replay_names_before_anything_runs(tmp_path):
    run = tmp_path / "run"
    _record(tmp_path, BM25Retriever(CORPUS, show_progress=False), [QUERIES])
    assert RunConfig(retriever=f"replay:{run}", replay_fallback="BM25").replay_fallback == "BM25"
    with pytest.raises(ConfigError, match="holds no recorded searches"):
        RunConfig(retriever=f"replay:{tmp_path}")
    with pytest.raises(ConfigError, match="no folder"):
        RunConfig(retriever=f"replay:{tmp_path / 'nowhere'}")
    with pytest.raises(ConfigError, match="is no replay"):
        RunConfig(replay_fallback="bm25")
    with pytest.raises(ConfigError, match="bm25"):
        RunConfig(retriever=f"replay:{run}", replay_fallback="bm52")
    with pytest.raises(ConfigError, match="is a replay"):
        RunConfig(retriever=f"replay:{run}", replay_fallback=f"replay:{run}")


# ---- a run and its rerun from the replay, on the tiny searching model ------------------------------------------------
# Marked slow: tiny-searcher (the tiny model taught to search) is built in about a minute when not cached; once
# cached the test takes about 15 s.

SMALL_RUN = {"model": "tiny-searcher", "world_entities": 40, "n_train": 4, "n_eval": 4, "eval_batch_size": 4,
             "sft_examples": 0, "rl_steps": 0, "max_searches": 2, "max_completion_tokens": 96, "top_k": 2}


def _run(tmp_path, monkeypatch, name, **changes):
    from searchrl.experiments.experiment import Experiment

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / name))
    return Experiment(RunConfig.from_params({**SMALL_RUN, "output_root": str(tmp_path), **changes}), notebook="t")


@pytest.mark.slow
def test_a_rerun_from_the_replay_reproduces_the_runs_trajectories_token_for_token(tmp_path, monkeypatch):
    from searchrl.rollout.loop import rollout_questions

    first = _run(tmp_path, monkeypatch, "first")
    model = first.load_model()
    first.evaluate(model, "untrained")
    trajectories = (first.run_dir / "trajectories" / "untrained.jsonl").read_text()
    assert sum(json.loads(line)["searches"] for line in trajectories.splitlines()) > 0  # the run did search

    def sampled(exp):  # seeded sampling, token ids and masks
        torch.manual_seed(7)
        rows = exp.eval_rows
        runs = rollout_questions(model, exp.tokenizer, exp.protocol, exp.retriever, rows, exp.cfg.rollout_config(),
                                 greedy=False, batch_size=4, progress=False)
        return [(t.completion_ids, t.env_mask, t.queries, t.doc_ids) for _, _, trajs in runs for t in trajs]

    first_sampled = sampled(first)
    # The rerun: the same settings, its searches answered from the first run's record (no index built).
    rerun = _run(tmp_path, monkeypatch, "rerun", retriever=f"replay:{first.run_dir}")
    assert isinstance(rerun.retriever.inner, ReplayRetriever)
    rerun.evaluate(model, "untrained")
    assert (rerun.run_dir / "trajectories" / "untrained.jsonl").read_text() == trajectories
    assert sampled(rerun) == first_sampled
    assert rerun.retriever.inner.misses == 0
    recorded = (first.run_dir / RECORD_FOLDER / SEARCHES_FILE).read_text()
    assert (rerun.run_dir / RECORD_FOLDER / SEARCHES_FILE).read_text() == recorded  # the rerun's record: the same

    # A rerun that asks what the record lacks (another search budget) stops, naming the query.
    other = _run(tmp_path, monkeypatch, "other", retriever=f"replay:{first.run_dir}", top_k=1)
    with pytest.raises(ReplayMissError, match="has no search for"):
        other.evaluate(model, "untrained")

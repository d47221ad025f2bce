"""Evaluation benchmarks by name: question rows, corpora, subsampling, custom files, errors, answer coverage."""

from __future__ import annotations

import json

import pytest

from searchrl.core.registry import UnknownNameError
from searchrl.data.benchmarks import (
    BENCHMARK_CORPORA,
    BENCHMARKS,
    BenchmarkSpec,
    answer_in_corpus,
    answer_in_corpus_rate,
    load_benchmark,
    subsample,
)
from searchrl.data.schema import Doc, make_row

# name -> (questions, corpus passages); the pools are measured once (see the module docstring's table)
REAL = {
    "hotpotqa": (500, 10_787),
    "nq": (1000, 25_159),
    "triviaqa": (1000, 25_159),
    "popqa": (1000, 25_159),
    "bamboogle": (125, 14_372),
    "r1s_hotpotqa": (500, 14_372),
    "r1s_2wiki": (500, 14_372),
    "r1s_musique": (500, 14_372),
    "r1s_bamboogle": (125, 14_372),
}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def custom_files(tmp_path):
    questions = write_jsonl(tmp_path / "qa.jsonl", [
        {"id": f"q{i}", "question": f"Where is place {i}?", "golden_answers": [f"Town {i}"]} for i in range(10)
    ])
    corpus = write_jsonl(tmp_path / "passages.jsonl", [
        {"id": "d0", "title": "Place 0", "text": "Place 0 lies in Town 0."},
        {"id": "d1", "title": "Place 1", "text": "Place 1 is a hill far from any town."},
    ])
    return questions, corpus


# ---- the registry -----------------------------------------------------------------------------------------------


def test_registry_lists_the_papers_benchmarks():
    assert BENCHMARKS.names() == sorted([*REAL, "custom"])
    assert BENCHMARK_CORPORA.names() == ["hotpotqa_pool", "none", "offline_union", "r1_traces"]
    assert BENCHMARKS.get("R1S-2Wiki").name == "r1s_2wiki"  # the spellings people write
    assert {BENCHMARKS.get(n).hops for n in ("nq", "triviaqa", "popqa")} == {"single"}
    assert "R-Search" in BENCHMARKS.get("popqa").papers and "R1-Searcher" not in BENCHMARKS.get("popqa").papers


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown benchmark 'hotpot_qa' \(did you mean 'hotpotqa'\?\); "
                                               r"known: bamboogle, custom, hotpotqa, nq, popqa, r1s_2wiki"):
        load_benchmark("hotpot_qa")


def test_bad_options_say_what_to_fix(custom_files, tmp_path):
    questions, corpus = custom_files
    with pytest.raises(ValueError, match="custom' needs questions="):
        load_benchmark("custom", corpus=corpus)
    with pytest.raises(ValueError, match="has no default corpus: pass corpus="):
        load_benchmark("custom", questions=questions)
    with pytest.raises(ValueError, match="questions= is for 'custom' only"):
        load_benchmark("nq", questions=questions, data_dir=tmp_path)
    with pytest.raises(ValueError, match="limit must be a non-negative integer"):
        load_benchmark("custom", questions=questions, corpus="none", limit=-1)
    with pytest.raises(FileNotFoundError, match="no passage file at .*missing.jsonl"):
        load_benchmark("custom", questions=questions, corpus=tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="known corpora: hotpotqa_pool, none, offline_union, r1_traces"):
        load_benchmark("custom", questions=questions, corpus="wikipedia")


def test_a_missing_file_is_named_with_the_folder_it_was_expected_in(tmp_path):
    with pytest.raises(FileNotFoundError, match="'nq' needs flashrag-subsamples/nq_test_1k.jsonl inside the data "
                                                f"folder {tmp_path}"):
        load_benchmark("nq", data_dir=tmp_path)
    (tmp_path / "r1-searcher" / "eval_set").mkdir(parents=True)
    write_jsonl(tmp_path / "r1-searcher/eval_set/musique_500.jsonl", [{"idx": 1, "question": "Q?", "answer": "A"}])
    # the questions are there; the corpus's first trace file is not
    with pytest.raises(FileNotFoundError, match="'r1_traces' needs r1-searcher/traces/2wiki_qwen.jsonl"):
        load_benchmark("r1s_musique", data_dir=tmp_path)
    assert len(load_benchmark("r1s_musique", data_dir=tmp_path, corpus="none").rows) == 1


# ---- custom files and user specs ------------------------------------------------------------------------------


def test_custom_reads_any_question_file_and_corpus(custom_files):
    questions, corpus = custom_files
    bench = load_benchmark("custom", questions=questions, corpus=corpus)
    assert [r["id"] for r in bench.rows] == [f"q{i}" for i in range(10)]
    assert {r["metadata"]["benchmark"] for r in bench.rows} == {"custom"}
    assert [d.id for d in bench.corpus] == ["d0", "d1"]
    assert bench.corpus_source == str(corpus)
    # only q0's answer "Town 0" is in a passage ("town" alone, in d1, is not "Town 1")
    assert bench.answer_in_corpus_rate() == pytest.approx(0.1)
    assert bench.summary(coverage=True) == {
        "benchmark": "custom", "hops": "any", "papers": "", "questions": 10, "available_questions": 10,
        "corpus": str(corpus), "corpus_passages": 2, "answer_in_corpus": pytest.approx(0.1)}
    without = load_benchmark("custom", questions=questions, corpus="none")
    assert without.corpus is None and without.answer_in_corpus_rate() is None
    assert without.summary()["corpus_passages"] == 0


def test_a_user_spec_reads_from_the_data_folder_it_is_given(tmp_path):
    (tmp_path / "mine").mkdir()
    write_jsonl(tmp_path / "mine/qa.jsonl", [{"question": "Who?", "answer": "Ann"}, {"question": "What?", "answer": "X"}])
    spec = BenchmarkSpec("mine", "mine/qa.jsonl", "none", "single", expected_questions=2)
    bench = load_benchmark(spec, data_dir=tmp_path)
    assert [r["golden_answers"] for r in bench.rows] == [["Ann"], ["X"]]
    assert bench.rows[0]["metadata"]["benchmark"] == "mine"
    with pytest.raises(ValueError, match="hops must be one of single, multi, any"):
        BenchmarkSpec("bad", "x.jsonl", "none", "two")


# ---- subsampling ------------------------------------------------------------------------------------------------


def test_subsample_is_seeded_nested_and_keeps_file_order():
    rows = [make_row(str(i), f"q{i}?", ["a"]) for i in range(50)]
    ten = [r["id"] for r in subsample(rows, 10, seed=3)]
    assert ten == [r["id"] for r in subsample(rows, 10, seed=3)]  # deterministic
    assert ten == sorted(ten, key=int)  # file order
    assert set(ten) <= {r["id"] for r in subsample(rows, 20, seed=3)}  # a smaller limit is a subset
    assert ten != [r["id"] for r in subsample(rows, 10, seed=4)]
    assert [r["id"] for r in subsample(rows, 3, seed=None)] == ["0", "1", "2"]
    assert len(subsample(rows, None, seed=3)) == len(subsample(rows, 0, seed=3)) == len(subsample(rows, 99, 3)) == 50


def test_limit_and_seed_pass_through_load_benchmark(custom_files):
    questions, corpus = custom_files
    bench = load_benchmark("custom", questions=questions, corpus=corpus, limit=4, seed=1)
    assert len(bench.rows) == 4 and bench.available_questions == 10
    assert len(bench.corpus) == 2  # the corpus does not shrink with the questions
    assert bench.options == {"limit": 4, "seed": 1, "data_dir": None}
    again = load_benchmark("custom", questions=questions, corpus=corpus, limit=4, seed=1)
    assert [r["id"] for r in again.rows] == [r["id"] for r in bench.rows]


# ---- answer coverage --------------------------------------------------------------------------------------------


def test_answer_in_corpus_matches_whole_normalised_words():
    corpus = [Doc("a", "Kaelith Dunmore", "Dunmore's paintings (1890-1910) hang in the U.S. capitol."),
              Doc("b", "", "The harbour of Velmora, founded in 1972.")]
    rows = [
        make_row("1", "q?", ["kaelith dunmore"]),  # in the title
        make_row("2", "q?", ["Dunmore"]),  # "Dunmore's": punctuation splits words
        make_row("3", "q?", ["1890"]),  # inside "(1890-1910)"
        make_row("4", "q?", ["197"]),  # part of "1972": not a whole word
        make_row("5", "q?", ["The"]),  # normalises to nothing: never counts
        make_row("6", "q?", ["Ostrand", "the Harbour of Velmora"]),  # any answer counts; articles dropped
        make_row("7", "q?", ["Velmora 1972"]),  # words present but not adjacent
    ]
    assert answer_in_corpus(rows, corpus) == [True, True, True, False, False, True, False]
    assert answer_in_corpus_rate(rows, corpus) == pytest.approx(4 / 7)
    with pytest.raises(ValueError, match="at least one question row"):
        answer_in_corpus_rate([], corpus)


# ---- the real files ----------------------------------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_benchmark_loads(shared_data, name):
    questions, passages = REAL[name]
    bench = load_benchmark(name, data_dir=shared_data)
    assert len(bench.rows) == bench.available_questions == questions == BENCHMARKS.get(name).expected_questions
    assert len({r["id"] for r in bench.rows}) == questions
    assert all(r["question"] and r["golden_answers"] for r in bench.rows)
    assert len(bench.corpus) == passages
    assert len({d.id for d in bench.corpus}) == passages


@pytest.mark.shared_data
def test_real_subsample_and_corpus_choices(shared_data):
    small = load_benchmark("r1s_2wiki", data_dir=shared_data, limit=50, seed=7)
    assert len(small.rows) == 50 and len(small.corpus) == REAL["r1s_2wiki"][1]
    assert {r["id"] for r in small.rows} < {r["id"] for r in load_benchmark("r1s_2wiki", data_dir=shared_data,
                                                                            limit=100, seed=7).rows}
    # musique has no trace file: it searches the passages of the other sets' traces
    musique = load_benchmark("r1s_musique", data_dir=shared_data, limit=5)
    assert {d.id for d in musique.corpus} == {d.id for d in small.corpus}
    hotpot = load_benchmark("hotpotqa", data_dir=shared_data, corpus="none", limit=5)
    assert hotpot.corpus is None and hotpot.rows[0]["metadata"]["format"] == "hotpotqa"


@pytest.mark.shared_data
def test_real_answer_coverage(shared_data):
    # hotpotqa's pool holds every question's gold paragraphs: nearly all answers occur (the docstring: 99.6%)
    bench = load_benchmark("hotpotqa", data_dir=shared_data)
    assert bench.answer_in_corpus_rate() == pytest.approx(0.996)
    assert load_benchmark("r1s_musique", data_dir=shared_data).answer_in_corpus_rate() == pytest.approx(0.326)

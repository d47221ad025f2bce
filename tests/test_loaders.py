"""Real-data loaders: every supported format from small files written here, the bundled real files when present,
and clear errors for bad input."""

from __future__ import annotations

import json

import pytest

from searchrl.data.loaders import (
    QA_FORMATS,
    corpus_from_traces,
    default_data_dir,
    load_corpus,
    load_qa,
    pooled_corpus,
)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


HOTPOT_CONTEXT = {
    "title": ["Velora Kastin", "Tamsek"],
    "sentences": [["Velora Kastin is a painter.", " She was born in Tamsek."], ["Tamsek is a town.", " It is old."]],
}
HOTPOT_ROW = {
    "id": "hp1",
    "question": "Where was Velora Kastin born?",
    "answer": "Tamsek",
    "type": "bridge",
    "level": "easy",
    "supporting_facts": {"title": ["Velora Kastin"], "sent_id": [1]},
    "context": HOTPOT_CONTEXT,
}


# -- question formats ----------------------------------------------------------------------------------------


def test_flashrag_rows(tmp_path):
    path = write_jsonl(tmp_path / "nq_test.jsonl", [
        {"id": "test_1", "question": "who wrote it", "golden_answers": ["Ana", "Ana Dros"]},
        {"id": "test_2", "question": "when", "golden_answers": ["1999"], "metadata": {"prop": "year"}},
    ])
    rows = load_qa(path)
    assert [r["id"] for r in rows] == ["test_1", "test_2"]
    assert rows[0]["golden_answers"] == ["Ana", "Ana Dros"]
    assert rows[1]["metadata"] == {"prop": "year", "format": "flashrag", "source": "nq_test.jsonl"}


def test_r1_searcher_rows_drop_trajectories(tmp_path):
    path = write_jsonl(tmp_path / "stage_2.jsonl", [
        {"idx": 17, "question": "Which is older?", "answer": "Tamsek", "gen_text_store": "x" * 1000},
        {"question": "No idx here?", "answer": "yes", "pred_anses": ["a", "b"]},
    ])
    rows = load_qa(path)
    assert rows[0]["id"] == "17" and rows[0]["golden_answers"] == ["Tamsek"]
    assert "gen_text_store" not in rows[0]["metadata"] and "pred_anses" not in rows[1]["metadata"]
    assert rows[1]["id"] == "stage_2-2"  # file stem and line number
    assert rows[0]["metadata"]["format"] == "r1_searcher"


def test_nq_open_rows(tmp_path):
    path = write_jsonl(tmp_path / "NQ-open.dev.jsonl", [{"question": "who sang it", "answer": ["A", "B"]}])
    (row,) = load_qa(path)
    assert row["golden_answers"] == ["A", "B"] and row["metadata"]["format"] == "nq_open"


@pytest.mark.parametrize("layout", ["columnar", "pairs", "python_literal_strings"])
def test_hotpotqa_rows_in_every_layout(tmp_path, layout):
    record = dict(HOTPOT_ROW)
    if layout == "pairs":  # the original HotpotQA json layout
        record["context"] = [[t, s] for t, s in zip(HOTPOT_CONTEXT["title"], HOTPOT_CONTEXT["sentences"])]
        record["supporting_facts"] = [["Velora Kastin", 1]]
    elif layout == "python_literal_strings":  # as some csv/parquet exports keep them
        record["context"] = repr(HOTPOT_CONTEXT)
        record["supporting_facts"] = repr({"title": ("Velora Kastin",), "sent_id": (1,)})
    (row,) = load_qa(write_jsonl(tmp_path / "hotpot.jsonl", [record]))
    meta = row["metadata"]
    assert row["golden_answers"] == ["Tamsek"] and meta["type"] == "bridge" and meta["level"] == "easy"
    assert meta["supporting_facts"] == [["Velora Kastin", 1]]
    assert meta["context"][0] == {"title": "Velora Kastin",
                                  "sentences": ["Velora Kastin is a painter.", " She was born in Tamsek."]}


def test_csv_rows_with_capitalised_header_and_bom(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text('\ufeffQuestion,Answer\nWho was first?,"Kastin, Velora"\nWhat year?,1999\n', encoding="utf-8")
    rows = load_qa(path)
    assert [r["golden_answers"] for r in rows] == [["Kastin, Velora"], ["1999"]]
    assert rows[0]["question"] == "Who was first?" and rows[0]["metadata"]["format"] == "csv"


def test_limit_and_blank_lines(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "a?", "answer": "x"}\n\n{"question": "b?", "answer": "y"}\n'
                    '{"question": "c?", "answer": "z"}\n')
    assert [r["question"] for r in load_qa(path, limit=2)] == ["a?", "b?"]
    assert len(load_qa(path)) == 3


# -- bad question files ----------------------------------------------------------------------------------------


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        load_qa(tmp_path / "nowhere.jsonl")
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        load_corpus(tmp_path / "nowhere.jsonl")


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "a?", "answer": "x"}\n{"question": "b?", "answer": "y"}\n{"question": "c?",\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl, line 3"):
        load_qa(path)


def test_row_without_answer_names_the_line(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"id": "1", "question": "a?", "golden_answers": ["x"]},
        {"id": "2", "question": "b?", "golden_answers": []},
    ])
    with pytest.raises(ValueError, match=r"line 2: the row has no answer"):
        load_qa(path)


def test_row_without_question_names_the_line(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"question": "a?", "answer": "x"},
        {"question": "b?", "answer": "y"},
        {"question": "  ", "answer": "z"},
    ])
    with pytest.raises(ValueError, match=r"line 3: the row has no question"):
        load_qa(path)


def test_unknown_format_lists_the_known_ones(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"query": "a?", "target": "x"}])
    with pytest.raises(ValueError, match="unknown question format") as info:
        load_qa(path)
    for name in QA_FORMATS:
        assert name in str(info.value)


def test_empty_question_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(ValueError, match="no questions"):
        load_qa(path)


def test_non_object_line(tmp_path):
    path = tmp_path / "list.jsonl"
    path.write_text('["a?", "x"]\n')
    with pytest.raises(ValueError, match="line 1: expected a JSON object"):
        load_qa(path)


# -- corpora ---------------------------------------------------------------------------------------------------


def test_corpus_from_jsonl_with_titles(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"id": "d1", "title": "Tamsek", "text": "Tamsek is a town."},
        {"title": "Kastin", "text": "Kastin is a painter."},
    ])
    docs = load_corpus(path)
    assert [(d.id, d.title, d.text) for d in docs] == [("d1", "Tamsek", "Tamsek is a town."),
                                                      ("2", "Kastin", "Kastin is a painter.")]


def test_corpus_from_flashrag_contents(tmp_path):
    path = write_jsonl(tmp_path / "wiki.jsonl", [
        {"id": "0", "contents": '"Aaron"\nAaron is a prophet.'},
        {"id": "1", "contents": "No title line"},
    ])
    docs = load_corpus(path)
    assert (docs[0].title, docs[0].text) == ("Aaron", "Aaron is a prophet.")
    assert (docs[1].title, docs[1].text) == ("", "No title line")


def test_corpus_from_dpr_tsv(tmp_path):
    path = tmp_path / "psgs.tsv"
    path.write_text("id\ttext\ttitle\n1\tAaron is a prophet.\tAaron\n2\tTamsek is a town.\tTamsek\n")
    docs = load_corpus(path)
    assert [(d.id, d.title) for d in docs] == [("1", "Aaron"), ("2", "Tamsek")]
    assert load_corpus(path, limit=1) == docs[:1]


def test_bad_corpora(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no passages"):
        load_corpus(empty)
    no_text = write_jsonl(tmp_path / "c.jsonl", [{"id": "1", "text": "ok"}, {"id": "2", "body": "?"}])
    with pytest.raises(ValueError, match=r"c\.jsonl, line 2: a passage needs a 'text'"):
        load_corpus(no_text)


def test_pooled_corpus_dedupes_with_stable_ids():
    first = {"id": "a", "question": "q?", "golden_answers": ["x"],
             "metadata": {"context": [{"title": "T", "sentences": ["One.", " Two."]},
                                      {"title": "U", "sentences": ["Three."]}]}}
    second = {"id": "b", "question": "r?", "golden_answers": ["y"],
              "metadata": {"context": [{"title": "U", "sentences": ["Three."]},
                                       {"title": "T", "sentences": ["Other."]}]}}
    docs = pooled_corpus([first, second])
    assert [(d.title, d.text) for d in docs] == [("T", "One. Two."), ("U", "Three."), ("T", "Other.")]
    assert {d.id for d in pooled_corpus([second, first])} == {d.id for d in docs}  # ids follow content
    with pytest.raises(ValueError, match="no context paragraphs"):
        pooled_corpus([{"id": "c", "question": "q", "golden_answers": ["x"], "metadata": {}}])


def test_corpus_from_traces_reads_both_passage_styles(tmp_path):
    trace = (
        "I will search. <|begin_of_query|> tamsek<|end_of_query|>\n\n<|begin_of_documents|>\n"
        "(1)Title: Tamsek Text:  Tamsek is a town.  It is old.\n"
        '(2)"Title: Kastin Text:  Kastin said ""hello""."\n'
        "<|end_of_documents|>\n more <|begin_of_documents|>\n(1)Velora Kastin   Velora Kastin was a painter.\n"
        "(2)Title: Tamsek Text:  Tamsek is a town.  It is old.\n<|end_of_documents|> <answer>x</answer>"
    )
    path = write_jsonl(tmp_path / "traces.jsonl", [
        {"question": "q", "answer": "a", "gen_text_store": trace},
        {"question": "r", "answer": "b", "gen_text_store": ["no documents here"]},
    ])
    docs = corpus_from_traces(path)
    assert [(d.title, d.text) for d in docs] == [
        ("Tamsek", "Tamsek is a town. It is old."),
        ("Kastin", 'Kastin said "hello".'),
        ("Velora Kastin", "Velora Kastin was a painter."),
    ]
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"question": "q", "answer": "a", "gen_text_store": ""}])
    with pytest.raises(ValueError, match="no <|begin_of_documents|>"):
        corpus_from_traces(plain)


# -- where the data lives ---------------------------------------------------------------------------------------


def test_default_data_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHRL_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.setenv("SEARCHRL_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="SEARCHRL_DATA"):
        default_data_dir()
    monkeypatch.delenv("SEARCHRL_DATA")
    found = default_data_dir()
    assert found is None or (found.is_dir() and found.parts[-2:] == ("shared", "data"))


# -- the real files in ../shared/data ----------------------------------------------------------------------------

REAL_FILES = {  # path -> (rows, format)
    "flashrag-subsamples/nq_test_1k.jsonl": (1000, "flashrag"),
    "flashrag-subsamples/popqa_test_1k.jsonl": (1000, "flashrag"),
    "flashrag-subsamples/bamboogle_test_1k.jsonl": (125, "flashrag"),
    "hotpotqa-distractor/hotpotqa_dev.jsonl": (300, "hotpotqa"),
    "r1-searcher/eval_set/2wiki_500.jsonl": (500, "r1_searcher"),
    "r1-searcher/eval_set/musique_500.jsonl": (500, "r1_searcher"),
    "r1-searcher/training_set/stage_1.jsonl": (350, "r1_searcher"),
    "r1-searcher/traces/bamboogle_qwen.jsonl": (125, "r1_searcher"),
    "nq-open/NQ-open.dev.jsonl": (3610, "nq_open"),
    "bamboogle/test.csv": (125, "csv"),
}


@pytest.mark.shared_data
@pytest.mark.parametrize("relative", sorted(REAL_FILES))
def test_real_question_files(shared_data, relative):
    rows = load_qa(shared_data / relative)
    count, fmt = REAL_FILES[relative]
    assert len(rows) == count
    assert {r["metadata"]["format"] for r in rows} == {fmt}
    assert all(r["question"] and r["golden_answers"] for r in rows)
    assert len({r["id"] for r in rows}) == count


@pytest.mark.shared_data
def test_real_bamboogle_agrees_across_formats(shared_data):
    from_csv = load_qa(shared_data / "bamboogle/test.csv")
    from_flashrag = load_qa(shared_data / "flashrag-subsamples/bamboogle_test_1k.jsonl")
    assert [r["question"] for r in from_csv] == [r["question"] for r in from_flashrag]
    # The csv went through a spreadsheet, which rewrote some dates ("29-May-32"); the other answers agree.
    same = sum(a["golden_answers"] == b["golden_answers"] for a, b in zip(from_csv, from_flashrag))
    assert same >= 110


@pytest.mark.shared_data
def test_real_hotpotqa_pool(shared_data):
    rows = [r for split in ("train", "dev", "test")
            for r in load_qa(shared_data / f"hotpotqa-distractor/hotpotqa_{split}.jsonl")]
    assert len(rows) == 1100
    assert sum(len(r["metadata"]["context"]) == 10 for r in rows) >= 1090  # a few rows carry fewer paragraphs
    docs = pooled_corpus(rows)
    assert 10_500 <= len(docs) <= 11_000  # SOURCES.md: about 10,785 unique paragraphs
    titles = {d.title for d in docs}
    # Each question's supporting paragraphs are in the pool.
    assert all(title in titles for r in rows for title, _ in r["metadata"]["supporting_facts"])


@pytest.mark.shared_data
def test_real_trace_corpus(shared_data):
    docs = corpus_from_traces(shared_data / "r1-searcher/traces/bamboogle_qwen.jsonl")
    assert 1000 <= len(docs) <= 1300
    assert all(d.title and d.text for d in docs[:200])
    assert len({d.id for d in docs}) == len(docs)

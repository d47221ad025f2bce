"""Retrieval layer: shared input rules, BM25 and dense retrievers, save/load and the registry."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from searchrl.data.schema import Doc
from searchrl.retrieval import (
    MAX_QUERY_CHARS,
    RETRIEVERS,
    BM25Retriever,
    DenseRetriever,
    Retriever,
    load_retriever,
    make_retriever,
)
from searchrl.retrieval.bm25 import top_k_indices
from searchrl.retrieval.dense import ivf_list_count

PASSAGES = [
    ("Velmora", "Velmora is a harbour city on the northern coast, founded by fishermen in the ninth century."),
    ("Ostrand River", "The Ostrand River flows west through three valleys before reaching the Grey Sea."),
    ("Kaelith Dunmore", "Kaelith Dunmore was a painter known for storm scenes and portraits of sailors."),
    ("Thornwick Abbey", "Thornwick Abbey is a ruined monastery whose bells were melted down during a siege."),
    ("Brasswater", "Brasswater is a mining town where copper has been dug since antiquity."),
    ("Iselde Marrow", "Iselde Marrow composed operas and directed the royal orchestra for twenty years."),
    ("Grey Sea", "The Grey Sea is a cold, shallow sea famous for fog and herring fisheries."),
    ("Pellinor Bridge", "Pellinor Bridge is a stone bridge with nine arches crossing the Ostrand River."),
    ("Saffron Guild", "The Saffron Guild controlled the spice trade and minted its own coins."),
    ("Quillon Observatory", "Quillon Observatory houses a large telescope used to map comets and planets."),
    ("Dravik Fenn", "Dravik Fenn was an explorer who crossed the southern desert on camelback."),
    ("Mirelake", "Mirelake is a marshland lake home to herons, eels and rare orchids."),
    ("Hollowmere Library", "Hollowmere Library keeps ancient maps, star charts and illuminated manuscripts."),
    ("Tessaly Vorne", "Tessaly Vorne was a chemist who discovered a green dye made from lichen."),
    ("Carrowind Pass", "Carrowind Pass is a high mountain road closed by snow for half of every year."),
    ("Ember Festival", "The Ember Festival celebrates the harvest with bonfires, drums and lantern parades."),
    ("Zolten Crown", "The Zolten Crown is a golden crown set with sapphires, stolen twice from the treasury."),
    ("Windral Academy", "Windral Academy trains naval officers in navigation, astronomy and shipbuilding."),
    ("Maelis Ordway", "Maelis Ordway wrote a famous cookbook of fish stews from the coastal villages."),
    ("Faerholt Castle", "Faerholt Castle stands on a cliff above the sea and was the seat of the old kings."),
]
CORPUS = [Doc(id=f"p{i:02d}", title=title, text=text) for i, (title, text) in enumerate(PASSAGES)]
QUERIES = [
    "Who founded the harbour city Velmora?",
    "stone bridge with nine arches",
    "telescope used to map comets",
    "green dye made from lichen",
    "festival with bonfires and lanterns",
]
EXPECTED_FIRST = ["p00", "p07", "p09", "p13", "p15"]


def ids(results: list[list[Doc]]) -> list[list[str]]:
    return [[doc.id for doc in docs] for docs in results]


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever(CORPUS, show_progress=False)


@pytest.fixture(scope="module")
def dense() -> DenseRetriever:
    return DenseRetriever(CORPUS, show_progress=False)


# --- shared input rules, checked on BM25 (the same base class serves every kind) ---------------------------------


def test_retrievers_satisfy_the_protocol(bm25):
    assert isinstance(bm25, Retriever)
    assert len(bm25) == len(CORPUS)


def test_empty_corpus_is_rejected():
    with pytest.raises(ValueError, match="corpus is empty"):
        BM25Retriever([], show_progress=False)
    with pytest.raises(ValueError, match="corpus is empty"):
        DenseRetriever([], show_progress=False)  # rejected before any model is loaded


def test_corpus_must_hold_unique_docs():
    with pytest.raises(TypeError, match=r"corpus\[1\] is a str"):
        BM25Retriever([CORPUS[0], "not a doc"], show_progress=False)
    with pytest.raises(ValueError, match="duplicate Doc id 'p00'"):
        BM25Retriever([CORPUS[0], CORPUS[0]], show_progress=False)


@pytest.mark.parametrize("bad_k", [0, -3])
def test_k_below_one_is_an_error(bm25, bad_k):
    with pytest.raises(ValueError, match="k must be at least 1"):
        bm25.search(["Velmora"], k=bad_k)


def test_k_must_be_an_int(bm25):
    with pytest.raises(TypeError, match="positive integer"):
        bm25.search(["Velmora"], k=2.5)


def test_a_bare_string_is_not_a_batch(bm25):
    with pytest.raises(TypeError, match=r"wrap a single query as \[query\]"):
        bm25.search("Velmora", k=2)


def test_no_queries_gives_no_results(bm25):
    assert bm25.search([], k=3) == []


def test_empty_queries_get_empty_results_and_others_are_answered(bm25):
    results = bm25.search(["", "   \n", QUERIES[0]], k=2)
    assert results[0] == [] and results[1] == []
    assert [doc.id for doc in results[2]][:1] == ["p00"]


def test_huge_query_is_truncated_not_fatal(bm25):
    huge = "Velmora " + "x" * 100_000
    results = bm25.search([huge], k=3)
    assert results[0][0].id == "p00"
    # the cap is what makes the two equal: everything after MAX_QUERY_CHARS is ignored
    assert bm25.search([huge[:MAX_QUERY_CHARS] + " Brasswater mining"], k=3) == results


# --- BM25 ---------------------------------------------------------------------------------------------------------


def test_bm25_finds_the_passage_a_query_describes(bm25):
    assert [docs[0] for docs in ids(bm25.search(QUERIES, k=3))] == EXPECTED_FIRST


def test_bm25_title_alone_finds_its_passage(bm25):
    # every title is unique, so naming it must put its passage first (titles are indexed with the text)
    firsts = [docs[0].id for docs in bm25.search([doc.title for doc in CORPUS], k=1)]
    assert firsts == [doc.id for doc in CORPUS]


def test_bm25_batch_equals_one_by_one(bm25):
    batched = bm25.search(QUERIES, k=4)
    assert batched == [bm25.search([query], k=4)[0] for query in QUERIES]


def test_bm25_k_larger_than_corpus_returns_every_passage_once(bm25):
    results = bm25.search(["Ostrand River"], k=1000)[0]
    assert len(results) == len(CORPUS)
    assert {doc.id for doc in results} == {doc.id for doc in CORPUS}
    assert results[0].id in {"p01", "p07"}  # both passages mention the Ostrand River


def test_bm25_unknown_words_return_nothing(bm25):
    # all-unknown (and all-stopword) queries have no ranking: [] rather than arbitrary score-0 passages
    assert bm25.search(["zzyzx qwrtp", "the of and"], k=3) == [[], []]


def test_bm25_ties_follow_corpus_order():
    twins = [Doc(id=str(i), title="", text="identical words here") for i in range(6)]
    retriever = BM25Retriever(twins, show_progress=False)
    assert ids(retriever.search(["identical"], k=3)) == [["0", "1", "2"]]


def test_top_k_indices_keeps_ties_in_index_order():
    scores = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 0.0], dtype=np.float32)
    assert top_k_indices(scores, 3).tolist() == [1, 3, 2]
    assert top_k_indices(scores, 6).tolist() == [1, 3, 2, 4, 0, 5]


def test_bm25_bad_options_say_what_to_fix():
    with pytest.raises(ValueError, match="unknown BM25 method 'bm99'"):
        BM25Retriever(CORPUS, method="bm99", show_progress=False)
    with pytest.raises(ValueError, match="0 <= b <= 1"):
        BM25Retriever(CORPUS, b=2.0, show_progress=False)


def test_bm25_stemmer_without_pystemmer_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # makes `import Stemmer` fail even where it is installed
    with pytest.raises(ImportError, match="pip install PyStemmer"):
        BM25Retriever(CORPUS, stemmer="english", show_progress=False)


def test_bm25_save_load_round_trip(bm25, tmp_path):
    bm25.save(tmp_path / "bm25")
    manifest = json.loads((tmp_path / "bm25" / "retriever.json").read_text())
    assert manifest["kind"] == "bm25" and manifest["corpus_size"] == len(CORPUS)
    loaded = load_retriever(tmp_path / "bm25")
    assert isinstance(loaded, BM25Retriever)
    assert loaded.corpus == bm25.corpus
    probe = [*QUERIES, "zzyzx", "", "sea"]
    assert loaded.search(probe, k=5) == bm25.search(probe, k=5)


def test_bm25_load_rejects_overrides_that_need_reindexing(bm25, tmp_path):
    bm25.save(tmp_path)
    with pytest.raises(TypeError, match="k1"):
        load_retriever(tmp_path, k1=0.9)


# --- registry and loading -----------------------------------------------------------------------------------------


def test_registry_builds_by_name():
    assert set(RETRIEVERS) == {"bm25", "dense"}
    retriever = make_retriever("BM25", CORPUS, k1=1.2, show_progress=False)
    assert isinstance(retriever, BM25Retriever) and retriever.k1 == 1.2


def test_registry_unknown_name_suggests_the_nearest():
    with pytest.raises(ValueError, match=r"unknown retriever 'bm52' \(did you mean 'bm25'\?\); known: bm25, dense"):
        make_retriever("bm52", CORPUS)


def test_registry_unknown_option_lists_the_accepted_ones():
    with pytest.raises(TypeError, match="no option.*k_one.*accepted: k1, b"):
        make_retriever("bm25", CORPUS, k_one=1.0)


def test_load_from_missing_or_foreign_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_retriever(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="retriever.json is missing"):
        load_retriever(tmp_path)
    (tmp_path / "retriever.json").write_text(json.dumps({"kind": "tfidf", "options": {}, "corpus_size": 1}))
    with pytest.raises(ValueError, match="unknown retriever 'tfidf'"):
        load_retriever(tmp_path)


def test_load_detects_a_truncated_corpus(bm25, tmp_path):
    bm25.save(tmp_path)
    lines = (tmp_path / "corpus.jsonl").read_text().splitlines()
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="19 passages but the manifest says 20"):
        load_retriever(tmp_path)


def test_importing_retrieval_does_not_load_heavy_libraries():
    code = (
        "import sys, searchrl.retrieval\n"
        "heavy = [m for m in ('sentence_transformers', 'faiss', 'torch', 'bm25s') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_ivf_list_count_is_bounded_by_training_points():
    assert ivf_list_count(20) == 0  # too small to train: the dense retriever falls back to flat
    assert ivf_list_count(10_000) == 256  # min(4*sqrt(N)=400, N//39=256)
    assert ivf_list_count(1_000_000) == 4000


# --- dense (loads the bundled all-MiniLM-L6-v2, offline) ----------------------------------------------------------


@pytest.mark.slow
def test_dense_finds_the_passage_a_query_describes(dense):
    assert isinstance(dense, Retriever)
    assert [docs[0] for docs in ids(dense.search(QUERIES, k=3))] == EXPECTED_FIRST


@pytest.mark.slow
def test_dense_batch_equals_one_by_one(dense):
    batched = ids(dense.search(QUERIES, k=4))
    assert batched == [ids(dense.search([query], k=4))[0] for query in QUERIES]


@pytest.mark.slow
def test_dense_edge_cases(dense):
    assert dense.search([], k=3) == []
    results = dense.search(["", "Pellinor Bridge " + "y" * 100_000], k=100)
    assert results[0] == []
    assert len(results[1]) == len(CORPUS) and results[1][0].id == "p07"
    with pytest.raises(ValueError, match="k must be at least 1"):
        dense.search(["sea"], k=0)


@pytest.mark.slow
def test_dense_save_load_round_trip(dense, tmp_path):
    dense.save(tmp_path / "dense")
    manifest = json.loads((tmp_path / "dense" / "retriever.json").read_text())
    assert manifest["kind"] == "dense" and manifest["options"]["model_name_or_path"] is None
    loaded = load_retriever(tmp_path / "dense", device="cpu")
    assert isinstance(loaded, DenseRetriever)
    assert ids(loaded.search(QUERIES, k=5)) == ids(dense.search(QUERIES, k=5))


@pytest.mark.slow
def test_dense_hnsw_index_agrees_with_flat_on_a_small_corpus(dense):
    hnsw = DenseRetriever(CORPUS, index="hnsw", show_progress=False)
    assert hnsw.index_kind == "hnsw"
    assert ids(hnsw.search(QUERIES, k=1)) == ids(dense.search(QUERIES, k=1))


@pytest.mark.slow
def test_dense_ivf_falls_back_to_flat_on_a_tiny_corpus():
    with pytest.warns(UserWarning, match="using an exact flat index"):
        retriever = DenseRetriever(CORPUS, index="ivf", show_progress=False)
    assert retriever.index_kind == "flat"
    assert [docs[0] for docs in ids(retriever.search(QUERIES, k=1))] == EXPECTED_FIRST


@pytest.mark.slow
def test_dense_ivf_trains_when_the_corpus_is_large_enough(tmp_path):
    # 20 real passages among 180 filler ones: enough points for 5 clusters of 39
    filler = [
        Doc(id=f"f{i}", title=f"Ledger {i}", text=f"Entry {i} of a grain ledger, {i % 7} sacks.") for i in range(180)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning this time
        retriever = DenseRetriever(CORPUS + filler, index="ivf", show_progress=False)
    assert retriever.index_kind == "ivf"
    assert retriever._index.nlist == ivf_list_count(200)
    assert [docs[0].id for docs in retriever.search(QUERIES, k=1)] == EXPECTED_FIRST
    retriever.save(tmp_path)
    assert ids(load_retriever(tmp_path).search(QUERIES, k=3)) == ids(retriever.search(QUERIES, k=3))


def test_dense_bad_options_say_what_to_fix():  # checked before any model loads
    with pytest.raises(ValueError, match="unknown faiss index 'ivfpq'"):
        DenseRetriever(CORPUS, index="ivfpq", show_progress=False)

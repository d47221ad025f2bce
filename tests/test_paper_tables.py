"""The papers' numbers as shipped data, and our results placed in the papers' table layouts."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from searchrl.core.registry import UnknownNameError
from searchrl.evaluation.paper_tables import (
    LAYOUTS,
    MISSING,
    PAPER_SETTINGS,
    layout_names,
    our_settings,
    paper_numbers,
    paper_table,
)

# -- the transcribed numbers ------------------------------------------------------------------------------------


def _cell(paper, model, method, dataset, metric):
    df = paper_numbers(paper)
    hit = df[(df.model == model) & (df.method == method) & (df.dataset == dataset) & (df.metric == metric)]
    assert len(hit) == 1, (model, method, dataset, metric, len(hit))
    return float(hit["value"].iloc[0])


def test_the_csv_loads_with_one_row_per_printed_cell():
    df = paper_numbers()
    # Search-R1: 3 model blocks x 10 methods x (7 datasets + Avg.); R1-Searcher: 30 rows x 4 datasets x 2 metrics;
    # R1-Searcher++: 12 rows x (4 datasets + Avg) x 3 metrics.
    assert df.groupby(["paper", "table"]).size().to_dict() == {
        ("r1_searcher", "Table 2"): 240, ("r1_searcher_pp", "Table 1"): 180, ("search_r1", "Table 2"): 240}
    assert not df.duplicated(["paper", "table", "model", "method", "dataset", "metric"]).any()
    assert df["value"].notna().all()
    assert set(df["metric"]) == {"em", "cem", "judge", "f1", "searches"}
    assert set(df["unit"]) == {"fraction", "percent", "count"}


# Each value below was read off the paper's text by hand, independently of the CSV.
@pytest.mark.parametrize("paper, model, method, dataset, metric, value", [
    ("search_r1", "Qwen2.5-7B", "Search-R1-base", "nq", "em", 0.412),
    ("search_r1", "Qwen2.5-3B", "Search-R1-instruct", "hotpotqa", "em", 0.308),
    ("search_r1", "LLaMA3.2-3B", "RAG", "bamboogle", "em", 0.064),
    ("search_r1", "Qwen2.5-3B", "CoT", "avg", "em", 0.015),
    ("r1_searcher", "GPT-4o-mini", "ReARTeR", "2wiki", "cem", 0.554),
    ("r1_searcher", "Qwen-2.5-7B-Base", "R1-Searcher", "hotpotqa", "judge", 0.750),
    ("r1_searcher", "Llama-3.1-8B-Instruct", "R1-Searcher", "musique", "judge", 0.282),
    ("r1_searcher", "Llama-3.1-8B-Instruct", "CR-Planner", "bamboogle", "cem", 0.304),
    ("r1_searcher_pp", "Qwen-2.5-7B-Instruct", "Search-R1", "hotpotqa", "f1", 57.8),
    ("r1_searcher_pp", "Qwen-2.5-7B-Instruct", "R1-Searcher++", "avg", "searches", 1.61),
    ("r1_searcher_pp", "Qwen-2.5-7B-Instruct", "Directly Gen", "musique", "judge", 6.2),
])
def test_spot_values_equal_the_paper(paper, model, method, dataset, metric, value):
    assert _cell(paper, model, method, dataset, metric) == pytest.approx(value, abs=1e-9)


def test_every_row_cites_its_table_and_where_it_sits():
    df = paper_numbers()
    assert (df["table"].str.match(r"Table \d+$")).all()
    # A page where the extracted text has page breaks (Search-R1), a section where it has none.
    assert ((df["page"] != "") | (df["section"] != "")).all()
    assert set(df.loc[df.paper == "search_r1", "page"]) == {"8"}


def test_printed_averages_agree_with_their_cells_except_the_noted_ones():
    # A mistyped digit would break these sums: each printed average is checked against its row.
    df = paper_numbers()
    bad = []
    for (paper, model, method, metric), g in df.groupby(["paper", "model", "method", "metric"]):
        cells = g.set_index("dataset")["value"]
        if "avg" not in cells:
            continue
        mean = cells.drop("avg").mean()
        tolerance = {"fraction": 0.001, "percent": 0.1, "count": 0.01}[g["unit"].iloc[0]]
        if abs(mean - cells["avg"]) > tolerance:
            bad.append((paper, model, method, metric))
            assert "printed Avg differs" in g.set_index("dataset").at["avg", "note"]
    f1_rows = [b for b in bad if b[0] == "r1_searcher_pp"]
    assert [b for b in bad if b[0] == "search_r1"] == [("search_r1", "Qwen2.5-7B", "IRCoT", "em")]
    assert len(f1_rows) == 11 and {b[3] for b in f1_rows} == {"f1"}


def test_paper_numbers_filters_and_names_what_exists():
    assert set(paper_numbers("r1_searcher_pp")["table"]) == {"Table 1"}
    with pytest.raises(ValueError, match="known: r1_searcher, r1_searcher_pp, search_r1"):
        paper_numbers("r_search")
    with pytest.raises(ValueError, match="Table 2"):
        paper_numbers("search_r1", "Table 3")


def test_every_paper_has_its_settings():
    for paper in set(paper_numbers()["paper"]):
        assert {"model", "corpus", "retriever", "top_k", "eval_sets"} <= set(PAPER_SETTINGS[paper])
    assert PAPER_SETTINGS["search_r1"]["top_k"] == "3"


# -- rendering ---------------------------------------------------------------------------------------------------


def _ours(rows):
    return pd.DataFrame(rows, columns=["method", "dataset", "metric", "value", "n", "ci_low", "ci_high"])


def test_search_r1_layout_puts_our_numbers_beside_the_papers():
    seven = ["nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle"]
    rows = [("grpo", d, "em", 0.1 * (i + 1), 100, math.nan, math.nan) for i, d in enumerate(seven)]
    rows += [("ppo", "r1s_hotpotqa", "em", 0.25, 500, 0.21, 0.29), ("ppo", "nq", "f1", 0.9, 100, 0.8, 1.0)]
    table = paper_table(_ours(rows), "search_r1_table2", models=["Qwen2.5-3B"], ours={"model": "tiny"})
    frame = table.frame
    assert list(frame.index.get_level_values("source").unique()) == ["paper", "searchrl"]
    assert set(frame.loc["paper"].index.get_level_values("model")) == {"Qwen2.5-3B"}
    assert frame.loc[("paper", "Qwen2.5-3B", "Search-R1-base"), ("NQ", "EM")] == pytest.approx(0.341)
    assert frame.loc[("searchrl", "tiny", "grpo"), ("PopQA", "EM")] == pytest.approx(0.3)
    # Our average is the plain mean of the seven cells (0.1 .. 0.7 -> 0.4), as the paper's Avg. column is.
    assert frame.loc[("searchrl", "tiny", "grpo"), ("Avg.", "EM")] == pytest.approx(0.4)
    # r1s_hotpotqa fills the HotpotQA column; f1 has no column in an EM-only table.
    assert frame.loc[("searchrl", "tiny", "ppo"), ("HotpotQA", "EM")] == pytest.approx(0.25)
    assert list(frame.columns.get_level_values("metric").unique()) == ["EM"]
    cells = table.cells
    assert cells.loc[("searchrl", "tiny", "ppo"), ("HotpotQA", "EM")] == "0.250 [0.210, 0.290]"
    assert cells.loc[("searchrl", "tiny", "ppo"), ("NQ", "EM")] == MISSING
    assert cells.loc[("searchrl", "tiny", "ppo"), ("Avg.", "EM")] == MISSING  # six datasets missing: no average
    assert cells.loc[("paper", "Qwen2.5-3B", "CoT"), ("Bamboogle", "EM")] == "0.000"


def test_r1_searcher_pp_layout_scales_rates_to_percent_and_keeps_counts():
    rows = [("ours", "r1s_bamboogle", "f1", 0.5, 125, 0.4, 0.6), ("ours", "r1s_bamboogle", "judge", 0.45, 125,
                                                                     math.nan, math.nan),
            ("ours", "r1s_bamboogle", "searches", 1.5, 125, math.nan, math.nan)]
    table = paper_table(_ours(rows), "r1_searcher_pp_table1")
    row = ("searchrl", "", "ours")
    assert table.frame.loc[row, ("Bamboogle", "F1")] == pytest.approx(50.0)
    assert table.frame.loc[row, ("Bamboogle", "LasJ")] == pytest.approx(45.0)
    assert table.frame.loc[row, ("Bamboogle", "RC")] == pytest.approx(1.5)
    assert table.cells.loc[row, ("Bamboogle", "F1")] == "50.0 [40.0, 60.0]"
    assert table.cells.loc[row, ("Bamboogle", "RC")] == "1.50"
    assert table.frame.loc[("paper", "Qwen-2.5-7B-Instruct", "R1-Searcher++"), ("Avg", "LasJ")] == 55.2
    assert "ours r1s_bamboogle n=125" in table.caption  # our subset size, named by our dataset


def test_r1_searcher_layout_maps_cem_and_judge_to_acc_r_and_acc_l():
    rows = [("rl", "musique", "cem", 0.2, 500, math.nan, math.nan), ("rl", "musique", "judge", 0.3, 500,
                                                                     math.nan, math.nan)]
    table = paper_table(_ours(rows), "r1_searcher_table2", models=["Qwen-2.5-7B-Base"])
    assert table.frame.loc[("searchrl", "", "rl"), ("Musique", "ACC_R")] == pytest.approx(0.2)
    assert table.frame.loc[("searchrl", "", "rl"), ("Musique", "ACC_L")] == pytest.approx(0.3)
    assert table.frame.loc[("paper", "Qwen-2.5-7B-Base", "R1-Searcher"), ("HotpotQA", "ACC_L")] == 0.75
    assert "Avg" not in table.frame.columns.get_level_values("dataset")
    assert "merged" in table.caption  # the row-order doubt travels with the table


def test_caption_spells_out_settings_that_differ():
    table = paper_table(None, "search_r1_table2", ours={"model": "SmolLM2-135M", "retriever": "bm25", "top_k": 3})
    assert "retriever: paper E5 (dense); ours bm25" in table.caption
    assert "model: paper Qwen2.5-7B" in table.caption and "ours SmolLM2-135M" in table.caption
    assert "top_k" not in table.caption  # 3 and 3: the same setting is not listed
    assert "p. 8" in table.caption
    assert len(table.frame) == 30 and set(table.frame.index.get_level_values("source")) == {"paper"}


def test_markdown_and_html_show_missing_cells_as_a_dash():
    rows = [("ours", "nq", "em", 0.5, 10, math.nan, math.nan)]
    table = paper_table(_ours(rows), "search_r1_table2", models=["LLaMA3.2-3B"])
    markdown = table.to_markdown()
    our_line = next(line for line in markdown.splitlines() if line.startswith("| searchrl"))
    assert our_line.split(" | ")[3:5] == ["0.500", MISSING]
    assert markdown.splitlines()[0].startswith("| source | model | method | NQ EM | TriviaQA EM")
    page = table.to_html()
    assert MISSING in page and "<figcaption>" in page and "0.394" in page  # LLaMA Search-R1-base NQ
    assert table._repr_html_() == page


def test_unknown_layout_errors_with_the_names():
    assert layout_names() == ["r1_searcher_pp_table1", "r1_searcher_table2", "search_r1_table2"]
    with pytest.raises(UnknownNameError) as err:
        paper_table(None, "search_r1_table3")
    assert "search_r1_table2" in str(err.value) and "r1_searcher_pp_table1" in str(err.value)
    assert "Search-R1-Table2" in LAYOUTS  # the spellings people write resolve


def test_bad_results_say_what_to_fix():
    with pytest.raises(ValueError, match="missing: metric"):
        paper_table(pd.DataFrame({"method": ["a"], "dataset": ["nq"], "value": [0.1]}), "search_r1_table2")
    with pytest.raises(ValueError, match="none of the results fit layout 'r1_searcher_table2'"):
        paper_table(_ours([("a", "nq", "em", 0.1, 1, 0, 0)]), "r1_searcher_table2")
    both = _ours([("a", "hotpotqa", "em", 0.1, 1, 0, 0), ("a", "r1s_hotpotqa", "em", 0.2, 1, 0, 0)])
    with pytest.raises(ValueError, match="same column"):
        paper_table(both, "search_r1_table2")
    with pytest.raises(ValueError, match="known: Qwen2.5-7B, Qwen2.5-3B, LLaMA3.2-3B"):
        paper_table(None, "search_r1_table2", models=["Qwen2.5-14B"])


def test_our_settings_reads_a_run_config():
    from searchrl.config import RunConfig

    settings = our_settings(RunConfig())
    assert settings["corpus"] == "synthetic world"
    assert settings["retriever"] == RunConfig().retriever and settings["top_k"] == str(RunConfig().top_k)

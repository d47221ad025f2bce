"""The per-type table: paired changes per type, and a rise without search shown to help flagged as guessing."""

from __future__ import annotations

import pandas as pd
import pytest

from searchrl.analysis.plots import type_change_bars
from searchrl.evaluation.evaluate import EvalResult
from searchrl.evaluation.type_table import ALL, WITHOUT_GUESSED, type_table


def stage(f1: dict[str, list[float]], searches: float = 1.0) -> EvalResult:
    """An evaluation whose questions are named <type>-<i>, with the given F1 per question."""
    rows = [{"id": f"{t}-{i}", "qtype": t, "f1": v, "searches": searches, "format_ok": True}
            for t, values in f1.items() for i, v in enumerate(values)]
    return EvalResult(pd.DataFrame(rows))


N = 30
RESULTS = {
    "after cold start": stage({"single_hop": [0.0] * N, "comparison": [0.0] * N, "inference": [0.5] * N}),
    # single-hop learned to answer after searching; comparison rose by naming one of the two entities
    "after RL": stage({"single_hop": [1.0] * 20 + [0.0] * 10, "comparison": [1.0] * 15 + [0.0] * 15,
                       "inference": [0.5] * N}, searches=2.0),
    "no search": stage({"single_hop": [0.0] * N, "comparison": [1.0] * 15 + [0.0] * 15, "inference": [0.0] * N},
                       searches=0.0),
}


def test_rows_per_type_with_paired_changes_and_guessing_flag() -> None:
    table = type_table(RESULTS, "after cold start", "after RL", "no search")
    assert list(table.index) == ["single_hop", "comparison", "inference", ALL, WITHOUT_GUESSED]
    single, comparison, inference = table.loc["single_hop"], table.loc["comparison"], table.loc["inference"]
    assert single["ΔF1"] == pytest.approx(2 / 3) and single["ΔF1 95% low"] > 0
    assert single["searches after RL"] == 2.0 and single["questions"] == N
    assert not single["gained by guessing"] and single["verdict"] == "gain"
    # comparison's rise is as large with a search budget of 0: searching is not shown to help
    assert comparison["ΔF1"] == pytest.approx(0.5) and comparison["search gain"] == pytest.approx(0.0)
    assert comparison["gained by guessing"] and comparison["verdict"] == "gain without search shown to help"
    assert inference["ΔF1"] == 0 and inference["verdict"] == "no clear change"
    assert table.loc[ALL, "n"] == 3 * N and table.loc[ALL, "ΔF1"] == pytest.approx((2 / 3 + 0.5) / 3)
    # leaving the guessed type out, the overall change is single-hop's and inference's alone
    assert table.loc[WITHOUT_GUESSED, "n"] == 2 * N
    assert table.loc[WITHOUT_GUESSED, "ΔF1"] == pytest.approx(1 / 3)


def test_without_no_search_stage_guessing_is_unknown_and_no_extra_row() -> None:
    table = type_table(RESULTS, "after cold start", "after RL")
    assert "F1 no search" not in table and WITHOUT_GUESSED not in table.index
    assert table["gained by guessing"].isna().all()
    assert table.loc["comparison", "verdict"] == "gain"


def test_a_drop_is_a_loss() -> None:
    table = type_table(RESULTS, "after RL", "after cold start")
    assert table.loc["single_hop", "verdict"] == "loss"


def test_clear_errors() -> None:
    with pytest.raises(KeyError, match="'after RL' was not evaluated; evaluated stages: after cold start"):
        type_table({"after cold start": RESULTS["after cold start"]}, "after cold start", "after RL")
    twice = EvalResult(pd.concat([RESULTS["after RL"].records] * 2))
    with pytest.raises(ValueError, match="more than once"):
        type_table({"a": RESULTS["after cold start"], "b": twice}, "a", "b")


def test_figure_marks_the_guessed_type() -> None:
    fig = type_change_bars(type_table(RESULTS, "after cold start", "after RL", "no search"))
    left, right = fig.axes
    hatched = [bar.get_hatch() for bar in left.patches]
    assert hatched.count("//") == 1 and hatched[1] == "//"  # comparison, the second type
    assert "red: gained by guessing" in left.get_title()
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["after RL", "no search"]
    plain = type_change_bars(type_table(RESULTS, "after cold start", "after RL"))
    assert len(plain.axes) == 1

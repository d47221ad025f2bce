"""Metrics by name (ours and the per-paper variants) on hand-worked cases, the scoring command, and R1-Searcher's
Table 2 ACC_R reproduced from its released traces."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchrl.core.registry import UnknownNameError
from searchrl.metrics.answers import cover_exact_match, exact_match, f1_score
from searchrl.metrics.score_file import main, score_file
from searchrl.metrics.scoring import (
    METRICS,
    cover_exact_match_r1_searcher,
    exact_match_r1_searcher,
    f1_score_r1_searcher,
    f1_score_r_search,
    mean_scores,
    metric,
    normalize_answer_r1_searcher,
)

# -- our metrics, hand-worked ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "gold", "em", "f1", "cem"),
    [
        ("The Eiffel Tower!", "eiffel tower", 1.0, 1.0, 1.0),  # article and punctuation go
        ("Eiffel-Tower", "Eiffel Tower", 0.0, 0.0, 0.0),  # "eiffeltower": the hyphen is deleted, not a space
        ("Yes.", "yes", 1.0, 1.0, 1.0),
        ("no it is not", "no", 0.0, 0.0, 1.0),  # F1: a yes/no answer only matches itself; cover-EM finds "no"
        ("the cat sat on a mat", "cat on mat", 0.0, 6 / 7, 0.0),  # "cat sat on mat" vs 3 words: 2*3/(4+3)
        ("Barack Obama Jr", ["Obama", "Michelle Obama"], 0.0, 0.5, 1.0),  # best gold: 2*1/(3+1) beats 2*1/(3+2)
        ("Paris, France", ["London", "paris france"], 1.0, 1.0, 1.0),
        ("He was born in 1990.", "1", 0.0, 0.0, 0.0),  # whole words only: "1" is not in "1990"
        ("martial arts", "art", 0.0, 0.0, 0.0),
        ("Smith, John", "John Smith", 0.0, 1.0, 0.0),  # F1 ignores order, cover-EM does not
        ("Tom's Diner", "Tom", 0.0, 0.0, 0.0),  # "toms diner"
        (None, ["anything"], 0.0, 0.0, 0.0),
    ],
)
def test_our_metrics_hand_worked(prediction, gold, em, f1, cem):
    assert exact_match(prediction, gold) == em
    assert f1_score(prediction, gold) == pytest.approx(f1)
    assert cover_exact_match(prediction, gold) == cem
    assert metric("em")(prediction, gold) == em  # the registry hands back the same functions
    assert metric("f1")(prediction, gold) == pytest.approx(f1)
    assert metric("cem")(prediction, gold) == cem


# -- the per-paper variants, where they part from ours -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("Tom's_Diner, 1,000", "tom s diner 1 000"),  # punctuation and "_" become spaces
        ("Ocean\u2019s Eleven", "ocean s eleven"),  # the typographic apostrophe too
        ("The  Theatre of the Absurd.", "theatre of absurd"),
        ("True", "yes"),
        ("False", "no"),
        (" True", "true"),  # only the exact string "True" is read as yes
        ("", ""),
    ],
)
def test_r1_searcher_normalisation(raw, normalised):
    assert normalize_answer_r1_searcher(raw) == normalised


@pytest.mark.parametrize(
    ("prediction", "gold", "ours", "theirs"),
    [
        ("Smith, John", "John Smith", 0.0, 1.0),  # any order
        ("New and old York", "New York", 0.0, 1.0),  # not adjacent
        ("Tom's Diner", "Tom", 0.0, 1.0),  # "tom s diner"
        ("New_York City", "new york", 0.0, 1.0),  # ours: "newyork city"
        ("Ocean\u2019s Eleven", "Ocean", 0.0, 1.0),  # ours keeps "ocean’s" as one word
        ("True", "yes", 0.0, 1.0),
        ("1,000 people", "1000", 1.0, 0.0),  # theirs splits "1 000": the variant can also be lower
        ("A Tale of Two Cities", "tale of two cities", 1.0, 1.0),
        ("in the New York area", ["Boston", "new york"], 1.0, 1.0),
        ("Boston", "The", 0.0, 0.0),  # a gold that normalises to nothing covers nothing
        (None, "Paris", 0.0, 0.0),
    ],
)
def test_cem_r1_searcher_against_ours(prediction, gold, ours, theirs):
    assert cover_exact_match(prediction, gold) == ours
    assert cover_exact_match_r1_searcher(prediction, gold) == theirs
    assert metric("cem:r1_searcher")(prediction, gold) == theirs


def test_em_and_f1_r1_searcher_against_ours():
    assert (exact_match("Jean-Paul", "Jean Paul"), exact_match_r1_searcher("Jean-Paul", "Jean Paul")) == (0.0, 1.0)
    assert (exact_match("False", "no"), exact_match_r1_searcher("False", "no")) == (0.0, 1.0)
    assert exact_match_r1_searcher(" True", "yes") == 0.0
    assert exact_match_r1_searcher(None, "yes") == 0.0
    # [jean, paul, sartre] vs [paul, sartre]: 2*2/(3+2); ours [jeanpaul, sartre] vs [paul, sartre]: 2*1/(2+2)
    assert f1_score_r1_searcher("Jean-Paul Sartre", "Paul Sartre") == pytest.approx(0.8)
    assert f1_score("Jean-Paul Sartre", "Paul Sartre") == pytest.approx(0.5)
    assert f1_score_r1_searcher("no", "no it is not") == 0.0  # the same yes/no rule as ours
    assert (f1_score("True", "yes"), f1_score_r1_searcher("True", "yes")) == (0.0, 1.0)


def test_f1_r_search_drops_the_yes_no_rule():
    # [no] vs [no, it, is, not]: 2*1/(1+4)
    assert f1_score_r_search("no", "no it is not") == pytest.approx(0.4)
    assert f1_score("no", "no it is not") == 0.0
    assert f1_score_r_search("yes", "no") == 0.0
    assert f1_score_r_search("the cat sat on a mat", "cat on mat") == pytest.approx(6 / 7)  # elsewhere as ours
    assert f1_score_r_search(None, "no") == 0.0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab xyz", max_size=12), st.text(alphabet="ab xyz", max_size=6))
def test_bag_of_words_cover_contains_ours_without_punctuation(prediction, gold):
    # Without punctuation both normalise alike, and whole words in order are in particular a bag of words.
    if cover_exact_match(prediction, gold):
        assert cover_exact_match_r1_searcher(prediction, gold) == 1.0


def test_bag_of_words_cover_holds_where_ours_does_and_beyond():
    assert cover_exact_match("b xy z", "xy") == cover_exact_match_r1_searcher("b xy z", "xy") == 1.0
    assert cover_exact_match("z y x", "x y") == 0.0 and cover_exact_match_r1_searcher("z y x", "x y") == 1.0


# -- the registry ------------------------------------------------------------------------------------------------


def test_registry_names_and_spellings():
    assert set(METRICS.names()) == {"em", "f1", "cem", "em:r1_searcher", "f1:r1_searcher", "cem:r1_searcher",
                                    "f1:r_search"}
    assert metric("CEM:R1-Searcher") is cover_exact_match_r1_searcher
    assert metric(" f1:R-Search ") is f1_score_r_search


def test_unknown_metric_names_the_nearest_and_lists_the_known():
    with pytest.raises(UnknownNameError, match=r"did you mean 'cem:r1_searcher'.*known: cem, cem:r1_searcher"):
        metric("cem:r1searcher")  # a mistyped variant, not an import of module "cem"
    with pytest.raises(UnknownNameError, match=r"did you mean 'cem'"):
        metric("cme")


def test_a_users_metric_by_import_path(tmp_path):
    module = tmp_path / "my_metrics.py"
    module.write_text("def first_letter(prediction, golden_answers):\n"
                      "    return float(bool(prediction) and prediction[0] == golden_answers[0][0])\n")
    name = f"{module}:first_letter"
    assert mean_scores(["Paris", "Rome", None], [["Pisa"], ["Milan"], ["x"]], [name]) == {name: pytest.approx(1 / 3)}


def test_mean_scores_hand_worked():
    scores = mean_scores(["Paris", None, "Lyon"], ["Paris", "Rome", ["Lyon", "Lyons"]], ["em", "cem"])
    assert scores == {"em": pytest.approx(2 / 3), "cem": pytest.approx(2 / 3)}
    with pytest.raises(ValueError, match="2 predictions for 1"):
        mean_scores(["a", "b"], ["a"], ["em"])


# -- the command -------------------------------------------------------------------------------------------------

ROWS = [
    {"pred": "Paris", "answer": "paris"},
    {"pred": None, "golden_answers": ["Rome"]},  # no prediction: scored 0; gold falls back to golden_answers
    {"pred": "Jean-Paul Sartre", "answer": ["Paul Sartre"]},
    {"pred": "Smith, John", "answer": "John Smith"},
]


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_command_scores_and_ends_with_json(tmp_path, capsys):
    file = _write(tmp_path / "preds.jsonl", ROWS)
    status = main([str(file), "--prediction", "pred", "--metric", "em", "--metric", "f1", "--metric", "cem",
                   "--metric", "cem:r1_searcher"])
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert result["n"] == 4 and result["missing_predictions"] == 1 and result["file"] == str(file)
    # em 1,0,0,0; f1 1, 0, 0.5 ([jeanpaul, sartre] vs [paul, sartre]), 1; cem 1,0,0,0; bag-of-words 1,0,1,1
    assert result["metrics"] == {"em": 0.25, "f1": pytest.approx(0.625), "cem": 0.25, "cem:r1_searcher": 0.75}
    assert any("cem:r1_searcher" in line and "75.0" in line for line in lines[:-1])
    assert any("1 rows have no prediction" in line for line in lines[:-1])


def test_command_defaults_and_explicit_gold(tmp_path, capsys):
    rows = [{"out": "Lyon", "gold": "Lyon", "answer": "Paris"}]
    file = _write(tmp_path / "preds.jsonl", rows)
    assert main([str(file), "--prediction", "out"]) == 0
    default = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert default["metrics"] == {"em": 0.0, "f1": 0.0, "cem": 0.0}  # answer "Paris" wins over the unnamed "gold"
    assert main([str(file), "--prediction", "out", "--gold", "gold", "--metric", "em"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["metrics"] == {"em": 1.0}


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        (ROWS, ["--prediction", "answer_text"], r"row 1: no prediction field 'answer_text'.*'pred'.*--prediction"),
        (ROWS, ["--prediction", "pred", "--metric", "cem:r1searcher"],
         r"unknown metric 'cem:r1searcher'.*known: cem, cem:r1_searcher, em"),
        (ROWS, ["--prediction", "pred", "--gold", "label"], r"row 1: no gold field 'label'"),
        ([{"pred": "x"}], ["--prediction", "pred"], r"no gold fields answer / golden_answers.*--gold"),
        ([{"pred": 3, "answer": "3"}], ["--prediction", "pred"], r"holds a int, not a string"),
        ([{"pred": "x", "answer": []}], ["--prediction", "pred"], r"non-empty list of strings"),
        ([], ["--prediction", "pred"], r"no rows to score"),
    ],
)
def test_command_errors_say_what_to_fix(tmp_path, capsys, rows, args, message):
    file = _write(tmp_path / "preds.jsonl", rows)
    assert main([str(file), *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert re.search(message, captured.err), captured.err


def test_command_bad_json_and_missing_file(tmp_path, capsys):
    file = tmp_path / "preds.jsonl"
    file.write_text('{"pred": "a", "answer": "a"}\n\n{"pred": \n')
    assert main([str(file), "--prediction", "pred"]) == 2
    assert f"{file}:3: not valid JSON" in capsys.readouterr().err
    assert main([str(tmp_path / "nope.jsonl"), "--prediction", "pred"]) == 2
    assert "no file" in capsys.readouterr().err
    assert main([str(file)]) == 2  # no --prediction
    assert "--prediction FIELD" in capsys.readouterr().err


def test_command_lists_metrics(capsys):
    assert main(["--list-metrics"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in METRICS.names())


def test_command_runs_as_a_module(tmp_path):
    file = _write(tmp_path / "preds.jsonl", ROWS)
    done = subprocess.run([sys.executable, "-m", "searchrl.score", str(file), "--prediction", "pred",
                           "--metric", "cem:r1_searcher"], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])["metrics"] == {"cem:r1_searcher": 0.75}


# -- R1-Searcher's released traces against its Table 2 ----------------------------------------------------------

# trace -> (ACC_R in R1-Searcher's Table 2, our whole-word cover-EM on the same predictions), in percent
TABLE2_ACC_R = {
    "hotpotqa_qwen": (65.4, 64.6),
    "hotpotqa_llama": (64.8, 63.0),
    "2wiki_qwen": (63.6, 62.4),
    "bamboogle_qwen": (52.8, 48.0),
    "bamboogle_llama": (50.4, 46.4),
}


@pytest.mark.shared_data
@pytest.mark.parametrize("trace", sorted(TABLE2_ACC_R))
def test_cem_r1_searcher_reproduces_table2(shared_data, trace):
    result = score_file(shared_data / "r1-searcher" / "traces" / f"{trace}.jsonl", "pred_ans",
                        ["cem:r1_searcher", "cem"], gold_field="answer")
    paper, ours = TABLE2_ACC_R[trace]
    assert result["missing_predictions"] == 0 and result["n"] in (125, 500)
    assert round(100 * result["metrics"]["cem:r1_searcher"], 1) == paper
    assert round(100 * result["metrics"]["cem"], 1) == ours

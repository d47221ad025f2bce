"""Evaluation: per-question scoring on scripted rollouts, summaries, the stage table and trajectory rendering."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.data.schema import Doc, make_row
from searchrl.evaluation.evaluate import EvalResult, evaluate, stage_table
from searchrl.evaluation.render import render_trajectory, render_trajectory_text, trajectory_pieces
from searchrl.protocols import get_protocol
from searchrl.rollout import RolloutConfig

ROWS = [
    make_row("q0", "When was Entity1 founded?", ["1901"], type="single_hop", hops=1, supporting_ids=["1"]),
    make_row("q1", "Which city was it?", ["New Paris"], type="bridge", hops=2, supporting_ids=["4", "5"]),
    make_row("q2", "Who knows?", ["Entity3"], type="bridge", hops=2, supporting_ids=["3"]),
    make_row("q3", "No metadata here?", ["yes"]),
]
SCRIPTS = [
    ["<search>Entity1</search>", "<answer>1901</answer>"],  # searched, exact
    ["<answer>Paris</answer>"],  # partial: F1 = 2*1/(1+2), no cover
    ["I think it is Entity3 but I will not say."],  # no answer tag
    ["<search>Entity2</search>", "<search>Entity0</search>", "<answer>The yes</answer>"],  # articles normalised
]


def _evaluate(tokenizer, scripts=SCRIPTS, rows=ROWS, **kwargs) -> EvalResult:
    gen = ScriptedGenerator(tokenizer, scripts)
    kwargs = {"rollout": RolloutConfig(max_completion_tokens=512), "progress": False, **kwargs}
    return evaluate(None, tokenizer, MiniProtocol(), FakeRetriever(), rows, generator=gen, **kwargs)


def test_metrics_are_computed_per_question(tokenizer):
    df = _evaluate(tokenizer).records.set_index("id")
    assert list(df["prediction"]) == ["1901", "Paris", "", "The yes"]
    assert list(df["em"]) == [1.0, 0.0, 0.0, 1.0]
    assert df.loc["q1", "f1"] == pytest.approx(2 / 3)
    assert list(df["cem"]) == [1.0, 0.0, 0.0, 1.0]
    assert list(df["searches"]) == [1, 0, 0, 2]
    assert list(df["answered"]) == [True, True, False, True]
    assert list(df["format_ok"]) == [True, True, False, True]
    assert list(df["qtype"]) == ["single_hop", "bridge", "bridge", "unknown"]
    assert df.loc["q0", "queries"] == ["Entity1"] and df.loc["q0", "doc_ids"][0][0] == "1"
    # Support: q0's passage "1" came back; q1 never searched; q3 has no supporting ids to judge.
    assert df.loc["q0", "support_retrieved"] is True and df.loc["q1", "support_retrieved"] is False
    assert df.loc["q3", "support_retrieved"] is None
    # Model tokens are the sampled ones only: searching adds appended (retrieved) tokens to the total alone.
    assert df.loc["q1", "model_tokens"] == df.loc["q1", "total_tokens"]
    assert df.loc["q0", "total_tokens"] > df.loc["q0", "model_tokens"] > 0
    assert "<information>" in df.loc["q0", "completion"] and df.loc["q0", "completion"].endswith("</answer>")


def test_summary_and_by_type(tokenizer):
    result = _evaluate(tokenizer)
    summary = result.summary()
    assert summary["n"] == 4
    assert summary["em"] == pytest.approx(0.5)
    assert summary["f1"] == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
    assert summary["searches"] == pytest.approx(0.75)
    assert summary["format_ok"] == pytest.approx(0.75)
    assert summary["support_retrieved"] == pytest.approx(1 / 3)  # only the three rows that name their passages
    for key in ("em", "f1", "cem", "searches", "format_ok", "answered", "model_tokens", "n"):
        assert key in summary
    table = result.by_type()
    assert list(table.index) == ["single_hop", "bridge", "unknown"]
    assert list(table["n"]) == [1, 2, 1]
    assert table.loc["bridge", "f1"] == pytest.approx(1 / 3)
    assert {"em", "f1", "searches", "format_ok"} <= set(table.columns)


def test_results_are_written_and_read_back(tokenizer, tmp_path):
    result = _evaluate(tokenizer)
    payload = json.loads(result.to_json(tmp_path / "eval.json").read_text())
    assert payload["summary"]["n"] == 4 and set(payload["by_type"]) == {"single_hop", "bridge", "unknown"}
    assert payload["config"]["protocol"] == "mini" and payload["config"]["greedy"] is True
    lines = result.trajectories_jsonl(tmp_path / "traj.jsonl").read_text().splitlines()
    assert len(lines) == 4
    first = json.loads(lines[0])
    assert first["id"] == "q0" and first["queries"] == ["Entity1"] and "<information>" in first["completion"]


def test_stage_table_has_paper_columns(tokenizer):
    before = _evaluate(tokenizer, scripts=[["<answer>x</answer>"]] * 4)
    after = _evaluate(tokenizer)
    table = stage_table({"untrained": before, "after cold start": after})
    assert list(table.index) == ["untrained", "after cold start"]
    assert list(table.columns) == ["EM", "F1", "searches/question", "format-valid rate", "F1 single_hop",
                                   "F1 bridge", "F1 unknown", "F1 multi-hop", "searches multi-hop",
                                   "searches single-hop", "repeated-query rate", "ΔF1 vs previous", "ΔF1 95% low",
                                   "ΔF1 95% high", "ΔF1 questions"]
    assert table.loc["untrained", "EM"] == 0.0 and table.loc["after cold start", "EM"] == pytest.approx(0.5)
    assert table.loc["after cold start", "searches/question"] == pytest.approx(0.75)
    assert table.loc["after cold start", "F1 multi-hop"] == pytest.approx(1 / 3)
    # The two bridge rows never searched; q0 searched once and q3 (no metadata: one hop) twice.
    assert table.loc["after cold start", "searches multi-hop"] == 0.0
    assert table.loc["after cold start", "searches single-hop"] == pytest.approx(1.5)
    assert table.loc["after cold start", "repeated-query rate"] == 0.0
    with pytest.raises(ValueError, match="non-empty dict"):
        stage_table({})


def test_a_query_asked_twice_is_counted(tokenizer):
    # Case, punctuation and articles do not make a query new; another entity does.
    scripts = [["<search>Entity1</search>", "<search>the entity1?</search>", "<answer>1901</answer>"],
               ["<search>Entity1</search>", "<search>Entity2</search>", "<answer>x</answer>"],
               ["<answer>x</answer>"], ["<answer>x</answer>"]]
    result = _evaluate(tokenizer, scripts=scripts)
    assert list(result.records["repeated_query"]) == [True, False, False, False]
    assert result.summary()["repeated_query"] == pytest.approx(0.25)
    assert stage_table({"after RL": result}).loc["after RL", "repeated-query rate"] == pytest.approx(0.25)


def test_render_marks_retrieved_spans_and_escapes_html(tokenizer):
    protocol = MiniProtocol()
    retriever = FakeRetriever()
    retriever.docs[1] = Doc("1", "Entity1", "Entity1 <script>alert(1)</script> & co.")
    gen = ScriptedGenerator(tokenizer, [["<search>Entity1 & <b>x</b></search>", "<answer>a < b</answer>"]])
    result = evaluate(None, tokenizer, protocol, retriever, ROWS[:1], generator=gen,
                      rollout=RolloutConfig(max_completion_tokens=512), progress=False)
    record = result.records.iloc[0]
    page = render_trajectory(record, protocol)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&amp; co." in page
    # The observation sits inside the grey "retrieved" box; the query and the answer are marked, not boxed.
    box_start = page.index('class="retrieved"')
    box_end = page.index("</span>", box_start)
    assert box_start < page.index("alert(1)") < box_end and "retrieved</small>" in page[box_start:box_end]
    assert '<mark class="query"' in page and "Entity1 &amp; &lt;b&gt;x&lt;/b&gt;" in page
    assert '<mark class="answer"' in page and "&lt;answer&gt;a &lt; b&lt;/answer&gt;" in page
    assert "When was Entity1 founded?" in page  # the record's header
    text = render_trajectory_text(record, protocol)
    assert "[RETRIEVED]" in text and "[/RETRIEVED]" in text
    inside = text.split("[RETRIEVED]")[1].split("[/RETRIEVED]")[0]
    assert "<script>" in inside and all(line.startswith("░ ") for line in inside.strip("\n").splitlines())
    assert "»<answer>a < b</answer>«" in text


def test_render_splits_pieces_for_every_protocol():
    pp = get_protocol("r1_searcher_pp")
    text = ("Think <|begin_external_search|> q <|end_external_search|>" + pp.format_observation([]) +
            "So \\boxed{\\text{A}} done")
    kinds = [kind for kind, piece in trajectory_pieces(text, pp) if piece.strip()]  # blank framing aside
    assert kinds == ["text", "query", "retrieved", "text", "answer", "text"]
    assert dict(trajectory_pieces(text, pp))["answer"] == "\\boxed{\\text{A}}"
    # An observation left open (the budget cut it) runs to the end; a string input works without a record.
    sr1 = get_protocol("search_r1")
    pieces = trajectory_pieces("<search>a</search><information>Doc 1 cut off", sr1)
    assert pieces[-1] == ("retrieved", "<information>Doc 1 cut off")
    assert "Question:" in render_trajectory("<answer>x</answer>", sr1, question="Q?")
    with pytest.raises(TypeError, match="completion"):
        render_trajectory({"question": "no completion"}, sr1)


def test_bad_rows_give_clear_errors(tokenizer):
    with pytest.raises(ValueError, match="at least one"):
        _evaluate(tokenizer, rows=[])
    with pytest.raises(ValueError, match="golden_answers"):
        _evaluate(tokenizer, rows=[{"id": "x", "question": "q", "golden_answers": []}])
    with pytest.raises(TypeError, match="question"):
        _evaluate(tokenizer, rows=[{"id": "x", "golden_answers": ["a"]}])
    with pytest.raises(ValueError, match="need a model"):
        evaluate(None, tokenizer, "search_r1", FakeRetriever(), ROWS, progress=False)


def test_real_generation_batches_and_restores_train_mode(tiny_policy):
    model, tokenizer = tiny_policy
    model.train()
    rows = [make_row(f"r{i}", f"Question number {i}?", ["x"], type="single_hop", hops=1) for i in range(3)]
    result = evaluate(model, tokenizer, "search_r1", FakeRetriever(), rows, batch_size=2,
                      rollout=RolloutConfig(max_completion_tokens=6),
                      progress=False)
    assert model.training  # put back in train mode after the greedy rollouts
    assert len(result.records) == 3 and isinstance(result.records, pd.DataFrame)
    assert (result.records["total_tokens"] <= 6).all() and result.config["batch_size"] == 2
    assert result.config["protocol"] == "search_r1"
    # Greedy decoding: the same questions give the same completions.
    again = evaluate(model, tokenizer, "search_r1", FakeRetriever(), rows, batch_size=2,
                      rollout=RolloutConfig(max_completion_tokens=6),
                     progress=False)
    assert list(again.records["completion"]) == list(result.records["completion"])


def test_paired_bootstrap_interval_and_stage_deltas():
    from searchrl.core.stats import paired_bootstrap

    same = paired_bootstrap([0.0, 1.0, 0.5], [0.0, 1.0, 0.5])
    assert same == (0.0, 0.0, 0.0)
    mean, low, high = paired_bootstrap([0.0] * 50 + [1.0] * 50, [1.0] * 50 + [1.0] * 50, seed=1)
    assert mean == 0.5 and 0.38 < low < 0.5 < high < 0.62  # binomial: sd of the mean 0.05
    with pytest.raises(ValueError, match="equally long"):
        paired_bootstrap([1.0], [1.0, 2.0])
    ids = [f"q{i}" for i in range(4)]
    before = EvalResult(pd.DataFrame({"id": ids, "em": [0.0] * 4, "f1": [0.0, 0.5, 0.0, 0.0], "searches": [1] * 4,
                                      "format_ok": [True] * 4, "qtype": ["a"] * 4, "hops": [1] * 4}))
    after = EvalResult(before.records.assign(f1=[1.0, 0.5, 1.0, 0.0]))
    table = stage_table({"before": before, "after": after})
    assert table.loc["after", "ΔF1 vs previous"] == pytest.approx(0.5)
    assert table.loc["after", "ΔF1 95% low"] <= 0.5 <= table.loc["after", "ΔF1 95% high"]
    assert pd.isna(table.loc["before", "ΔF1 vs previous"])


def test_stage_deltas_pair_on_the_questions_both_stages_saw():
    # The untrained stage may see a prefix of the questions (n_eval_untrained): the next stage's change is
    # measured on those shared questions only.
    ids = [f"q{i}" for i in range(4)]
    full = EvalResult(pd.DataFrame({"id": ids, "em": [0.0] * 4, "f1": [1.0, 1.0, 0.0, 0.0], "searches": [1] * 4,
                                    "format_ok": [True] * 4, "qtype": ["a"] * 4, "hops": [1] * 4}))
    subset = EvalResult(full.records.iloc[:2].assign(f1=[0.0, 0.0]))
    table = stage_table({"untrained": subset, "after": full})
    assert table.loc["after", "ΔF1 vs previous"] == pytest.approx(1.0)  # q0, q1: 0 -> 1; q2, q3 not counted
    assert table["ΔF1 questions"].tolist() == [0, 2]
    disjoint = EvalResult(full.records.assign(id=[f"x{i}" for i in range(4)]))
    unpaired = stage_table({"a": disjoint, "b": full}).loc["b"]
    assert pd.isna(unpaired["ΔF1 vs previous"]) and unpaired["ΔF1 questions"] == 0


def test_quarter_gain_compares_the_first_and_last_quarter_of_a_curve():
    from searchrl.core.stats import quarter_gain

    # 8 points: quarters of 2; NaN (a step that logged no such value) is dropped before cutting.
    got = quarter_gain([0.0, 0.2, float("nan"), 0.5, 0.1, 0.3, 0.4, 0.6, 1.0])
    assert got == pytest.approx({"first": 0.1, "last": 0.8, "gain": 0.7, "points": 8})
    assert quarter_gain([0.4, 0.1]) == pytest.approx({"first": 0.4, "last": 0.1, "gain": -0.3, "points": 2})
    assert quarter_gain([0.5])["points"] == 1 and quarter_gain([0.5])["gain"] != quarter_gain([0.5])["gain"]  # NaN

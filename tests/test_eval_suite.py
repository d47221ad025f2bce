"""The evaluation harness's own logic: which checkpoint a model entry means, intervals, paired differences, the
papers' layouts fed only with the datasets they show (the notebook's smoke run covers the rest end to end)."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

from searchrl.config import RunConfig
from searchrl.evaluation.evaluate import EvalResult
from searchrl.experiments.eval_suite import EvalSuite, _bootstrap_interval, method_label, resolve_checkpoint


def _saved_model(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_a_run_folder_means_its_newest_policy_under_its_own_protocol(tmp_path):
    run = tmp_path / "20260101-000000-ab12-demo"
    cold = _saved_model(run / "checkpoints" / "cold_start")
    rl = _saved_model(run / "checkpoints" / "rl")
    (run / "checkpoints" / "checkpoint-8").mkdir()  # a trainer checkpoint without a policy: never chosen
    os.utime(cold, (time.time() - 100, time.time() - 100))
    (run / "params.yaml").write_text("protocol: r1_searcher\nseed: 0\n")
    assert resolve_checkpoint(str(run)) == (str(rl), "r1_searcher")
    assert resolve_checkpoint(str(cold)) == (str(cold), "r1_searcher")
    assert method_label(str(cold)) == "20260101-000000-ab12-demo/cold_start"
    assert resolve_checkpoint("smollm2-135m-instruct") == ("smollm2-135m-instruct", None)
    with pytest.raises(FileNotFoundError, match="neither a saved model"):
        resolve_checkpoint(str(tmp_path))


def test_interval_of_a_mean_brackets_it_and_shrinks_with_more_questions():
    values = np.array([0.0, 1.0] * 10)
    low, high = _bootstrap_interval(values, seed=0)
    assert low < 0.5 < high and 0.3 < high - low <= 0.55  # about 2 x 1.96 x 0.112 for 20 coin flips
    low_big, high_big = _bootstrap_interval(np.array([0.0, 1.0] * 200), seed=0)
    assert high_big - low_big < (high - low) / 3
    assert all(np.isnan(_bootstrap_interval(np.array([1.0]), seed=0)))


def _result(ids, f1):
    return EvalResult(records=pd.DataFrame({"id": ids, "f1": f1, "em": f1, "cem": f1, "searches": 1.0,
                                            "format_ok": 1.0, "model_tokens": 10.0, "qtype": "single_hop"}))


@pytest.fixture
def suite(tmp_path):
    cfg = RunConfig.from_params(None, model="tiny-random", output_root=str(tmp_path), benchmarks=["synthetic"],
                                paper_layouts=["search_r1_table2"])
    out = EvalSuite.__new__(EvalSuite)  # no model or tokenizer needed to report on given results
    out.cfg, out.run_dir, out._judge = cfg, tmp_path / "run", None
    out.run_dir.mkdir()
    ids = [f"q{i}" for i in range(40)]
    out.results = {("hotpotqa", "naive"): _result(ids, [0.0] * 40),
                   ("hotpotqa", "policy"): _result(ids, [1.0] * 30 + [0.0] * 10),
                   ("synthetic", "policy"): _result(ids[:5], [1.0] * 5)}
    return out


def test_tidy_and_paired_differences_are_over_the_same_questions(suite):
    tidy = suite.tidy()
    row = tidy[(tidy.method == "policy") & (tidy.dataset == "hotpotqa") & (tidy.metric == "f1")].iloc[0]
    assert row["value"] == pytest.approx(0.75) and row["n"] == 40 and row["ci_low"] < 0.75 < row["ci_high"]
    paired = suite.paired()  # reference: the first method run, naive
    assert list(paired["method"]) == ["policy"] and paired.iloc[0]["difference"] == pytest.approx(0.75)
    assert paired.iloc[0]["ci_low"] > 0.5
    assert (suite.run_dir / "paired_naive_f1.csv").exists()


def test_tool_summaries_report_each_evidence_tool_against_its_own_policy(suite):
    assert suite.tool_summaries().empty and not (suite.run_dir / "tool_summary.csv").exists()
    tool = _result([f"q{i}" for i in range(4)], [1.0, 0.0, 1.0, 1.0])
    tool.records["policy_f1"] = [0.0, 0.0, 1.0, 0.0]
    for name in ("em", "cem"):
        tool.records[f"policy_{name}"] = tool.records["policy_f1"]
    tool.records["has_evidence"] = [True, True, False, True]
    suite.results[("synthetic", "evidence_tool:/runs/a")] = tool
    (row,) = suite.tool_summaries().to_dict("records")
    assert row["method"] == "evidence_tool:/runs/a" and row["dataset"] == "synthetic"
    assert row["tool_f1"] == pytest.approx(0.75) and row["policy_f1"] == pytest.approx(0.25)
    assert row["tool_minus_policy_f1"] == pytest.approx(0.5) and row["evidence_rate"] == pytest.approx(0.75)
    assert (suite.run_dir / "tool_summary.csv").exists()


def test_paper_tables_take_only_the_datasets_the_paper_shows(suite):
    tables = suite.paper_tables()
    cells = tables["search_r1_table2"].cells
    ours = cells.xs("searchrl", level="source")
    assert ours.loc[(slice(None), "policy"), ("HotpotQA", "EM")].iloc[0].startswith("0.750")
    assert (suite.run_dir / "tables" / "search_r1_table2.md").exists()


def test_mistyped_evaluation_names_fail_before_anything_runs():
    from searchrl.config import ConfigError

    with pytest.raises(ConfigError) as error:
        RunConfig.from_params(None, benchmarks=["hotpotq"], baselines=["ragg", "prompted_search:r1searcher"],
                              eval_metrics=["cem:r1searcher"], paper_layouts=["search_r1_tabel2"], judge="gpt")
    text = str(error.value)
    for hint in ("'hotpotqa'", "'rag'", "'r1_searcher'", "'cem:r1_searcher'", "judge:", "paper_layouts:"):
        assert hint in text, hint
    cfg = RunConfig.from_params(None, benchmarks=["synthetic", "r1s_2wiki"], baselines=["prompted_search:r_search"],
                                eval_metrics=["f1:r_search"], judge="openai:m@http://localhost:1/v1")
    assert cfg.benchmarks == ["synthetic", "r1s_2wiki"]


def test_a_resumed_suite_keeps_the_baselines_it_already_scored(suite, monkeypatch):
    from searchrl.evaluation import baselines

    rows = [{"id": f"q{i}", "question": "?"} for i in range(40)]
    result = EvalResult(records=suite.results[("hotpotqa", "policy")].records.assign(answered=True))
    suite._finish_result("hotpotqa", "rag", result)
    kept = suite.finished_result("hotpotqa", "rag", rows)
    assert kept is not None
    pd.testing.assert_series_equal(kept.records["f1"], result.records["f1"], check_dtype=False)
    assert suite.finished_result("hotpotqa", "rag", rows[:39]) is None  # other questions: score again
    assert suite.finished_result("hotpotqa", "ircot", rows) is None  # never scored
    (suite.run_dir / "trajectories" / "hotpotqa" / "rag.jsonl").write_text('{"id": "q0", "f1"')  # cut by a kill
    assert suite.finished_result("hotpotqa", "rag", rows) is None

    suite._finish_result("hotpotqa", "rag", result)
    del suite.results[("hotpotqa", "rag")]
    suite.tokenizer = None
    calls = []
    monkeypatch.setattr(baselines, "evaluate_baseline", lambda *a, **k: calls.append(a) or result)
    suite._evaluate_baseline("hotpotqa", "rag", None, object(), rows)  # not resuming: scored again
    assert len(calls) == 1
    suite.cfg = suite.cfg.replace(resume=True)
    suite._evaluate_baseline("hotpotqa", "rag", None, object(), rows)  # resuming: kept
    assert len(calls) == 1 and ("hotpotqa", "rag") in suite.results

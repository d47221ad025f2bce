"""Several seeds of one notebook: each seed its own run, then the spread over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from searchrl import runner
from searchrl.seeds import format_curves, format_spread, seed_curves, seed_tables, spread, write_seed_report

ROOT = Path(__file__).resolve().parents[1]


def fake_run(folder: Path, cold_f1: float, rl_f1: float, low: float) -> Path:
    rows = [{"stage": "after cold start", "F1": cold_f1, "EM": cold_f1, "ΔF1 vs previous": None},
            {"stage": "after RL", "F1": rl_f1, "EM": rl_f1, "ΔF1 vs previous": rl_f1 - cold_f1,
             "ΔF1 95% low": low, "ΔF1 95% high": rl_f1 - cold_f1 + 0.1}]
    (folder / "eval").mkdir(parents=True)
    (folder / "eval" / "table.json").write_text(json.dumps(rows))
    return folder


def test_spread_over_seeds(tmp_path):
    runs = {0: fake_run(tmp_path / "a", 0.2, 0.4, 0.1), 1: fake_run(tmp_path / "b", 0.3, 0.3, -0.1),
            2: tmp_path / "missing"}  # a seed whose run wrote no table is left out
    tables = seed_tables(runs)
    assert sorted(tables["seed"].unique()) == [0, 1]
    table = spread(tables)
    assert list(table.index) == ["after cold start", "after RL"]
    assert table.loc["after RL", "F1 mean"] == pytest.approx(0.35)
    assert table.loc["after RL", "F1 sd"] == pytest.approx(pd.Series([0.4, 0.3]).std())
    assert table.loc["after RL", "ΔF1 vs previous mean"] == pytest.approx(0.1)
    assert table.loc["after RL", "seeds with ΔF1 > 0"] == 1
    assert "interval above 0 in 1 of 2 seeds" in format_spread(table)
    report = write_seed_report(runs, tmp_path / "report", failed=[2])
    assert report.equals(table)
    for name in ("seeds.csv", "spread.csv", "spread.png", "runs.json"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    assert json.loads((tmp_path / "report" / "runs.json").read_text())["failed_seeds"] == [2]
    with pytest.raises(ValueError, match="none of the runs"):
        seed_tables({0: tmp_path / "missing"})


def test_curve_trends_of_each_seed_are_collected(tmp_path):
    runs = {0: fake_run(tmp_path / "a", 0.2, 0.4, 0.1), 1: fake_run(tmp_path / "b", 0.3, 0.3, -0.1)}
    trend = {"first": 0.1, "last": 0.3, "gain": 0.2, "points": 16}
    (runs[0] / "eval" / "curve.json").write_text(json.dumps({"reward": trend}))  # seed 1 logged no curve
    curves = seed_curves(runs)
    assert curves.to_dict("records") == [{"seed": 0, "metric": "reward", **trend}]
    write_seed_report(runs, tmp_path / "report")
    assert pd.read_csv(tmp_path / "report" / "curves.csv")["gain"].tolist() == [0.2]
    assert format_curves(curves) == "reward                       last quarter of steps minus first: seed 0 +0.200"


def test_runner_runs_each_seed_and_reports_the_spread(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_run_notebook(notebook, files, overrides, *, run_name, output_root, **kwargs):
        calls.append((overrides["seed"], run_name))
        seed = overrides["seed"]
        return fake_run(Path(output_root) / f"run{seed}", 0.2, 0.2 + 0.1 * seed, -0.05 + 0.1 * seed)

    monkeypatch.setattr(runner, "run_notebook", fake_run_notebook)
    code = runner.main([str(ROOT / "notebooks/quickstart.ipynb"), "-f", str(ROOT / "params/quickstart/smoke.yaml"),
                        "--output-root", str(tmp_path), "--run-name", "demo", "--seeds", "0", "1"])
    assert code == 0
    assert calls == [(0, "demo-seed0"), (1, "demo-seed1")]
    out = capsys.readouterr().out
    assert "spread over seeds [0, 1]" in out and "interval above 0 in 1 of 2 seeds" in out
    [report] = (tmp_path / "quickstart").glob("*-seeds-demo")
    assert (report / "spread.png").exists()
    assert runner.main([str(ROOT / "notebooks/quickstart.ipynb"), "--seeds", "0", "-p", "seed", "3"]) == 2

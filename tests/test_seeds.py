"""Several seeds of one notebook: each seed its own run, then the spread over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from searchrl.analysis.seeds import format_curves, format_spread, seed_curves, seed_tables, spread, write_seed_report
from searchrl.experiments import runner

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


def trajectories(folder: Path, stage: str, f1: list[float], qtype: str = "single_hop") -> None:
    rows = [{"id": f"q{i}", "qtype": qtype, "f1": v, "searches": 1.0, "format_ok": True} for i, v in enumerate(f1)]
    (folder / "trajectories").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_json(folder / "trajectories" / f"{stage}.jsonl", orient="records", lines=True)


def test_type_tables_are_read_or_rebuilt_from_trajectories(tmp_path):
    from searchrl.analysis.seeds import format_types, run_type_table, seed_types

    old = fake_run(tmp_path / "old", 0.2, 0.4, 0.1)  # a folder from before eval/type_table.json existed
    trajectories(old, "after_cold_start", [0.0] * 10)
    trajectories(old, "after_RL", [1.0] * 10)
    trajectories(old, "no_search", [1.0] * 10)  # as good without search: the rise is flagged
    rebuilt = run_type_table(old)
    # the only type was guessed, so the row without guessed types holds no question
    assert list(rebuilt["qtype"]) == ["single_hop", "all", "all but guessed types"]
    assert rebuilt.loc[2, "n"] == 0 and rebuilt.loc[2, "verdict"] == "no shared questions"
    assert rebuilt.loc[0, "ΔF1"] == 1.0 and bool(rebuilt.loc[0, "gained by guessing"])
    new = fake_run(tmp_path / "new", 0.2, 0.2, -0.1)
    (new / "eval" / "type_table.json").write_text(json.dumps(
        [{"qtype": "single_hop", "n": 10, "searches after cold start": 1.0, "searches after RL": 2.0, "ΔF1": 0.0,
          "ΔF1 95% low": -0.1, "ΔF1 95% high": 0.1, "gained by guessing": None}]))
    assert run_type_table(tmp_path / "missing") is None
    types = seed_types({0: old, 1: new, 2: tmp_path / "missing"})
    assert sorted(types["seed"].unique()) == [0, 1]
    text = format_types(types)
    assert "single_hop" in text.splitlines()[0]
    assert "seed 0 +1.000 [+1.000, +1.000] searches 1.00->1.00 guessed; seed 1 +0.000 [-0.100, +0.100] " \
           "searches 1.00->2.00" in text
    write_seed_report({0: old, 1: new}, tmp_path / "report")
    assert set(pd.read_csv(tmp_path / "report" / "types.csv")["seed"]) == {0, 1}


def test_seeds_command_reports_on_folders_run_separately(tmp_path, capsys):
    from searchrl.analysis.seeds import main

    runs = [fake_run(tmp_path / "runs" / name, 0.2, rl, low) for name, rl, low in (("a", 0.4, 0.1), ("b", 0.3, -0.1))]
    for seed, run in enumerate(runs):
        (run / "params.yaml").write_text(f"# resolved\nseed: {seed}\n")
    assert main([str(r) for r in runs] + ["--out", str(tmp_path / "report")]) == 0
    assert "interval above 0 in 1 of 2 seeds" in capsys.readouterr().out
    assert (tmp_path / "report" / "spread.csv").exists()
    assert main([str(r) for r in runs] + ["--name", "x"]) == 0  # default folder: beside the runs
    assert len(list((tmp_path / "runs").glob("*-seeds-x"))) == 1
    (runs[1] / "params.yaml").write_text("seed: 0\n")
    with pytest.raises(SystemExit):
        main([str(r) for r in runs])
    assert "both ran seed 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert "not a run folder" in capsys.readouterr().err

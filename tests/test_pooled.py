"""Changes pooled over seeds: averaged per question, bootstrapped over questions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from searchrl.analysis.pooled import format_interval, lever_difference, pooled_change, seed_mean
from searchrl.core.stats import paired_bootstrap


def run(folder: Path, stages: dict[str, list[float]], ids: list[str] | None = None, seed: int = 0) -> Path:
    (folder / "trajectories").mkdir(parents=True)
    (folder / "params.yaml").write_text(f"seed: {seed}\n")
    for stage, f1 in stages.items():
        rows = [{"id": (ids or [f"q{i}" for i in range(len(f1))])[i], "qtype": "single_hop", "f1": v, "searches": 1.0,
                 "format_ok": True} for i, v in enumerate(f1)]
        pd.DataFrame(rows).to_json(folder / "trajectories" / f"{stage.replace(' ', '_')}.jsonl", orient="records",
                                   lines=True)
    return folder


def test_seeds_that_agree_do_not_narrow_the_interval(tmp_path):
    rng = np.random.default_rng(1)
    before = rng.uniform(0, 1, 100).round(2).tolist()
    after = np.clip(np.array(before) + rng.normal(0.05, 0.3, 100), 0, 1).round(2).tolist()
    one = run(tmp_path / "s0", {"after cold start": before, "after RL": after})
    copies = [one] + [run(tmp_path / f"s{i}", {"after cold start": before, "after RL": after}, seed=i)
                      for i in (1, 2)]
    single = paired_bootstrap(before, after)
    pooled = pooled_change(copies, "after cold start", "after RL")
    # three seeds that change every question alike carry one seed's information: the interval stays as wide
    # (resampling (seed, question) pairs as if independent would shrink it by about sqrt(3))
    assert (pooled["mean"], pooled["low"], pooled["high"]) == pytest.approx(single)
    assert pooled["questions"] == 100 and pooled["seeds"] == 3


def test_pooled_change_averages_each_question_over_seeds(tmp_path):
    a = run(tmp_path / "a", {"after cold start": [0, 0, 1, 1], "after RL": [1, 0, 1, 1]})
    b = run(tmp_path / "b", {"after cold start": [0, 0, 1, 1], "after RL": [1, 1, 0, 1]}, seed=1)
    change = pooled_change([a, b], "after cold start", "after RL")
    assert change["mean"] == pytest.approx((1 + 0.5 - 0.5 + 0) / 4)
    assert change["low"] <= change["mean"] <= change["high"]
    assert format_interval(change).startswith("ΔF1 +0.250 [")
    missing = pooled_change([a, tmp_path / "nothing"], "after cold start", "after RL")
    assert missing["questions"] == 0 and np.isnan(missing["mean"])
    assert "no question" in format_interval(missing)


def test_lever_difference_pairs_questions_across_both_sets(tmp_path):
    x = [run(tmp_path / "x0", {"after RL": [1.0, 0.0, 0.5]}, ids=["a", "b", "c"]),
         run(tmp_path / "x1", {"after RL": [1.0, 1.0, 0.5]}, ids=["a", "b", "c"], seed=1)]
    y = [run(tmp_path / "y0", {"after RL": [0.0, 0.5, 0.0]}, ids=["b", "a", "d"])]  # question d only here
    assert seed_mean(x, "after RL").to_dict() == {"a": 1.0, "b": 0.5, "c": 0.5}
    difference = lever_difference(x, y)
    # shared questions a and b: (1.0 - 0.5) and (0.5 - 0.0)
    assert difference["questions"] == 2 and difference["mean"] == pytest.approx(0.5)
    assert difference["seeds"] == 2 and difference["seeds against"] == 1
    assert lever_difference(x, y, stage="after cold start")["questions"] == 0


def test_seeds_command_reports_the_pooled_change_and_another_lever(tmp_path, capsys):
    import json

    from searchrl.analysis.seeds import main, pooled_changes, seed_tables, spread

    runs = []
    for seed, gain in enumerate((0.1, 0.3)):
        folder = run(tmp_path / f"z{seed}", {"after cold start": [0.2] * 10, "after RL": [0.2 + gain] * 10},
                     seed=seed)
        (folder / "eval").mkdir()
        (folder / "eval" / "table.json").write_text(json.dumps(
            [{"stage": "after cold start", "F1": 0.2, "ΔF1 vs previous": None},
             {"stage": "after RL", "F1": 0.2 + gain, "ΔF1 vs previous": gain, "ΔF1 95% low": gain,
              "ΔF1 95% high": gain}]))
        runs.append(folder)
    tables = seed_tables(dict(enumerate(runs)))
    table = spread(tables, pooled_changes(dict(enumerate(runs)), tables))
    assert table.loc["after RL", "ΔF1 pooled"] == pytest.approx(0.2)
    assert table.loc["after RL", "ΔF1 pooled questions"] == 10
    other = run(tmp_path / "other", {"after RL": [0.25] * 10}, seed=5)
    assert main([str(r) for r in runs] + ["--out", str(tmp_path / "report"), "--against", str(other)]) == 0
    out = capsys.readouterr().out
    assert "pooled over seeds +0.200 [+0.200, +0.200] on 10 questions" in out
    assert "minus --against (seeds [5]): F1 +0.150 [+0.150, +0.150] on 10 questions" in out
    saved = json.loads((tmp_path / "report" / "against.json").read_text())
    assert saved["mean"] == pytest.approx(0.15) and saved["stage"] == "after RL"
    elsewhere = run(tmp_path / "elsewhere", {"after RL": [0.5]}, ids=["other question"], seed=6)
    with pytest.raises(SystemExit):
        main([str(r) for r in runs] + ["--out", str(tmp_path / "r2"), "--against", str(elsewhere)])
    assert "share no question" in capsys.readouterr().err

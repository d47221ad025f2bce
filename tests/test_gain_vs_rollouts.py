"""benchmarks/gain_vs_rollouts.py: the fit reads where a log-linear line meets the target, refuses to draw a line
through fewer than three rollout counts or across recipes, a runs file must have every column the script reads, and
the transcribed runs file (docs/lab/evidence/gain_vs_rollouts.csv) has them."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("gain_vs_rollouts", ROOT / "benchmarks" / "gain_vs_rollouts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_line_meets_the_target_where_the_hand_worked_numbers_say(script):
    # ΔF1 = 0.02 + 0.04 log10(n): +0.10 at log10(n) = 2, n = 100
    runs = pd.DataFrame({"trained_rollouts": [10, 100, 1000], "delta_f1": [0.06, 0.10, 0.14]})
    info = script.fit(runs)
    assert info["slope_per_decade"] == pytest.approx(0.04) and info["intercept"] == pytest.approx(0.02)
    assert info["rollouts_at_target"] == pytest.approx(100)
    flat = script.fit(runs.assign(delta_f1=[0.0, -0.01, -0.02]))
    assert math.isinf(flat["rollouts_at_target"])  # a line that never rises never meets it


def test_two_rollout_counts_draw_no_line(script):
    runs = pd.DataFrame({"trained_rollouts": [240, 240, 3072], "delta_f1": [0.0, 0.03, 0.08]})
    assert script.fit(runs)["slope_per_decade"] is None


def test_a_line_joins_only_runs_of_one_cold_start_and_one_recipe(script):
    runs = pd.DataFrame({"family": ["A"] * 5 + ["B"] * 3, "recipe": ["r"] * 3 + ["lever", "lever"] + ["r"] * 3,
                         "trained_rollouts": [10, 100, 1000, 10, 1000, 10, 100, 100],
                         "delta_f1": [0.06, 0.10, 0.14, 0.5, 0.9, 0.0, 0.1, 0.1]})
    fits, points = script.fits_by_recipe(runs)
    assert list(fits) == [("A", "r")] and fits[("A", "r")]["slope_per_decade"] == pytest.approx(0.04)
    assert points == [("A", "lever"), ("B", "r")]  # two rollout counts each: no line, whatever their numbers


def test_a_runs_file_needs_every_column_the_script_reads(script, tmp_path):
    row = {"family": "demo", "lever": "none", "recipe": "demo", "seed": 0, "device": "cpu", "trained_rollouts": 128,
           "n_eval": 40, "delta_f1": -0.037, "low": -0.163, "high": 0.087}
    full = tmp_path / "runs.csv"
    pd.DataFrame([row]).to_csv(full, index=False)
    assert list(script.read_runs(full)[list(script.COLUMNS)].iloc[0]) == [row[c] for c in script.COLUMNS]
    short = tmp_path / "short.csv"
    pd.DataFrame([{k: v for k, v in row.items() if k != "low"}]).to_csv(short, index=False)
    with pytest.raises(SystemExit, match="lacks the columns low"):
        script.read_runs(short)


def test_the_transcribed_runs_have_the_columns_and_sane_intervals(script):
    # the committed runs file the script reads by default, beside the lab notebook that cites it
    runs = script.read_runs(ROOT / "docs" / "lab" / "evidence" / "gain_vs_rollouts.csv")
    assert ((runs["low"] <= runs["delta_f1"]) & (runs["delta_f1"] <= runs["high"])).all()
    assert (runs["trained_rollouts"] > 0).all() and set(runs["device"]) <= {"cpu", "gpu"}

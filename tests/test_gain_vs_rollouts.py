"""benchmarks/gain_vs_rollouts.py: the fit reads where a log-linear line meets the target, refuses to draw a line
through fewer than three rollout counts or across recipes, and the transcribed runs file has every column the script
needs."""

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


def test_the_transcribed_runs_have_the_columns_and_sane_intervals(script):
    runs = script.read_runs(ROOT / "outputs" / "levers" / "gain_vs_rollouts.csv")
    assert ((runs["low"] <= runs["delta_f1"]) & (runs["delta_f1"] <= runs["high"])).all()
    assert (runs["trained_rollouts"] > 0).all() and set(runs["device"]) <= {"cpu", "gpu"}

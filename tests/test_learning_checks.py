"""The learning checks: each read from a run folder's tables, met or not per seed, unmeasured where data is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from searchrl.analysis.learning_checks import CHECKS, LearningTargets, format_checks, learning_checks


def run(folder: Path, *, delta: float, low: float, reward_gain: float | None, multi: float, single: float,
        fmt: tuple[float, float], guessed: list[str] | None) -> Path:
    """A run folder holding what the checks read: the stage table, the curve trends and the per-type table."""
    (folder / "eval").mkdir(parents=True)
    stages = [{"stage": "after cold start", "F1": 0.3, "format-valid rate": fmt[0]},
              {"stage": "after RL", "F1": 0.3 + delta, "format-valid rate": fmt[1], "searches multi-hop": multi,
               "searches single-hop": single}]
    (folder / "eval" / "table.json").write_text(json.dumps(stages))
    if reward_gain is not None:
        trend = {"first": 0.0, "last": reward_gain, "gain": reward_gain, "points": 20}
        (folder / "eval" / "curve.json").write_text(json.dumps({"reward": trend, "search/scheduled_reward": trend}))
    types = [{"qtype": t, "ΔF1": 0.1, "ΔF1 95% low": 0.0, "gained by guessing": guessed is not None and t in guessed,
              **({"F1 no search": 0.0} if guessed is not None else {})} for t in ("single_hop", "comparison")]
    types.append({"qtype": "all", "ΔF1": delta, "ΔF1 95% low": low, "gained by guessing": False,
                  **({"F1 no search": 0.0} if guessed is not None else {})})
    (folder / "eval" / "type_table.json").write_text(json.dumps(types))
    return folder


def test_every_check_met_or_missed_per_seed(tmp_path):
    runs = {0: run(tmp_path / "a", delta=0.15, low=0.05, reward_gain=0.2, multi=1.8, single=1.1, fmt=(0.9, 0.97),
                   guessed=[]),
            1: run(tmp_path / "b", delta=0.15, low=-0.01, reward_gain=0.05, multi=1.4, single=1.3, fmt=(0.98, 0.96),
                   guessed=["comparison"])}
    table = learning_checks(runs)
    assert table.loc[0, list(CHECKS)].tolist() == [True] * len(CHECKS)
    # seed 1: its interval reaches 0, the curve is flat, searches do not follow hops, format fell below the cold
    # start's although above 0.95, and comparison gained by guessing
    assert table.loc[1, list(CHECKS)].tolist() == [False] * len(CHECKS)
    assert table.loc[1, "types gained by guessing"] == "comparison"
    text = format_checks(table)
    assert "F1 gain              met in 1 of 2 seeds: seed 0 0.150 / 0.050; seed 1 0.150 / -0.010" in text
    assert "no guessing          met in 1 of 2 seeds: seed 0 none; seed 1 comparison" in text


def test_missing_data_is_not_measured_rather_than_failed(tmp_path):
    runs = {0: run(tmp_path / "a", delta=0.15, low=0.05, reward_gain=None, multi=1.8, single=1.1, fmt=(0.9, 0.97),
                   guessed=None)}  # no curve logged, no no-search stage
    table = learning_checks(runs)
    assert table.loc[0, "reward rises"] is None and table.loc[0, "no guessing"] is None
    assert "reward rises         met in 0 of 1 seeds (1 not measured)" in format_checks(table)
    assert table.loc[0, "F1 gain"]


def test_targets_are_settings(tmp_path):
    runs = {0: run(tmp_path / "a", delta=0.15, low=0.05, reward_gain=0.2, multi=1.8, single=1.1, fmt=(0.9, 0.97),
                   guessed=[])}
    strict = learning_checks(runs, LearningTargets(min_f1_gain=0.2, max_single_hop_searches=1.0))
    assert not strict.loc[0, "F1 gain"] and not strict.loc[0, "single-hop searches"]
    assert isinstance(strict, pd.DataFrame) and strict.index.name == "seed"

"""Changes pooled over seeds: one interval for a lever's mean effect, and for the difference between two levers.

Each seed of a run evaluates the same held-out questions (they come from `world_seed`, never from `seed`), so a
question's change can be averaged over the seeds before it is bootstrapped. Resampling questions, not (seed,
question) pairs, keeps what the seeds share: a question that one seed gains tends to be gained by the others, and
treating those as independent pairs would narrow the interval falsely. The interval is conditional on the seeds
that ran; with three seeds it says whether the lever's mean effect on these questions is above zero, not how a
fourth seed would land (the per-seed intervals and the spread say that).

Per-question scores come from each run's saved evaluation records (`searchrl.runs.folder.stage_trajectories_path`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from searchrl.core.stats import bootstrap_mean
from searchrl.runs.folder import stage_trajectories_path


def stage_scores(run_dir: Path, stage: str, metric: str = "f1") -> pd.Series | None:
    """One run's per-question `metric` at `stage`, indexed by question id; None when the run has no such file."""
    path = stage_trajectories_path(run_dir, stage)
    if not path.is_file():
        return None
    records = pd.read_json(path, lines=True)
    if metric not in records or "id" not in records:
        return None
    return records.drop_duplicates("id").set_index("id")[metric].astype(float)


def seed_mean(run_dirs: Sequence[Path], stage: str, metric: str = "f1") -> pd.Series | None:
    """Per question, the mean of `metric` at `stage` over the runs, on the questions every run evaluated there;
    None when a run lacks the stage."""
    columns = [stage_scores(run, stage, metric) for run in run_dirs]
    if not columns or any(c is None for c in columns):
        return None
    return pd.concat(columns, axis=1, join="inner").mean(axis=1)


def _interval(difference: pd.Series, seeds: int, confidence: float) -> dict[str, float]:
    difference = difference.dropna()
    if difference.empty:
        return {"mean": np.nan, "low": np.nan, "high": np.nan, "questions": 0, "seeds": seeds}
    mean, low, high = bootstrap_mean(difference.to_numpy(), confidence=confidence)
    return {"mean": mean, "low": low, "high": high, "questions": len(difference), "seeds": seeds}


def pooled_change(run_dirs: Sequence[Path], before: str, after: str, metric: str = "f1",
                  confidence: float = 0.95) -> dict[str, float]:
    """The change `after` - `before` of `metric`, averaged over the runs (seeds) per question and bootstrapped over
    the questions every run evaluated at both stages: {mean, low, high, questions, seeds}. NaN and 0 questions
    when a run lacks one of the stages."""
    per_run = []
    for run in run_dirs:
        a, b = stage_scores(run, before, metric), stage_scores(run, after, metric)
        if a is None or b is None:
            return _interval(pd.Series(dtype=float), len(run_dirs), confidence)
        per_run.append(b - a.reindex(b.index))
    change = pd.concat(per_run, axis=1, join="inner").dropna().mean(axis=1)
    return _interval(change, len(run_dirs), confidence)


def lever_difference(runs: Sequence[Path], against: Sequence[Path], stage: str = "after RL", metric: str = "f1",
                     confidence: float = 0.95) -> dict[str, float]:
    """`runs` minus `against` at `stage`: per question, the mean of `metric` over the first set's seeds minus the
    mean over the second's, bootstrapped over the questions all of them evaluated: {mean, low, high, questions,
    seeds (of the first set), seeds against}."""
    a, b = seed_mean(runs, stage, metric), seed_mean(against, stage, metric)
    if a is None or b is None:
        result = _interval(pd.Series(dtype=float), len(runs), confidence)
    else:
        result = _interval((a - b.reindex(a.index)).dropna(), len(runs), confidence)
    return {**result, "seeds against": len(against)}


def format_interval(result: dict[str, float], label: str = "ΔF1") -> str:
    """`label +0.041 [+0.012, +0.070] on 100 questions` (or a line saying no question was shared)."""
    if not result["questions"]:
        return f"{label}: no question evaluated at both stages by every run"
    return (f"{label} {result['mean']:+.3f} [{result['low']:+.3f}, {result['high']:+.3f}] on "
            f"{int(result['questions'])} questions")


__all__ = ["format_interval", "lever_difference", "pooled_change", "seed_mean", "stage_scores"]

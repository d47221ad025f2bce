"""Training curves of an ablation: per arm, the mean over seeds of a logged metric at each step, with a band.

The papers' ablation figures draw one line per variant; with several seeds the line is their mean and the band shows
how far seeds spread (min-max, or ±1 standard deviation), so a gap between arms can be told from seed noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from searchrl.analysis.plots import ReportFigure, ema
from searchrl.experiments.ablation.layout import finished_arm_folders
from searchrl.runs.history import MetricsHistory

CURVE_METRICS = ("reward", "completions/model_tokens", "search/searches_per_sample")
CURVE_TITLES = {
    "reward": "training reward",
    "completions/model_tokens": "response length (generated tokens)",
    "completions/mean_length": "response length (tokens)",
    "search/searches_per_sample": "searches per sample",
}
BANDS = ("minmax", "sd")

Histories = Mapping[str, Mapping[int, pd.DataFrame]]  # {arm: {seed: metrics history}}


def read_histories(run_dir: str | Path, arms: Sequence[str] | None = None) -> dict[str, dict[int, pd.DataFrame]]:
    """{arm: {seed: history}} of the finished arms and seeds in an ablation folder (`arms` in that order; default:
    every arm found)."""
    found = finished_arm_folders(Path(run_dir))
    names = list(arms) if arms is not None else list(dict.fromkeys(arm for arm, _ in found))
    out: dict[str, dict[int, pd.DataFrame]] = {}
    for (arm, seed), folder in sorted(found.items(), key=lambda item: item[0][1]):
        if arm in names:
            out.setdefault(arm, {})[seed] = MetricsHistory(folder).to_frame()
    return {arm: out[arm] for arm in names if arm in out}


def band_frame(histories: Histories, metric: str, step_col: str = "step", smooth: float = 0.0) -> pd.DataFrame:
    """Rows (arm, step) with the `mean`, `sd` (NaN for one seed), `min` and `max` over seeds of `metric`, and
    `seeds` (how many logged that step). Each seed's curve is EMA-smoothed first when `smooth` > 0."""
    frames = []
    for arm, by_seed in histories.items():
        for seed, frame in by_seed.items():
            if metric not in frame.columns or step_col not in frame.columns:
                continue
            data = frame[[step_col, metric]].dropna().sort_values(step_col)
            if data.empty:
                continue
            values = ema(data[metric].to_numpy(dtype=float), smooth) if smooth else data[metric].to_numpy(dtype=float)
            frames.append(pd.DataFrame({"arm": arm, "seed": seed, "step": data[step_col].to_numpy(), "value": values}))
    if not frames:
        return pd.DataFrame(columns=["arm", "step", "mean", "sd", "min", "max", "seeds"])
    values = pd.concat(frames, ignore_index=True)
    grouped = values.groupby(["arm", "step"], sort=False)["value"]
    out = grouped.agg(mean="mean", sd=lambda v: v.std(ddof=1), min="min", max="max", seeds="count").reset_index()
    order = {arm: i for i, arm in enumerate(histories)}
    return out.sort_values(["arm", "step"], key=lambda c: c.map(order) if c.name == "arm" else c,
                           ignore_index=True)


def band_curves(histories: Histories, metrics: Sequence[str] = CURVE_METRICS, *, band: str = "minmax",
                smooth: float = 0.0, step_col: str = "step", title: str | None = None) -> ReportFigure:
    """One panel per metric, one colour per arm: the mean over seeds, the band shaded behind it."""
    if band not in BANDS:
        raise ValueError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
    if not histories or not any(histories.values()):
        raise ValueError("no finished arm logged any training step; run the ablation first (rl_steps > 0?)")
    fig = ReportFigure(figsize=(4.4 * len(metrics), 3.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(metrics), squeeze=False)[0])
    for ax, metric in zip(axes, metrics):
        table = band_frame(histories, metric, step_col, smooth)
        for i, arm in enumerate(histories):
            part = table[table["arm"] == arm]
            if part.empty:
                continue
            if band == "minmax":
                low, high = part["min"], part["max"]
            else:
                sd = part["sd"].fillna(0.0)
                low, high = part["mean"] - sd, part["mean"] + sd
            color = f"C{i % 10}"
            ax.fill_between(part["step"], low, high, color=color, alpha=0.2, linewidth=0)
            ax.plot(part["step"], part["mean"], color=color, linewidth=2,
                    label=f"{arm} ({int(part['seeds'].max())} seeds)")
        ax.set_title(CURVE_TITLES.get(metric, metric) + ("" if not table.empty else " (not logged)"))
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    handles = next((ax for ax in axes if ax.get_legend_handles_labels()[0]), None)
    if handles is not None:
        handles.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


__all__ = ["BANDS", "CURVE_METRICS", "band_curves", "band_frame", "read_histories"]

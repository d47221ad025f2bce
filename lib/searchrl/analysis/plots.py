"""Figures from DataFrames: training curves and evaluation bars.

Pure functions: each takes tables and returns a new :class:`ReportFigure` (a matplotlib ``Figure``) without
touching pyplot's global state, so they work under any backend (Agg included) and never show or save anything by
themselves. In a notebook the returned figure displays as the cell's value, as a PNG image: a figure that pyplot
does not manage gets no image from Jupyter's inline backend, only its text repr, so the figure supplies its own
image representation. :func:`searchrl.core.files.save_figure` writes it to a run.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["ReportFigure", "ema", "eval_bars", "per_type_bars", "training_curves", "type_change_bars"]

RAW_ALPHA = 0.25  # raw values drawn faint behind the smoothed line, as in the papers' training figures
DEFAULT_CURVES = ("reward", "completions/mean_length", "search/searches_per_sample")
DEFAULT_EVAL_METRICS = ("em", "f1", "searches", "format_ok")
DISPLAY_DPI = 100  # notebook images; the PNG files in a run folder use their own resolution (save_figure)


class ReportFigure(Figure):
    """A Figure that IPython (Jupyter, papermill, the runner) displays as a PNG image.

    IPython looks for ``_repr_png_`` when no formatter is registered for the type; matplotlib registers one only
    for pyplot's inline backend, which these figures never go through.
    """

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=DISPLAY_DPI, bbox_inches="tight")
        return buffer.getvalue()



def ema(values: Sequence[float] | np.ndarray | pd.Series, smooth: float) -> np.ndarray:
    """Exponential moving average: ``s[0] = x[0]``, ``s[t] = smooth * s[t-1] + (1 - smooth) * x[t]``.

    ``smooth`` in [0, 1): 0 returns the values unchanged. NaN values are skipped (the average carries over them).
    """
    if not 0 <= smooth < 1:
        raise ValueError(f"smooth must be in [0, 1), got {smooth}")
    x = np.asarray(values, dtype=float)
    out = np.empty_like(x)
    state = math.nan
    for i, value in enumerate(x):
        if math.isnan(value):
            out[i] = state
            continue
        state = value if math.isnan(state) else smooth * state + (1 - smooth) * value
        out[i] = state
    return out


def _grid(n: int, ncols: int | None, panel: tuple[float, float]) -> tuple[ReportFigure, list[Axes]]:
    ncols = min(n, ncols or 3)
    nrows = math.ceil(n / ncols)
    fig = ReportFigure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def training_curves(
    histories: Mapping[str, pd.DataFrame] | pd.DataFrame,
    metrics: Sequence[str] = DEFAULT_CURVES,
    step_col: str = "step",
    smooth: float = 0.8,
    ncols: int | None = None,
    title: str | None = None,
) -> ReportFigure:
    """One subplot per metric, one colour per run: the EMA-smoothed curve over the raw values (faint).

    ``histories`` is one history (as logged by :class:`searchrl.runs.history.MetricsHistory`) or ``{run label: history}``.
    A metric missing from every run gets an empty panel saying so; one missing from some runs names them in the
    panel title. Raises ValueError when there is nothing to plot.
    """
    if isinstance(histories, pd.DataFrame):
        histories = {"run": histories}
    if not histories:
        raise ValueError("training_curves needs at least one history; got an empty mapping")
    if not metrics:
        raise ValueError("training_curves needs at least one metric name")
    for label, frame in histories.items():
        if frame.empty:
            raise ValueError(f"history {label!r} is empty: no steps were logged (did training run?)")
        if step_col not in frame.columns:
            raise ValueError(f"history {label!r} has no {step_col!r} column; columns: {', '.join(map(str, frame))}")

    fig, axes = _grid(len(metrics), ncols, (4.2, 3.0))
    colors = [f"C{i % 10}" for i in range(len(histories))]
    for ax, metric in zip(axes, metrics):
        missing = []
        for color, (label, frame) in zip(colors, histories.items()):
            if metric not in frame.columns or frame[metric].isna().all():
                missing.append(label)
                continue
            data = frame[[step_col, metric]].dropna().sort_values(step_col)
            steps, values = data[step_col].to_numpy(), data[metric].to_numpy(dtype=float)
            ax.plot(steps, values, color=color, alpha=RAW_ALPHA, linewidth=1)
            ax.plot(steps, ema(values, smooth), color=color, linewidth=2, label=label)
        if len(missing) == len(histories):
            ax.set_title(f"{metric} (not logged)")
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="gray")
            ax.set_xticks([])
            ax.set_yticks([])
        elif missing:
            ax.set_title(f"{metric} (missing in: {', '.join(missing)})")
        else:
            ax.set_title(metric)
        ax.set_xlabel(step_col)
        ax.grid(alpha=0.3)
    if len(histories) > 1:
        handles_ax = next((ax for ax in axes if ax.get_legend_handles_labels()[0]), None)
        if handles_ax is not None:
            handles_ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


PAYOFF_PREFIX = "search/reward_at_"  # the trainer logs search/reward_at_<n>_searches per step


def search_payoff_curves(history: pd.DataFrame, step_col: str = "step", smooth: float = 0.6) -> ReportFigure | None:
    """The mean training reward of rollouts with 0, 1, 2, ... searches, per step: one line per search count, raw
    (faint) and EMA-smoothed. GRPO moves a policy towards the count that earns more than its group mates, so a line
    above the others says which behaviour training is reinforcing. None when the history has no such columns."""
    columns = sorted((c for c in history.columns if c.startswith(PAYOFF_PREFIX) and history[c].notna().any()),
                     key=lambda c: int(c[len(PAYOFF_PREFIX):].split("_")[0]))
    labels = [f"{c[len(PAYOFF_PREFIX):].split('_')[0]} searches" for c in columns]
    return _reward_lines(history, columns, labels, "mean reward of rollouts, by number of searches", step_col, smooth)


OPENER_PREFIX = "search/reward_by_opener/"  # search/reward_by_opener/<i or free>, per step (explore_openers)


def opener_payoff_curves(history: pd.DataFrame, openers: Sequence[str], step_col: str = "step",
                         smooth: float = 0.6) -> ReportFigure | None:
    """The mean training reward of rollouts started from each of `openers` (the run's explore_openers; "free" for
    rollouts left to the model), per step, raw and EMA-smoothed: which choice the openers write pays, as training
    goes. None when the history has no such columns."""
    names = [str(i) for i in range(len(openers))] + ["free"]
    texts = list(openers) + ["(free)"]
    pairs = [(OPENER_PREFIX + n, repr(t) if n != "free" else t) for n, t in zip(names, texts, strict=True)
             if OPENER_PREFIX + n in history.columns and history[OPENER_PREFIX + n].notna().any()]
    return _reward_lines(history, [c for c, _ in pairs], [label for _, label in pairs],
                         "mean reward of rollouts, by explore opener", step_col, smooth)


CHOICE_PREFIX = "search/opener_log_odds/"  # search/opener_log_odds/<qtype>, per step (rollout.opener_anchor)


def opener_choice_curves(history: pd.DataFrame, openers: Sequence[str], step_col: str = "step",
                         smooth: float = 0.0) -> ReportFigure | None:
    """Per question type, the policy's mean log-odds of the second explore opener over the first on the step's
    questions, before each update (logged with `opener_anchor`). Above the zero line the greedy choice is the
    second opener: lines that move together are the shared prior, lines that move apart are per-question
    judgement. None when the history has no such columns."""
    columns = sorted(c for c in history.columns if c.startswith(CHOICE_PREFIX) and history[c].notna().any())
    second = repr(openers[1]) if len(openers) > 1 else "the second opener"
    fig = _reward_lines(history, columns, [c[len(CHOICE_PREFIX):] for c in columns],
                        f"log-odds of {second}, by question type", step_col, smooth)
    if fig is not None:
        fig.axes[0].axhline(0.0, color="grey", linewidth=0.8)
    return fig


def _reward_lines(history: pd.DataFrame, columns: list[str], labels: list[str], title: str, step_col: str,
                  smooth: float) -> ReportFigure | None:
    """One line per column over steps, raw (faint) and EMA-smoothed, in one panel; None without columns."""
    if not columns:
        return None
    fig, (ax,) = _grid(1, 1, (5.0, 3.2))
    for i, (column, label) in enumerate(zip(columns, labels, strict=True)):
        data = history[[step_col, column]].dropna().sort_values(step_col)
        steps, values = data[step_col].to_numpy(), data[column].to_numpy(dtype=float)
        ax.plot(steps, values, color=f"C{i}", alpha=RAW_ALPHA, linewidth=1, marker=".")
        ax.plot(steps, ema(values, smooth), color=f"C{i}", linewidth=2, label=label)
    ax.set_title(title)
    ax.set_xlabel(step_col)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


ADVANTAGE_PREFIX = "search/advantage_at_"  # search/advantage_at_<n>_searches/<qtype>, per step (search_payoff.py)


def search_advantage_curves(history: pd.DataFrame, step_col: str = "step") -> ReportFigure | None:
    """Per question type, the running mean over steps of the group-relative advantage of rollouts with n searches:
    a line above zero is a count GRPO has been pushing that type towards so far. Running means, not EMA, because a
    step holds only the few groups of a type whose rollouts searched unequally. None without such columns."""
    columns = [c for c in history.columns if c.startswith(ADVANTAGE_PREFIX) and history[c].notna().any()]
    if not columns:
        return None
    by_type: dict[str, list[tuple[int, str]]] = {}
    for column in columns:
        count, qtype = column[len(ADVANTAGE_PREFIX):].split("_searches/", 1)
        by_type.setdefault(qtype, []).append((int(count), column))
    fig, axes = _grid(len(by_type), 3, (4.2, 3.0))
    for ax, qtype in zip(axes, sorted(by_type)):
        for count, column in sorted(by_type[qtype]):
            data = history[[step_col, column]].dropna().sort_values(step_col)
            values = data[column].to_numpy(dtype=float)
            running = np.cumsum(values) / np.arange(1, len(values) + 1)
            ax.plot(data[step_col].to_numpy(), running, color=f"C{count % 10}", linewidth=2, marker=".",
                    label=f"{count} searches")
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_title(qtype)
        ax.set_xlabel(step_col)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("advantage within the group, by number of searches (running mean)")
    return fig


def _stage_frame(table: pd.DataFrame, stage_col: str | None) -> tuple[pd.DataFrame, str]:
    """The table with its stage labels in a column (taken from the index when there is no such column)."""
    if table is None or table.empty:
        raise ValueError("the evaluation table is empty: evaluate at least one stage first")
    stage_col = stage_col or "stage"
    if stage_col not in table.columns:
        table = table.rename_axis(stage_col).reset_index()
    return table, stage_col


def _grouped_bars(ax: Axes, table: pd.DataFrame, value_col: str, stage_col: str, group_col: str | None) -> None:
    """Bars of ``value_col``: one per stage, side by side within each group (or one group when there is none)."""
    stages = list(dict.fromkeys(table[stage_col]))
    keys = [stage_col] + ([group_col] if group_col else [])
    means = table.groupby(keys, sort=False)[value_col].mean()
    groups = list(dict.fromkeys(table[group_col])) if group_col else [None]
    width = 0.8 / len(stages)
    x = np.arange(len(groups))
    for i, stage in enumerate(stages):
        heights = [means.get((stage, g) if group_col else stage, np.nan) for g in groups]
        bars = ax.bar(x + (i - (len(stages) - 1) / 2) * width, heights, width, label=str(stage), color=f"C{i % 10}")
        ax.bar_label(bars, fmt="%.2f", fontsize="x-small", padding=1)
    if group_col:
        ax.set_xticks(x, [str(g) for g in groups], rotation=30 if len(groups) > 4 else 0, ha="right")
    else:
        ax.set_xticks([])
    ax.set_title(value_col)
    ax.grid(axis="y", alpha=0.3)


def _delta_bars(ax: Axes, table: pd.DataFrame, delta_col: str, stage_col: str) -> None:
    """Each stage's change from the stage before it, with its paired-bootstrap 95% interval as an error bar: an
    interval that crosses zero says the two stages cannot be told apart on these questions."""
    label = delta_col.removesuffix(" vs previous")
    rows = table[table[delta_col].notna()]
    low, high = rows[f"{label} 95% low"].to_numpy(), rows[f"{label} 95% high"].to_numpy()
    mean = rows[delta_col].to_numpy()
    stages = list(dict.fromkeys(table[stage_col]))
    colors = [f"C{stages.index(s) % 10}" for s in rows[stage_col]]
    x = np.arange(len(rows))
    ax.bar(x, mean, 0.6, color=colors, yerr=[mean - low, high - mean], capsize=4, ecolor="black")
    for xi, m, h in zip(x, mean, high):
        ax.annotate(f"{m:+.2f}", (xi, h), textcoords="offset points", xytext=(0, 2), ha="center", fontsize="x-small")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [str(s) for s in rows[stage_col]], rotation=20, ha="right", fontsize="small")
    ax.set_title(f"{label} vs previous stage (95% CI)")
    ax.grid(axis="y", alpha=0.3)


def eval_bars(
    table: pd.DataFrame,
    metrics: Sequence[str] = DEFAULT_EVAL_METRICS,
    stage_col: str | None = "stage",
    group_col: str | None = None,
    ncols: int | None = None,
    title: str | None = None,
) -> ReportFigure:
    """Before/after bars: one subplot per metric, one bar per stage (e.g. untrained / cold start / after RL).
    When the table has a stage-to-stage change with its interval (`stage_table`'s "ΔF1 vs previous"), a last
    panel shows it with error bars.

    ``table`` has one row per stage (stage names in ``stage_col`` or the index) and a column per metric; with
    ``group_col`` (e.g. dataset) bars are grouped by it. Several rows for one stage/group are averaged, so
    per-question tables work too. Metrics missing from the table are skipped and noted in the title.
    """
    table, stage_col = _stage_frame(table, stage_col)
    present = [m for m in metrics if m in table.columns]
    missing = [m for m in metrics if m not in table.columns]
    if not present:
        raise ValueError(f"none of the metrics {list(metrics)} is a column of the table ({', '.join(table.columns)})")
    delta = next((c for c in table.columns if c.startswith("Δ") and c.endswith(" vs previous")), None)
    show_delta = delta is not None and group_col is None and table[delta].notna().any()
    fig, axes = _grid(len(present) + show_delta, ncols or 4, (3.4, 3.0))
    for ax, metric in zip(axes, present):
        _grouped_bars(ax, table, metric, stage_col, group_col)
    if show_delta:
        _delta_bars(axes[len(present)], table, delta, stage_col)
    axes[0].legend(fontsize="small")
    heading = title or ""
    if missing:
        heading = (heading + " " if heading else "") + f"(not in table: {', '.join(missing)})"
    if heading:
        fig.suptitle(heading)
    return fig


def per_type_bars(
    table: pd.DataFrame,
    metric: str = "f1",
    type_col: str = "question_type",
    stage_col: str | None = "stage",
    title: str | None = None,
) -> ReportFigure:
    """``metric`` per question type, one bar per stage; per-question rows are averaged within type and stage."""
    table, stage_col = _stage_frame(table, stage_col)
    for col in (metric, type_col):
        if col not in table.columns:
            raise ValueError(f"column {col!r} is not in the table ({', '.join(table.columns)})")
    n_types = table[type_col].nunique()
    fig = ReportFigure(figsize=(max(4.0, 1.2 * n_types + 2), 3.2), layout="constrained")
    ax = fig.subplots()
    _grouped_bars(ax, table, metric, stage_col, type_col)
    ax.set_title(title or f"{metric} by {type_col}")
    ax.legend(fontsize="small")
    return fig


def type_change_bars(table: pd.DataFrame, title: str | None = None) -> ReportFigure:
    """`searchrl.evaluation.type_table`'s rows as bars: each type's F1 change with its paired 95% interval (left) and, when
    the table has the no-search columns, F1 with search beside F1 without it after the stage (right). A type
    flagged as gained by guessing is hatched in red on the left."""
    rows = table[table["questions"] > 0] if "questions" in table else table
    if rows.empty:
        raise ValueError("the type table has no row with paired questions")
    names = [str(i) for i in rows.index]
    with_search = "F1 no search" in rows
    fig, axes = _grid(1 + with_search, 2, (max(4.0, 0.9 * len(names) + 1.5), 3.2))
    ax = axes[0]
    mean = rows["ΔF1"].to_numpy(float)
    low, high = rows["ΔF1 95% low"].to_numpy(float), rows["ΔF1 95% high"].to_numpy(float)
    guessed = rows["gained by guessing"].fillna(False).astype(bool).to_numpy()
    x = np.arange(len(names))
    bars = ax.bar(x, mean, 0.6, yerr=[mean - low, high - mean], capsize=4, ecolor="black",
                  color=["tab:red" if g else "C0" for g in guessed])
    for bar, g in zip(bars, guessed):
        if g:
            bar.set_hatch("//")
    for xi, m, h in zip(x, mean, high):
        ax.annotate(f"{m:+.2f}", (xi, h), textcoords="offset points", xytext=(0, 2), ha="center", fontsize="x-small")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize="small")
    ax.set_title("ΔF1 per type (95% CI; red: gained by guessing)" if guessed.any() else "ΔF1 per type (95% CI)",
                 fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    if with_search:
        # type_table's stage columns come in order: "F1 <before>", "F1 <after>"
        after = [c for c in rows.columns if c.startswith("F1 ") and c != "F1 no search"][1]
        frame = pd.DataFrame({"qtype": names * 2, "F1": list(rows[after]) + list(rows["F1 no search"]),
                              "stage": [after.removeprefix("F1 ")] * len(names) + ["no search"] * len(names)})
        _grouped_bars(axes[1], frame, "F1", "stage", "qtype")
        axes[1].set_title("F1 with and without search", fontsize="small")
        axes[1].legend(fontsize="x-small")
    if title:
        fig.suptitle(title)
    return fig

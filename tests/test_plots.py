"""Figures: the right panels, lines and bars; smoothing computed as documented; clear errors for empty input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from searchrl.analysis.plots import (
    RAW_ALPHA,
    ema,
    eval_bars,
    opener_choice_curves,
    opener_payoff_curves,
    per_type_bars,
    search_advantage_curves,
    search_payoff_curves,
    training_curves,
)


def history(n: int = 10, offset: float = 0.0, **extra: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "step": np.arange(1, n + 1),
            "reward": np.linspace(0, 1, n) + offset,
            "completions/mean_length": np.linspace(50, 80, n),
        }
    )
    for name, values in extra.items():
        frame[name] = values
    return frame


def visible_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


def test_ema_on_a_known_series() -> None:
    # s0 = 0; s1 = 0.5*0 + 0.5*2 = 1; s2 = 0.5*1 + 0.5*4 = 2.5; NaN carries the state; s4 = 0.5*2.5 + 0.5*0.5 = 1.5
    assert np.allclose(ema([0, 2, 4, np.nan, 0.5], 0.5), [0, 1, 2.5, 2.5, 1.5])
    assert np.allclose(ema([3, 1, 2], 0.0), [3, 1, 2])
    with pytest.raises(ValueError, match="smooth must be in"):
        ema([1.0], 1.0)


def test_training_curves_one_panel_per_metric_two_lines_per_run() -> None:
    runs = {"baseline": history(), "masked": history(offset=0.1)}
    fig = training_curves(runs, metrics=("reward", "completions/mean_length"), smooth=0.6)
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == ["reward", "completions/mean_length"]
    for ax in axes:
        assert len(ax.lines) == 4  # raw + smoothed for each of two runs
        raw, smoothed = ax.lines[0], ax.lines[1]
        assert raw.get_alpha() == RAW_ALPHA and smoothed.get_alpha() in (None, 1.0)
        assert raw.get_color() == smoothed.get_color() != ax.lines[2].get_color()
    reward = axes[0].lines[1].get_ydata()
    assert np.allclose(reward, ema(runs["baseline"]["reward"], 0.6))
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["baseline", "masked"]


def test_training_curves_notes_missing_metrics_and_sorts_steps() -> None:
    shuffled = history(4).iloc[[2, 0, 3, 1]]
    with_search = history(4, **{"search/searches_per_sample": [0.0, 1.0, 1.0, 2.0]})
    fig = training_curves({"a": shuffled, "b": with_search})
    titles = [ax.get_title() for ax in visible_axes(fig)]
    assert titles == ["reward", "completions/mean_length", "search/searches_per_sample (missing in: a)"]
    assert list(visible_axes(fig)[0].lines[0].get_xdata()) == [1, 2, 3, 4]
    alone = training_curves(history(4), metrics=("reward", "kl"))
    assert visible_axes(alone)[1].get_title() == "kl (not logged)" and not visible_axes(alone)[1].lines


def test_training_curves_rejects_empty_input() -> None:
    with pytest.raises(ValueError, match="history 'run' is empty"):
        training_curves(pd.DataFrame())
    with pytest.raises(ValueError, match="at least one history"):
        training_curves({})
    with pytest.raises(ValueError, match="no 'step' column"):
        training_curves(pd.DataFrame({"reward": [1.0]}))


def stages() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stage": ["untrained", "cold start", "after RL"],
            "em": [0.1, 0.3, 0.5],
            "f1": [0.2, 0.4, 0.6],
            "searches": [0.0, 1.2, 1.5],
        }
    )


def test_eval_bars_one_bar_per_stage_per_metric() -> None:
    fig = eval_bars(stages())
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == ["em", "f1", "searches"]
    assert "not in table: format_ok" in fig.get_suptitle()
    heights = [p.get_height() for p in axes[1].patches]
    assert heights == pytest.approx([0.2, 0.4, 0.6])
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["untrained", "cold start", "after RL"]
    from_index = eval_bars(stages().set_index("stage"), metrics=("em",))
    assert [p.get_height() for p in visible_axes(from_index)[0].patches] == pytest.approx([0.1, 0.3, 0.5])


def test_eval_bars_groups_and_errors() -> None:
    table = pd.concat([stages().assign(dataset="hotpotqa"), stages().assign(dataset="nq", em=[0.2, 0.2, 0.2])])
    ax = visible_axes(eval_bars(table, metrics=("em",), group_col="dataset"))[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["hotpotqa", "nq"]
    assert len(ax.patches) == 6
    with pytest.raises(ValueError, match="evaluation table is empty"):
        eval_bars(pd.DataFrame())
    with pytest.raises(ValueError, match="none of the metrics"):
        eval_bars(stages(), metrics=("accuracy",))


def test_per_type_bars_averages_per_question_rows() -> None:
    rows = pd.DataFrame(
        {
            "stage": ["before"] * 4 + ["after"] * 4,
            "question_type": ["single_hop", "single_hop", "two_hop", "two_hop"] * 2,
            "f1": [0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.5],
        }
    )
    fig = per_type_bars(rows)
    (ax,) = visible_axes(fig)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single_hop", "two_hop"]
    assert [p.get_height() for p in ax.patches] == pytest.approx([0.5, 0.0, 1.0, 0.5])  # before bars, then after
    with pytest.raises(ValueError, match="'question_type' is not in the table"):
        per_type_bars(rows.drop(columns="question_type"))


def test_plots_leave_pyplot_alone() -> None:
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    training_curves(history())
    eval_bars(stages())
    assert plt.get_fignums() == before  # no figure registered with pyplot: nothing shown or leaked


@pytest.mark.parametrize(
    "make", [lambda: training_curves(history()), lambda: eval_bars(stages()),
             lambda: per_type_bars(stages().assign(question_type="single_hop"), metric="f1")],
    ids=["training_curves", "eval_bars", "per_type_bars"],
)
def test_figures_display_as_png_images_in_ipython(make) -> None:
    # What Jupyter (and papermill) store for a cell whose value is the figure: IPython's display formatter output.
    from IPython.core.formatters import DisplayFormatter

    fig = make()
    data, _ = DisplayFormatter().format(fig)
    png = data.get("image/png")
    assert png is not None, f"no image/png representation, only {sorted(data)}"
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # The image is the whole figure: its PNG header's size follows the figure's aspect ratio (tight bbox trims a
    # little white margin only).
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    fig_w, fig_h = fig.get_size_inches()
    assert width > 200 and height > 100
    assert width / height == pytest.approx(fig_w / fig_h, rel=0.2)


def test_eval_bars_show_stage_changes_with_their_intervals() -> None:
    table = stages().assign(**{"ΔF1 vs previous": [np.nan, 0.2, -0.1], "ΔF1 95% low": [np.nan, 0.05, -0.3],
                               "ΔF1 95% high": [np.nan, 0.35, 0.1]})
    axes = visible_axes(eval_bars(table, metrics=("f1",)))
    assert [ax.get_title() for ax in axes] == ["f1", "ΔF1 vs previous stage (95% CI)"]
    delta = axes[1]
    assert [p.get_height() for p in delta.patches] == pytest.approx([0.2, -0.1])
    assert [t.get_text() for t in delta.get_xticklabels()] == ["cold start", "after RL"]
    # The error bars span each interval: segments from low to high at each bar.
    segments = [seg for coll in delta.collections for seg in coll.get_segments()]
    spans = sorted((float(s[:, 1].min()), float(s[:, 1].max())) for s in segments)
    assert np.allclose(spans, [(-0.3, 0.1), (0.05, 0.35)])


def test_search_payoff_curves_draw_one_line_per_search_count_in_numeric_order() -> None:
    history = pd.DataFrame({"step": [1, 2, 3], "reward": [0.1, 0.2, 0.3],
                            "search/reward_at_10_searches": [np.nan, 0.5, np.nan],
                            "search/reward_at_2_searches": [1.0, np.nan, 0.0],
                            "search/reward_at_1_searches": [-1.0, -0.5, 0.0]})
    fig = search_payoff_curves(history, smooth=0.0)
    (ax,) = fig.axes
    smoothed = [line for line in ax.get_lines() if line.get_label() and not line.get_label().startswith("_")]
    assert [line.get_label() for line in smoothed] == ["1 searches", "2 searches", "10 searches"]
    assert smoothed[1].get_xdata().tolist() == [1, 3]  # steps without that count are skipped, not drawn as zero
    assert smoothed[1].get_ydata().tolist() == [1.0, 0.0]
    assert search_payoff_curves(history[["step", "reward"]]) is None


def test_opener_payoff_curves_label_each_line_with_its_opener() -> None:
    history = pd.DataFrame({"step": [1, 2], "search/reward_by_opener/1": [1.0, 0.5],
                            "search/reward_by_opener/0": [-1.0, np.nan], "search/reward_by_opener/free": [0.0, 0.2]})
    fig = opener_payoff_curves(history, ["one fact", "two facts"], smooth=0.0)
    (ax,) = fig.axes
    smoothed = [line for line in ax.get_lines() if line.get_label() and not line.get_label().startswith("_")]
    assert [line.get_label() for line in smoothed] == ["'one fact'", "'two facts'", "(free)"]
    assert smoothed[0].get_xdata().tolist() == [1] and smoothed[1].get_ydata().tolist() == [1.0, 0.5]
    assert opener_payoff_curves(history[["step"]], ["one fact"]) is None


def test_opener_choice_curves_draw_one_line_per_type_around_the_greedy_boundary() -> None:
    history = pd.DataFrame({"step": [1, 2, 3], "search/opener_log_odds/single_hop": [-0.1, -1.4, np.nan],
                            "search/opener_log_odds/bridge": [1.2, 0.8, -0.6], "reward": [0.0, 0.1, 0.2]})
    fig = opener_choice_curves(history, ["<think> needs one", "<think> needs two"])
    (ax,) = fig.axes
    labelled = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in labelled] == ["bridge", "single_hop"]
    assert labelled[1].get_xdata().tolist() == [1, 2] and labelled[0].get_ydata().tolist() == [1.2, 0.8, -0.6]
    assert any(list(line.get_ydata()) == [0.0, 0.0] for line in ax.get_lines())  # the boundary
    assert "'<think> needs two'" in ax.get_title()
    assert opener_choice_curves(history[["step", "reward"]], ["a", "b"]) is None


def test_search_advantage_curves_draw_a_running_mean_per_type_and_count() -> None:
    history = pd.DataFrame({"step": [1, 2, 3],
                            "search/advantage_at_2_searches/inference": [0.5, np.nan, -0.2],
                            "search/advantage_at_1_searches/inference": [-0.5, np.nan, 0.2],
                            "search/advantage_at_2_searches/single_hop": [np.nan, -0.4, np.nan]})
    fig = search_advantage_curves(history)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["inference", "single_hop"]
    lines = [line for line in axes[0].get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in lines] == ["1 searches", "2 searches"]
    assert lines[1].get_xdata().tolist() == [1, 3]
    assert lines[1].get_ydata().tolist() == pytest.approx([0.5, 0.15])  # running mean, steps without groups skipped
    assert search_advantage_curves(history[["step"]]) is None

"""An experiment's figures and displays: training curves (and their trends), evaluation bars, and trajectories as HTML.

Every figure is saved under the run folder's figures/; `_show` displays one beside a notebook cell's result.
"""

from __future__ import annotations

import pandas as pd

from searchrl.core.files import save_figure, write_json

__all__ = ["CURVE_METRICS", "ExperimentFigures", "curve_trends"]


class ExperimentFigures:
    """Figures and displays. A mixin of `searchrl.experiments.experiment.Experiment`, which builds what it reads (cfg,
    run_dir, protocol, retriever, tokenizer, the question rows, results, history)."""

    def curves(self):
        from searchrl.analysis.plots import (
            opener_choice_curves,
            opener_payoff_curves,
            search_advantage_curves,
            search_payoff_curves,
            training_curves,
        )
        from searchrl.trainer.monitors.probe import PROBE_METRICS

        frame = self.history.to_frame()
        if frame.empty:
            print("No training steps were logged (rl_steps: 0?), so there are no training curves.")
            return None
        trends = curve_trends(frame)
        write_json(self.run_dir / "eval" / "curve.json", trends)
        for metric, trend in trends.items():
            print(f"{metric}: first quarter of steps {trend['first']:.3f}, last {trend['last']:.3f}, "
                  f"gain {trend['gain']:+.3f} ({trend['points']} points)")
        scheduled = ("search/scheduled_reward",) if "search/scheduled_reward" in frame else ()  # dynamic sampling
        fig = training_curves({self.cfg.run_name or self.run_dir.name: frame},
                              metrics=("reward", *scheduled, "completions/model_tokens", "search/searches_per_sample"))
        save_figure(fig, self.run_dir / "figures" / "training_curves.png")
        terms = [c for c in frame.columns if c.startswith("rewards/") and c.endswith("/mean")]
        if len(terms) > 1:  # each reward term on its own (R-Search's evidence reward, a format term, ...)
            save_figure(training_curves(frame, metrics=terms, title="reward terms (unweighted means)"),
                        self.run_dir / "figures" / "reward_terms.png")
        probes = [c for c in PROBE_METRICS if c in frame.columns]
        if probes:  # the fixed probe set's greedy scores: learning, without the per-step question draw
            save_figure(training_curves(frame, metrics=probes, smooth=0.0, title="fixed probe set (greedy)"),
                        self.run_dir / "figures" / "probe_curve.png")
        payoff = search_payoff_curves(frame)
        if payoff is not None:  # does a second search pay? (shown here, returned figure stays the curves)
            save_figure(payoff, self.run_dir / "figures" / "search_payoff.png")
            _show(payoff)
        openers = opener_payoff_curves(frame, self.cfg.explore_openers)
        if openers is not None:  # which choice the explore openers write pays (explore_openers)
            save_figure(openers, self.run_dir / "figures" / "opener_payoff.png")
        choice = opener_choice_curves(frame, self.cfg.explore_openers)
        if choice is not None:  # how the choice between the openers moved, per type (opener_anchor)
            save_figure(choice, self.run_dir / "figures" / "opener_choice.png")
        by_type = search_advantage_curves(frame)
        if by_type is not None:  # ... and on which question types (GRPO's push, within groups)
            save_figure(by_type, self.run_dir / "figures" / "search_advantage_by_type.png")
        return fig

    def bars(self, table: pd.DataFrame):
        from searchrl.analysis.plots import eval_bars

        metrics = [c for c in ("EM", "F1", "F1 multi-hop", "searches/question", "format-valid rate") if c in table]
        fig = eval_bars(table.reset_index() if "stage" not in table.columns else table, metrics=metrics)
        save_figure(fig, self.run_dir / "figures" / "eval_bars.png")
        return fig

    def show_trajectories(self, stage: str, n: int | None = None):
        """HTML of `n` trajectories of one stage, retrieved spans marked (for display in the notebook)."""
        from searchrl.evaluation.render import render_trajectory

        records = self.results[stage].records
        n = n or self.cfg.n_trajectories_shown
        # Prefer trajectories that searched, so the marked retrieved spans are visible.
        chosen = records.sort_values("searches", ascending=False, kind="stable").head(n)
        html = "".join(render_trajectory(rec, self.protocol) for rec in chosen.to_dict("records"))
        (self.run_dir / "figures").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "figures" / f"trajectories_{stage.replace(' ', '_')}.html").write_text(html)
        return html

    def show_training_rollouts(self, step: int | None = None, groups_per_type: int = 1) -> str:
        """HTML of what RL sampled at one step (default: the last logged), `groups_per_type` groups of each question
        type, every rollout of a group with its reward and advantage (GRPO compares them within the group); saved as
        figures/training_rollouts_step<N>.html. Needs `save_train_rollouts`. Also prints the per-step summary."""
        from searchrl.evaluation.render import render_trajectory
        from searchrl.trainer.levers.rollout_log import read_rollouts, step_summary

        rollouts = read_rollouts(self.run_dir / "trajectories" / "train")
        if rollouts.empty:
            print("no training rollouts were logged (save_train_rollouts off, or no RL step ran)")
            return ""
        print(step_summary(rollouts).round(3).to_string())
        step = int(rollouts["step"].max()) if step is None else step
        at = rollouts[(rollouts["step"] == step) & (rollouts["draw"] == 0)]
        if at.empty:
            raise ValueError(f"no rollouts logged at step {step}; logged steps: {sorted(rollouts['step'].unique())}")
        chosen = [g for _, part in at.groupby("qtype", sort=True) for g in part["group"].unique()[:groups_per_type]]
        html = "".join(f"<h4>step {step}, {row['qtype']}, group {row['group']}</h4>" * (i == 0)
                       + render_trajectory(row, self.protocol)
                       for g in chosen for i, row in enumerate(at[at["group"] == g].to_dict("records")))
        (self.run_dir / "figures").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "figures" / f"training_rollouts_step{step}.html").write_text(html)
        return html


CURVE_METRICS = ("reward", "search/scheduled_reward", "search/searches_per_sample", "completions/model_tokens",
                 "probe/f1", "probe/searches")


def curve_trends(frame: pd.DataFrame) -> dict[str, dict]:
    """First-quarter and last-quarter means of each logged curve in CURVE_METRICS (`searchrl.core.stats.quarter_gain`),
    in step order: the "does the curve rise" number a seed report compares."""
    from searchrl.core.stats import quarter_gain

    ordered = frame.sort_values("step") if "step" in frame else frame
    return {m: quarter_gain(ordered[m].to_numpy(dtype=float)) for m in CURVE_METRICS
            if m in ordered and ordered[m].notna().sum() >= 2}


def _show(fig) -> None:
    """Display a figure beside the cell's result in a notebook (papermill or JupyterLab); nothing elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(fig)

"""An experiment's evaluations: greedy rollouts on the held-out questions per stage, and the tables built from them.

Each method writes what it produced into the run folder (eval/<stage>.json, the stage's trajectories, eval/table.json
and eval/table.md, eval/type_table.json, eval/checks.json). Every evaluation JSON carries its protocol (corpus,
retriever, top-k, questions, metrics, prompt, budgets, decoding: `searchrl.evaluation.protocol`), and the stage table
the stages' protocols: the fields they share, and where they differ.
"""

from __future__ import annotations

import pandas as pd

from searchrl.core.files import save_figure, write_json
from searchrl.experiments.experiment_figures import _show
from searchrl.runs.folder import stage_trajectories_path
from searchrl.runs.memory import measured

__all__ = ["ExperimentEvaluation", "corpus_label"]


def corpus_label(cfg) -> str:
    """The corpus a run searches, by name: the synthetic world and its seed, or the corpus file."""
    if cfg.dataset == "synthetic":
        return f"synthetic world (world_seed {cfg.world_seed}, {cfg.world_entities} entities)"
    return str(cfg.corpus)


class ExperimentEvaluation:
    """Evaluation stages and their tables. A mixin of `searchrl.experiments.experiment.Experiment`, which builds what
    it reads (cfg, run_dir, protocol, retriever, tokenizer, the question rows, results, history)."""

    def evaluate(self, model, stage: str, *, max_searches: int | None = None, n_questions: int = 0):
        """Search rollouts on the evaluation questions, decoded as `searchrl.config.eval_decoding` says (greedy by default); saves
        eval/<stage>.json and trajectories.
        `max_searches` overrides the run's search budget for this stage only (0: answer without searching);
        `n_questions` > 0 evaluates only the first that many questions (the notebooks pass `n_eval_untrained`)."""
        import dataclasses

        from searchrl.evaluation.evaluate import evaluate
        cfg = self.cfg
        rollout = cfg.eval_rollout_config()  # `evaluate` itself stops at a retriever outage, whatever the run allows
        if max_searches is not None:
            # forced_searches acts on training rollouts only, but may not exceed the budget it is checked against
            forced = min(rollout.forced_searches, max_searches)
            rollout = dataclasses.replace(rollout, max_searches=max_searches, forced_searches=forced,
                                          train_forced_opener=rollout.train_forced_opener and forced > 0)
        slug = stage.replace(" ", "_")
        # eval_rows interleave the types, so a prefix covers them all
        rows = self.eval_rows[:n_questions] if n_questions > 0 else self.eval_rows
        with measured(self.run_dir, f"evaluate: {stage}"):
            result = evaluate(model, self.tokenizer, self.protocol, self.retriever, rows,
                              rollout=rollout, greedy=rollout.temperature == 0, batch_size=cfg.eval_batch_size,
                              chat=cfg.chat_prompt,
                              desc=f"evaluate: {stage}", records_path=stage_trajectories_path(self.run_dir, stage),
                              resume=cfg.resume, corpus_name=corpus_label(cfg))
        result.to_json(self.run_dir / "eval" / f"{slug}.json")
        result.trajectories_jsonl(stage_trajectories_path(self.run_dir, stage))
        self.results[stage] = result
        return result

    def no_search_baseline(self, model, stage: str = "no search"):
        """The same policy answering with a search budget of 0 (its first search request gets the budget notice),
        when `eval_no_search` is on: a type whose F1 after RL is no better than this was won by guessing, not by
        searching. Returns None when the parameter is off."""
        if not self.cfg.eval_no_search:
            print("eval_no_search is off: no no-search baseline")
            return None
        return self.evaluate(model, stage, max_searches=0)

    def stage_table(self) -> pd.DataFrame:
        """The stage table (`searchrl.evaluation.evaluate.stage_table`), saved as eval/table.json (its rows, each
        stage's protocol and their comparison) and eval/table.md (the table with its protocol block under it); the
        protocol block is printed."""
        from searchrl.evaluation.evaluate import stage_table
        from searchrl.evaluation.protocol import markdown_table

        table = stage_table(self.results)
        protocols = table.attrs["protocols"]
        write_json(self.run_dir / "eval" / "table.json", {
            "rows": table.reset_index().to_dict("records"),
            "protocols": {stage: res.protocol.to_dict() if res.protocol is not None else None
                          for stage, res in self.results.items()},
            "protocol_comparison": protocols.to_dict()})
        (self.run_dir / "eval" / "table.md").write_text(markdown_table(table) + "\n\n" + protocols.markdown() + "\n",
                                                        encoding="utf-8")
        print(protocols.text())
        return table

    def paper_layout(self, layout: str = "search_r1_table2", dataset: str = "hotpotqa",
                     models: tuple[str, ...] = ("Qwen2.5-3B",)):
        """Each evaluated stage as a row of a paper's table (evaluation/paper_tables.py), under `dataset`'s column
        beside the paper's printed numbers for `models`, the caption naming every setting that differs; also
        written to eval/paper_table.md. None on the synthetic world, whose questions no paper evaluates."""
        from searchrl.evaluation.paper_tables import our_settings, paper_table

        if self.cfg.dataset == "synthetic":
            print("paper layout: the synthetic world is no paper's benchmark; nothing to set beside the papers")
            return None
        rows = [{"method": stage, "dataset": dataset, "metric": metric, "value": res.records[metric].mean(),
                 "n": len(res.records)} for stage, res in self.results.items() for metric in ("em", "f1")]
        table = paper_table(pd.DataFrame(rows), layout, models=list(models), ours=our_settings(self.cfg))
        (self.run_dir / "eval" / "paper_table.md").write_text(table.to_markdown(), encoding="utf-8")
        return table

    def type_table(self, before: str = "after cold start", after: str = "after RL",
                   no_search: str = "no search") -> pd.DataFrame | None:
        """Per question type, `before` -> `after`: F1 with the paired interval of its change, searches, and (when
        the no-search stage ran) whether a rise came without search being shown to help (`searchrl.evaluation.type_table`);
        saved as eval/type_table.json, drawn in figures/type_changes.png. None, with a note, when `before` or
        `after` was not evaluated."""
        from searchrl.analysis.plots import type_change_bars
        from searchrl.evaluation.type_table import type_table

        missing = [s for s in (before, after) if s not in self.results]
        if missing:
            print(f"type table: stage(s) {', '.join(missing)} not evaluated in this run")
            return None
        table = type_table(self.results, before, after, no_search if no_search in self.results else None)
        write_json(self.run_dir / "eval" / "type_table.json", table.reset_index().to_dict("records"))
        fig = type_change_bars(table, title=f"{before} -> {after}")
        save_figure(fig, self.run_dir / "figures" / "type_changes.png")
        _show(fig)
        return table

    def learning_checks(self) -> pd.DataFrame:
        """Did RL learn in this run (`searchrl.analysis.learning_checks`: F1 gain with its interval, reward trend, searches
        by hop count, format, guessing), read from the tables the cells above saved; printed and saved as
        eval/checks.json. Run it after `stage_table`, `curves` and `type_table`."""
        from searchrl.analysis.learning_checks import format_checks, learning_checks

        table = learning_checks({self.cfg.seed: self.run_dir})
        write_json(self.run_dir / "eval" / "checks.json", table.reset_index().to_dict("records"))
        print(format_checks(table))
        return table

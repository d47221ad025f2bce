"""The evaluation harness behind `notebooks/eval_benchmarks.ipynb`: models and baselines over benchmarks, in one run.

    suite = EvalSuite(cfg)                 # cfg.benchmarks, cfg.eval_models, cfg.baselines, cfg.eval_metrics, cfg.judge
    results = suite.run()                  # tidy frame: method, dataset, metric, value, n, ci_low, ci_high
    suite.table()                          # one row per method, one column per (dataset, metric)
    suite.paper_tables()                   # our rows beside the papers' own numbers, in their layouts
    suite.protocols()                      # every row's protocol: what they share, where they differ

Every method (a search policy or a baseline from `searchrl.evaluation.baselines`) is scored on the same questions with the
same metrics, so one table holds them all, and every cell carries a bootstrap interval over questions. The
per-question records are written as they are produced (`trajectories/<benchmark>/<method>.jsonl`), so an
interrupted run started again with `resume` continues where it stopped.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from searchrl.config import RunConfig
from searchrl.config.replay import RECORD_FOLDER
from searchrl.core.files import save_figure, write_json
from searchrl.core.stats import bootstrap_mean, paired_bootstrap
from searchrl.core.threads import apply_torch_threads
from searchrl.runs.folder import current_run_dir
from searchrl.runs.status import mark_status

# Methods named in `eval_models` are search policies; this entry means the run's own `model`, untrained.
POLICY = "policy"
# The benchmark name of the synthetic world (the run's world_* settings), beside searchrl.data.benchmarks' names.
SYNTHETIC = "synthetic"


@dataclass
class SyntheticBenchmark:
    """The synthetic world's held-out questions as a benchmark (needs no data files, so the smoke run has one)."""

    rows: list
    corpus: list
    name: str = SYNTHETIC

    @classmethod
    def from_config(cls, cfg: RunConfig) -> SyntheticBenchmark:
        from searchrl.data.synthetic import world_of
        from searchrl.experiments.experiment_data import held_out_rows

        # The run's own world and held-out questions (the same for every training seed, so seeds pair up).
        world = world_of(cfg)
        return cls(rows=held_out_rows(world.splits[cfg.eval_split], cfg), corpus=world.corpus)

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "questions": len(self.rows), "corpus_passages": len(self.corpus),
                "hops": "1-4", "papers": "none (fictional world: answers cannot come from memory)"}


def resolve_checkpoint(entry: str) -> tuple[str, str | None]:
    """(what `load_policy` should load, the protocol it was trained with or None) for one `eval_models` entry:
    a model folder, a run folder (its newest saved policy: RL after cold start), or a bundled name / hub id."""
    path = Path(entry).expanduser()
    if not path.exists():
        return entry, None
    if (path / "config.json").exists():
        run = path.parent.parent if path.parent.name == "checkpoints" else None
        return str(path), _run_protocol(run)
    folder = path / "checkpoints"
    saved = [p for p in folder.iterdir() if (p / "config.json").exists()] if folder.is_dir() else []
    if not saved:
        raise FileNotFoundError(f"eval_models: {entry} is a folder but neither a saved model (no config.json) nor a "
                                f"run folder with saved policies under checkpoints/")
    return str(max(saved, key=lambda p: p.stat().st_mtime)), _run_protocol(path)


def _run_protocol(run_dir: Path | None) -> str | None:
    """The protocol a run folder's policy was trained with (a checkpoint searches only under its own prompt)."""
    params = run_dir / "params.yaml" if run_dir else None
    if params is None or not params.exists():
        return None
    from searchrl.config import load_params_file

    return load_params_file(params)[0].get("protocol")


def method_label(entry: str) -> str:
    """A short row label for a model entry: 'policy', a bundled name, or '<run folder>/<checkpoint>'."""
    path = Path(entry)
    if not path.exists():
        return entry
    return f"{path.parent.parent.name}/{path.name}" if path.parent.name == "checkpoints" else path.name


class EvalSuite:
    """One evaluation run over `cfg.benchmarks` x (`cfg.eval_models` + `cfg.baselines`)."""

    def __init__(self, cfg: RunConfig, notebook: str = "eval_benchmarks"):
        from searchrl.experiments.experiment_data import seed_everything
        from searchrl.models import load_tokenizer

        self.cfg = cfg
        self.run_dir = current_run_dir(notebook, cfg)
        seed_everything(cfg.seed)
        apply_torch_threads(cfg.torch_threads)
        self.tokenizer = load_tokenizer(cfg.model)
        self.results: dict[tuple[str, str], Any] = {}  # (benchmark, method) -> EvalResult
        self._benchmarks: dict[str, Any] = {}
        self._judge = None

    # ---- inputs -----------------------------------------------------------------------------------------------

    def benchmark(self, name: str):
        """The benchmark's questions (n_eval of them, subsampled by seed) and corpus, loaded once."""
        from searchrl.data.benchmarks import load_benchmark

        if name not in self._benchmarks:
            cfg = self.cfg
            if name == SYNTHETIC:
                self._benchmarks[name] = SyntheticBenchmark.from_config(cfg)
            else:
                self._benchmarks[name] = load_benchmark(name, data_dir=cfg.data_dir or None, limit=cfg.n_eval,
                                                        seed=cfg.seed, corpus=cfg.corpus or None)
        return self._benchmarks[name]

    def describe(self) -> pd.DataFrame:
        """What will be evaluated: one row per benchmark (questions, corpus, papers reporting it)."""
        rows = [self.benchmark(name).summary() for name in self.cfg.benchmarks]
        frame = pd.DataFrame(rows)
        write_json(self.run_dir / "data.json", frame.to_dict("records"))
        return frame

    def _retriever(self, bench):
        from searchrl.retrieval import make_retriever

        if bench.corpus is None:
            return None
        from searchrl.retrieval.recording import RecordingRetriever
        from searchrl.retrieval.service import service_options

        options = service_options(self.cfg)
        if self.cfg.retriever == "dense" and self.cfg.index_cache_dir:
            options["cache_dir"] = self.cfg.index_cache_dir
        # recorded in retrieval/ of the run folder, so that `retriever: replay:<run folder>` answers them again
        return RecordingRetriever(make_retriever(self.cfg.retriever, bench.corpus, **options),
                                  self.run_dir / RECORD_FOLDER, corpus=bench.corpus)

    # ---- running ----------------------------------------------------------------------------------------------

    def run(self) -> pd.DataFrame:
        """Evaluate every method on every benchmark; returns (and saves as results.csv) the tidy results, and
        prints (and saves as tables/protocols.md) how the rows' protocols compare."""
        from searchrl.models import load_policy

        cfg = self.cfg
        dtype = torch.bfloat16 if cfg.bf16 else torch.float32
        retrievers = {name: self._retriever(self.benchmark(name)) for name in cfg.benchmarks}
        base, _ = load_policy(cfg.model, dtype=dtype, device=cfg.device)
        announce = _Announcer(len(cfg.benchmarks) * (len(cfg.baselines) + len(cfg.eval_models)))
        for name in cfg.benchmarks:
            for baseline in cfg.baselines:
                announce(baseline, name)
                self._evaluate_baseline(name, baseline, base, retrievers[name], self.benchmark(name).rows)
        for entry in cfg.eval_models:  # each policy loaded once, for every benchmark
            path, protocol = resolve_checkpoint(cfg.model if entry == POLICY else entry)
            model = base if entry == POLICY else load_policy(path, dtype=dtype, device=cfg.device)[0]
            for name in cfg.benchmarks:
                announce(method_label(entry), name)
                self._evaluate_policy(name, method_label(entry), model, protocol or cfg.protocol, retrievers[name],
                                      self.benchmark(name).rows)
            if model is not base:
                del model
                gc.collect()
        del base
        gc.collect()
        frame = self.tidy()
        frame.to_csv(self.run_dir / "results.csv", index=False)
        print(self.protocols().text())
        return frame

    def _evaluate_policy(self, bench: str, label: str, model, protocol: str, retriever, rows) -> None:
        from searchrl.evaluation.evaluate import evaluate

        if retriever is None:
            print(f"{bench}: no corpus, so the search policy {label} is not evaluated (set `corpus`)")
            return
        records = self.run_dir / "trajectories" / bench / f"{_slug(label)}.jsonl"
        rollout = self.cfg.eval_rollout_config()
        result = evaluate(model, self.tokenizer, protocol, retriever, rows, rollout=rollout,
                          greedy=rollout.temperature == 0, batch_size=self.cfg.eval_batch_size,
                          chat=self.cfg.chat_prompt, desc=f"{bench}: {label}", records_path=records,
                          resume=self.cfg.resume, corpus_name=self._corpus_name(bench))
        self._finish_result(bench, label, result)

    def _evaluate_baseline(self, bench: str, baseline: str, model, retriever, rows) -> None:
        from searchrl.evaluation.baselines import MissingRetrieverError, evaluate_baseline

        finished = self.finished_result(bench, baseline, rows) if self.cfg.resume else None
        if finished is not None:  # a resumed run keeps the baselines it already scored (they have no resume of
            self.results[(bench, baseline)] = finished  # their own, and some take the better part of an hour)
            print(f"{bench}: {baseline} already scored in this run; kept")
            return
        try:  # baselines decode greedily
            result = evaluate_baseline(baseline, model, self.tokenizer, retriever, rows,
                                       rollout=self.cfg.eval_rollout_config(), batch_size=self.cfg.eval_batch_size,
                                       chat=self.cfg.chat_prompt, desc=f"{bench}: {baseline}")
        except MissingRetrieverError:
            print(f"{bench}: no corpus, so baseline {baseline} (it retrieves) is not evaluated")
            return
        self._finish_result(bench, baseline, result)

    def _corpus_name(self, bench: str) -> str:
        return self.cfg.corpus or f"{bench} (its default corpus)"

    def _finish_result(self, bench: str, method: str, result) -> None:
        """Add the run's extra metrics and judge verdicts to the records (and to its protocol), then save them."""
        from searchrl.metrics.scoring import metric

        records = result.records
        for name in self.cfg.eval_metrics:
            if name not in records:
                score = metric(name)
                records[name] = [score(p, g) for p, g in zip(records["prediction"], records["golden_answers"])]
        judge = self.judge()
        if judge is not None:
            from searchrl.judge import score_records

            score_records(records, judge, cache=self.run_dir / "judge_cache.jsonl", desc=f"judge: {bench} {method}")
        if result.protocol is not None:
            judged = [f"judge:{self.cfg.judge}"] if judge is not None else []
            result.protocol = result.protocol.with_metrics([*self.cfg.eval_metrics, *judged]).replace(
                corpus=result.protocol.corpus or self._corpus_name(bench))
        result.to_json(self.run_dir / "eval" / bench / f"{_slug(method)}.json")
        result.trajectories_jsonl(self.run_dir / "trajectories" / bench / f"{_slug(method)}.jsonl")
        self.results[(bench, method)] = result

    def finished_result(self, bench: str, method: str, rows) -> Any:
        """The saved result of `method` on `bench` when this run folder holds a complete one for exactly `rows`
        (both its summary and its records, written last), else None."""
        import json

        from searchrl.evaluation.evaluate import EvalResult
        from searchrl.evaluation.protocol import protocol_of

        summary = self.run_dir / "eval" / bench / f"{_slug(method)}.json"
        records = self.run_dir / "trajectories" / bench / f"{_slug(method)}.jsonl"
        if not (summary.exists() and records.exists()):
            return None
        try:
            frame = pd.read_json(records, lines=True, dtype={"id": str})
            payload = json.loads(summary.read_text(encoding="utf-8"))
        except ValueError:  # a file cut short by a kill: score the method again
            return None
        if list(frame.get("id", [])) != [str(row.get("id", "")) for row in rows]:
            return None
        return EvalResult(records=frame, config=payload.get("config", {}), protocol=protocol_of(payload))

    def judge(self):
        """The LLM judge named by `judge` (None when off), built once."""
        if self._judge is None and self.cfg.judge not in ("", "none", "off"):
            from searchrl.judge import make_judge

            self._judge = make_judge(self.cfg.judge)
        return self._judge

    # ---- reporting --------------------------------------------------------------------------------------------

    def metrics(self) -> list[str]:
        """Metrics reported in the tables: the run's answer metrics, the judge, then retrieval count and length."""
        names = list(self.cfg.eval_metrics)
        if self.judge() is not None:
            names.append("judge")
        return names + ["searches", "format_ok", "model_tokens"]

    def tidy(self) -> pd.DataFrame:
        """One row per (method, dataset, metric): mean, n and a 95% bootstrap interval over questions."""
        rows = []
        for (bench, method), result in self.results.items():
            records = result.records
            for name in self.metrics():
                if name not in records:
                    continue
                values = records[name].astype(float).to_numpy()
                low, high = _bootstrap_interval(values, seed=self.cfg.seed)
                rows.append({"method": method, "dataset": bench, "metric": name, "value": float(values.mean()),
                             "n": len(values), "ci_low": low, "ci_high": high})
        return pd.DataFrame(rows, columns=["method", "dataset", "metric", "value", "n", "ci_low", "ci_high"])

    def table(self, metrics: list[str] | None = None) -> pd.DataFrame:
        """Methods as rows, (dataset, metric) as columns, in the order they were run."""
        frame = self.tidy()
        if metrics:
            frame = frame[frame["metric"].isin(metrics)]
        order = list(dict.fromkeys(frame["method"]))
        wide = frame.pivot_table(index="method", columns=["dataset", "metric"], values="value", sort=False)
        return wide.reindex(order).round(3)

    def paired(self, reference: str | None = None, metric: str = "f1") -> pd.DataFrame:
        """Each method minus `reference` (default: the first method run) on the questions both answered, per
        dataset, with the paired-bootstrap 95% interval: the test of whether one row beats another."""
        if reference is None:
            if not self.results:
                raise ValueError("nothing evaluated yet: call run() first")
            reference = next(iter(self.results))[1]
        rows = []
        for (bench, method), result in self.results.items():
            base = self.results.get((bench, reference))
            if base is None or method == reference or metric not in result.records:
                continue
            a = base.records.set_index("id")[metric]
            b = result.records.set_index("id")[metric]
            common = a.index.intersection(b.index)
            diff, low, high = paired_bootstrap(a.loc[common].astype(float).to_numpy(),
                                               b.loc[common].astype(float).to_numpy(), seed=self.cfg.seed)
            rows.append({"dataset": bench, "method": method, "reference": reference, "metric": metric,
                         "difference": diff, "ci_low": low, "ci_high": high, "n": len(common)})
        frame = pd.DataFrame(rows)
        frame.to_csv(self.run_dir / f"paired_{_slug(reference)}_{metric}.csv", index=False)
        return frame

    def tool_summaries(self, metric: str = "f1") -> pd.DataFrame:
        """R-Search-as-a-Tool rows (`evidence_tool:` baselines), one per dataset: the other model's and the policy's
        own scores on the same questions, the evidence rate, and tool minus policy on `metric` with its paired
        95% interval (`searchrl.evaluation.rstool.tool_summary`); saved as tool_summary.csv. Empty without such a
        baseline."""
        from searchrl.evaluation.rstool import tool_summary

        rows = [{"dataset": bench, "method": method, **tool_summary(result, metric)}
                for (bench, method), result in self.results.items() if f"policy_{metric}" in result.records]
        frame = pd.DataFrame(rows)
        if rows:
            frame.to_csv(self.run_dir / "tool_summary.csv", index=False)
        return frame

    def protocols(self):
        """Every (method, benchmark) evaluation's protocol compared (`searchrl.evaluation.protocol`): the fields
        they share, and where they differ, with a marker per row; saved as tables/protocols.md."""
        from searchrl.evaluation.protocol import compare_protocols

        comparison = compare_protocols({f"{method} / {bench}": result.protocol
                                        for (bench, method), result in self.results.items()})
        folder = self.run_dir / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "protocols.md").write_text(comparison.markdown() + "\n", encoding="utf-8")
        return comparison

    def paper_tables(self) -> dict[str, Any]:
        """Our results in each layout of `paper_layouts`, beside the papers' numbers, with the protocols of our rows
        against the paper's; saved as markdown and HTML."""
        from searchrl.evaluation.paper_tables import LAYOUTS, our_settings, paper_table

        frame = self.tidy()
        frame = frame[~frame["metric"].isin(["format_ok", "model_tokens"])]
        out = {}
        folder = self.run_dir / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        for layout in self.cfg.paper_layouts:
            spec = LAYOUTS.get(layout)
            fits = frame[[spec.dataset_label(d) is not None for d in frame["dataset"]]]
            if fits.empty:
                print(f"{layout}: none of this run's benchmarks ({', '.join(self.cfg.benchmarks)}) is a column of "
                      "the paper's table, so it shows the paper's rows only")
            shown = {f"{method} / {bench}": result.protocol for (bench, method), result in self.results.items()
                     if spec.dataset_label(bench) is not None}
            table = paper_table(fits if len(fits) else None, layout, ours=our_settings(self.cfg), label="searchrl",
                                protocols=shown)
            (folder / f"{layout}.md").write_text(table.to_markdown())
            (folder / f"{layout}.html").write_text(table.to_html())
            out[layout] = table
        return out

    def bars(self, metric: str | None = None):
        """One panel per dataset: each method's `metric` (default: the first answer metric) with its interval."""
        import matplotlib.pyplot as plt

        metric = metric or self.cfg.eval_metrics[0]
        frame = self.tidy()
        frame = frame[frame["metric"] == metric]
        datasets = list(dict.fromkeys(frame["dataset"]))
        fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(4 * max(1, len(datasets)), 3.5), squeeze=False)
        for ax, bench in zip(axes[0], datasets):
            part = frame[frame["dataset"] == bench]
            errors = np.vstack([part["value"] - part["ci_low"], part["ci_high"] - part["value"]])
            ax.barh(part["method"], part["value"], xerr=errors, color="#4c72b0", capsize=3)
            ax.set_title(f"{bench} (n={int(part['n'].max()) if len(part) else 0})")
            ax.set_xlabel(f"{metric} (95% CI)")
            ax.invert_yaxis()
        fig.tight_layout()
        save_figure(fig, self.run_dir / "figures" / f"benchmarks_{metric}.png")
        return fig

    def finish(self) -> Path:
        mark_status(self.run_dir, "completed")
        print(f"Results in {self.run_dir}")
        return self.run_dir


class _Announcer:
    """Says which of a run's evaluations starts next: "evaluation 3 of 10: rag on hotpotqa".

    Each evaluation draws its own bar over the questions, and a run can hold ten of them over more than an hour, so
    without this nothing tells how far the run as a whole has got. A line rather than an outer bar: text bars nested
    in a log streamed from a headless kernel redraw over each other, while a line between two bars stays readable.
    """

    def __init__(self, total: int):
        self.total, self.done = total, 0

    def __call__(self, method: str, bench: str) -> None:
        self.done += 1
        print(f"evaluation {self.done} of {self.total}: {method} on {bench}", flush=True)


def _bootstrap_interval(values: np.ndarray, *, seed: int, n_resamples: int = 2000) -> tuple[float, float]:
    """95% percentile interval of the mean over questions (NaN for fewer than two questions)."""
    if len(values) < 2:
        return float("nan"), float("nan")
    return bootstrap_mean(values, n_resamples=n_resamples, seed=seed)[1:]


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


__all__ = ["POLICY", "SYNTHETIC", "EvalSuite", "SyntheticBenchmark", "method_label", "resolve_checkpoint"]

"""One notebook over several seeds, and the spread of its results.

`python -m searchrl.runner NOTEBOOK -f PARAMS --seeds 0 1 2` runs the notebook once per seed (each run its own folder,
`<run name>-seed<N>`), then writes a folder `outputs/<notebook>/<time>-<id>-seeds-<run name>/` with:
  seeds.csv       every seed's stage table (one row per seed and stage)
  spread.csv      per stage: mean, standard deviation, min and max over seeds of the headline metrics, how
                  many seeds' paired interval of the change from the previous stage lies above zero, and that
                  change pooled over seeds with one interval ("ΔF1 pooled", `searchrl.analysis.pooled`)
  spread.png      F1 per stage with one dot per seed, and each seed's change with its 95% interval
  curves.csv      per seed and training curve (reward, searches per sample, probe F1, ...): the mean of the first
                  and of the last quarter of logged steps, and the gain between them (each run's eval/curve.json)
  checks.csv      per seed: did RL learn (F1 gain with its interval, reward trend, searches by hop count, format,
                  guessing; `searchrl.analysis.learning_checks`)
  types.csv       per seed and question type: the change cold start -> RL with its paired interval, searches, F1
                  without search and the guessing flag (each run's eval/type_table.json, `searchrl.evaluation.type_table`)
  protocols.md    every seed's evaluation protocol per stage, compared: what they share and where they differ
                  ("protocol: not recorded" for runs made before evaluations recorded one)
  runs.json       the run folders, and the seeds that failed
A seed changes the sampling and the order of the training data, never the questions (those come from world_seed).

Runs made separately (two seeds side by side, say) get the same report with
`python -m searchrl.seeds RUN_DIR RUN_DIR ... [--out FOLDER]`; each run's seed is read from its params.yaml.
`--against RUN_DIR ...` (another lever's seeds on the same questions) adds the difference between the two levers
after RL, pooled over each one's seeds (against.json).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd

from searchrl.analysis.learning_checks import run_type_table
from searchrl.core.files import read_json, write_json
from searchrl.evaluation.protocol import ProtocolComparison, compare_protocols, protocol_of, stage_rows

# The stages a type table compares, by the file names their trajectories are saved under (`Experiment.evaluate`).

HEADLINE = ("F1", "EM", "F1 multi-hop", "searches/question", "searches multi-hop", "searches single-hop",
            "format-valid rate", "ΔF1 vs previous")


def seed_tables(run_dirs: dict[int, Path]) -> pd.DataFrame:
    """Every seed's stage table (`eval/table.json`) stacked, with a `seed` column; runs without one are left out."""
    frames = []
    for seed, run_dir in run_dirs.items():
        rows = stage_rows(read_json(Path(run_dir) / "eval" / "table.json"))
        if rows:
            frames.append(pd.DataFrame(rows).assign(seed=seed, run=str(run_dir)))
    if not frames:
        ablations = [str(run_dir) for run_dir in run_dirs.values() if (Path(run_dir) / "ablation.json").is_file()]
        if ablations:  # an ablation reports its seeds itself, in its own run folder (eval_table.csv, verdicts.csv)
            raise ValueError(f"none of the runs wrote an evaluation table (eval/table.json): {', '.join(ablations)} "
                             "are ablation runs, so give an ablation its seeds with -p seeds \"[0, 1, 2]\" and read "
                             "its eval_table.csv instead")
        raise ValueError("none of the runs wrote an evaluation table (eval/table.json), so give run folders of a "
                         "notebook that evaluates its stages (e.g. quickstart) whose runs completed")
    return pd.concat(frames, ignore_index=True)


def seed_protocols(run_dirs: dict[int, Path], stages: Sequence[str] | None = None) -> ProtocolComparison:
    """Every seed's evaluation protocol at each stage (eval/<stage>.json), compared: rows "seed N / stage". Stages
    default to those of each run's stage table."""
    stamps = {}
    for seed, run_dir in run_dirs.items():
        names = stages if stages is not None else [
            row["stage"] for row in stage_rows(read_json(Path(run_dir) / "eval" / "table.json")) if "stage" in row]
        for stage in names:
            payload = read_json(Path(run_dir) / "eval" / f"{stage.replace(' ', '_')}.json")
            stamps[f"seed {seed} / {stage}"] = protocol_of(payload)
    return compare_protocols(stamps)


def seed_curves(run_dirs: dict[int, Path]) -> pd.DataFrame:
    """Every seed's curve trends (`eval/curve.json`): one row per seed and metric (first, last, gain, points)."""
    rows = [{"seed": seed, "metric": metric, **trend}
            for seed, run_dir in run_dirs.items()
            for metric, trend in (read_json(Path(run_dir) / "eval" / "curve.json") or {}).items()]
    return pd.DataFrame(rows, columns=["seed", "metric", "first", "last", "gain", "points"])


def seed_types(run_dirs: dict[int, Path], type_tables: dict[int, pd.DataFrame | None] | None = None) -> pd.DataFrame:
    """Every seed's per-type table stacked, with a `seed` column (empty when no run has one). `type_tables`: the
    tables when the caller has read them already (`run_type_table`)."""
    if type_tables is None:
        type_tables = {seed: run_type_table(run_dir) for seed, run_dir in run_dirs.items()}
    frames = [table.assign(seed=seed) for seed, table in type_tables.items() if table is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def spread(tables: pd.DataFrame, pooled: dict[str, dict] | None = None) -> pd.DataFrame:
    """Per stage (in the order the runs evaluated them): mean, sd, min and max over seeds of the headline metrics,
    and `seeds with ΔF1 > 0` (seeds whose paired 95% interval of the change lies wholly above zero). `pooled`: per
    stage, the change from the previous stage pooled over seeds (`pooled_changes`), added as "ΔF1 pooled" with its
    interval and question count."""
    stages = list(dict.fromkeys(tables["stage"]))
    metrics = [m for m in HEADLINE if m in tables]
    rows = []
    for stage in stages:
        part = tables[tables["stage"] == stage]
        row: dict = {"stage": stage, "seeds": int(part["seed"].nunique())}
        for m in metrics:
            values = part[m].astype(float)
            row[f"{m} mean"] = values.mean()
            row[f"{m} sd"] = values.std(ddof=1) if values.notna().sum() > 1 else np.nan
            row[f"{m} min"], row[f"{m} max"] = values.min(), values.max()
        if "ΔF1 95% low" in part:
            row["seeds with ΔF1 > 0"] = int((part["ΔF1 95% low"].astype(float) > 0).sum())
        if pooled and stage in pooled:
            change = pooled[stage]
            row.update({"ΔF1 pooled": change["mean"], "ΔF1 pooled 95% low": change["low"],
                        "ΔF1 pooled 95% high": change["high"], "ΔF1 pooled questions": change["questions"]})
        rows.append(row)
    return pd.DataFrame(rows).set_index("stage")


def pooled_changes(run_dirs: dict[int, Path], tables: pd.DataFrame) -> dict[str, dict]:
    """Per stage after the first, its F1 change from the stage before it averaged over the seeds per question, with
    the interval bootstrapped over questions (`searchrl.analysis.pooled.pooled_change`); stages some run lacks are left out."""
    from searchrl.analysis.pooled import pooled_change

    stages = list(dict.fromkeys(tables["stage"]))
    runs = [run_dirs[seed] for seed in sorted(tables["seed"].unique())]
    changes = {}
    for before, after in pairwise(stages):
        change = pooled_change(runs, before, after)
        if change["questions"]:
            changes[after] = change
    return changes


def spread_figure(tables: pd.DataFrame):
    """Left: F1 per stage, a bar at the mean and a dot per seed. Right: each seed's change from the previous stage
    with its paired-bootstrap 95% interval (one marker per seed, stages side by side)."""
    from searchrl.analysis.plots import ReportFigure

    stages = list(dict.fromkeys(tables["stage"]))
    seeds = sorted(tables["seed"].unique())
    fig = ReportFigure(figsize=(10.0, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    x = np.arange(len(stages))
    means = [tables.loc[tables["stage"] == s, "F1"].mean() for s in stages]
    left.bar(x, means, 0.6, color=[f"C{i % 10}" for i in range(len(stages))], alpha=0.5)
    for j, seed in enumerate(seeds):
        part = tables[tables["seed"] == seed].set_index("stage")
        left.plot(x, [part["F1"].get(s, np.nan) for s in stages], "o", color="black", markersize=4,
                  label="one seed" if j == 0 else None)
    left.set_xticks(x, stages, rotation=15, ha="right")
    left.set_title(f"F1 per stage ({len(seeds)} seeds)")
    left.legend(fontsize="small")
    left.grid(axis="y", alpha=0.3)
    if "ΔF1 vs previous" in tables:
        changed = [s for s in stages if tables.loc[tables["stage"] == s, "ΔF1 vs previous"].notna().any()]
        width = 0.8 / max(len(seeds), 1)
        for j, seed in enumerate(seeds):
            part = tables[tables["seed"] == seed].set_index("stage")
            d = np.array([part["ΔF1 vs previous"].get(s, np.nan) for s in changed], dtype=float)
            lo = np.array([part["ΔF1 95% low"].get(s, np.nan) for s in changed], dtype=float)
            hi = np.array([part["ΔF1 95% high"].get(s, np.nan) for s in changed], dtype=float)
            xs = np.arange(len(changed)) + (j - (len(seeds) - 1) / 2) * width
            right.errorbar(xs, d, yerr=[d - lo, hi - d], fmt="o", capsize=3, label=f"seed {seed}")
        right.axhline(0, color="black", linewidth=0.8)
        right.set_xticks(np.arange(len(changed)), changed, rotation=15, ha="right")
        right.set_title("ΔF1 vs previous stage (paired 95% CI)")
        right.legend(fontsize="small")
        right.grid(axis="y", alpha=0.3)
    return fig


def _seed_report(run_dirs: dict[int, Path], folder: Path, failed: Sequence[int]) -> dict[str, pd.DataFrame]:
    """Read every run once, write the report files, and return what they hold (spread, curves, types, checks)."""
    from searchrl.analysis.learning_checks import learning_checks
    from searchrl.core.files import save_figure

    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "runs.json", {"runs": {str(s): str(d) for s, d in run_dirs.items()},
                                      "failed_seeds": list(failed)})
    tables = seed_tables(run_dirs)
    tables.to_csv(folder / "seeds.csv", index=False)
    protocols = seed_protocols(run_dirs)
    (folder / "protocols.md").write_text(protocols.markdown() + "\n", encoding="utf-8")
    curves = seed_curves(run_dirs)
    curves.to_csv(folder / "curves.csv", index=False)
    # a folder made before eval/type_table.json is rebuilt from its trajectories (bootstraps): once per run here
    type_tables = {seed: run_type_table(run_dir) for seed, run_dir in run_dirs.items()}
    types = seed_types(run_dirs, type_tables)
    if not types.empty:
        types.to_csv(folder / "types.csv", index=False)
    checks = learning_checks(run_dirs, type_tables=type_tables)
    checks.to_csv(folder / "checks.csv")
    table = spread(tables, pooled_changes(run_dirs, tables))
    table.to_csv(folder / "spread.csv")
    save_figure(spread_figure(tables), folder / "spread.png")
    return {"spread": table, "curves": curves, "types": types, "checks": checks, "protocols": protocols}


def write_seed_report(run_dirs: dict[int, Path], folder: Path, failed: Sequence[int] = ()) -> pd.DataFrame:
    """seeds.csv, spread.csv, spread.png, curves.csv, checks.csv, types.csv (when any run has a per-type table) and
    runs.json in `folder`; returns the spread table."""
    return _seed_report(run_dirs, folder, failed)["spread"]


def report_seeds(run_dirs: dict[int, Path], folder: Path, failed: Sequence[int] = ()) -> str:
    """Write the report (`write_seed_report`) and return it as text: the spread per stage, each
    curve's gain per seed, each type's change per seed, the learning checks, and the folder."""
    from searchrl.analysis.learning_checks import format_checks

    report = _seed_report(run_dirs, folder, failed)
    parts = [f"spread over seeds {sorted(run_dirs)}:", format_spread(report["spread"]), report["protocols"].text()]
    if not report["curves"].empty:
        parts.append(format_curves(report["curves"]))
    if not report["types"].empty:
        parts.append(format_types(report["types"]))
    parts.append("did RL learn (searchrl/analysis/learning_checks.py):\n" + format_checks(report["checks"]))
    parts.append(f"report: {folder}")
    return "\n".join(parts)


def format_spread(table: pd.DataFrame) -> str:
    """The spread as text: mean ± sd [min, max] of F1 and ΔF1 per stage, and the seeds whose change is above zero."""
    lines = []
    for stage, row in table.iterrows():
        text = f"{stage:<20} F1 {row['F1 mean']:.3f} ± {_sd(row['F1 sd'])} [{row['F1 min']:.3f}, {row['F1 max']:.3f}]"
        if "ΔF1 vs previous mean" in row and pd.notna(row["ΔF1 vs previous mean"]):
            text += (f"   ΔF1 {row['ΔF1 vs previous mean']:+.3f} ± {_sd(row['ΔF1 vs previous sd'])}"
                     f"   interval above 0 in {int(row['seeds with ΔF1 > 0'])} of {int(row['seeds'])} seeds")
        if pd.notna(row.get("ΔF1 pooled", np.nan)):
            text += (f"   pooled over seeds {row['ΔF1 pooled']:+.3f} [{row['ΔF1 pooled 95% low']:+.3f}, "
                     f"{row['ΔF1 pooled 95% high']:+.3f}] on {int(row['ΔF1 pooled questions'])} questions")
        lines.append(text)
    return "\n".join(lines)


def format_curves(curves: pd.DataFrame) -> str:
    """Each curve's gain (last quarter of steps minus first) over seeds, as text: one line per metric."""
    lines = []
    for metric, part in curves.groupby("metric", sort=False):
        gains = ", ".join(f"seed {int(r.seed)} {r.gain:+.3f}" for r in part.itertuples())
        lines.append(f"{metric:<28} last quarter of steps minus first: {gains}")
    return "\n".join(lines)


def format_types(types: pd.DataFrame) -> str:
    """Each question type's change over seeds, as text: ΔF1 [95%] and searches per question before -> after, per
    seed, with "guessed" where the rise was not shown to need search; one line per type."""
    searches = [c for c in types.columns if c.startswith("searches ")][:2]  # before, after (type_table's order)
    lines = []
    for qtype, part in types.groupby("qtype", sort=False):
        cells = [f"seed {int(r['seed'])} {r['ΔF1']:+.3f} [{r['ΔF1 95% low']:+.3f}, {r['ΔF1 95% high']:+.3f}]"
                 + (f" searches {r[searches[0]]:.2f}->{r[searches[1]]:.2f}" if len(searches) == 2 else "")
                 + (" guessed" if r.get("gained by guessing") in (True, 1) else "")
                 for r in part.to_dict("records")]
        lines.append(f"{qtype:<22} ΔF1 " + "; ".join(cells))
    return "\n".join(lines)


def _sd(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m searchrl.seeds RUN_DIR ...`: the spread report over run folders made separately."""
    import argparse

    import yaml

    parser = argparse.ArgumentParser(
        prog="python -m searchrl.seeds",
        description="The spread over seeds (the runner's --seeds report) of run folders made separately, e.g. two "
                    "seeds run side by side. Each run's seed is read from its params.yaml.")
    parser.add_argument("runs", nargs="+", type=Path, help="run folders, one per seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="report folder (default: a new <time>-<id>-seeds[-NAME] folder beside the first run)")
    parser.add_argument("--name", default="", help="label for the default report folder's name")
    parser.add_argument("--against", nargs="+", type=Path, default=[], metavar="RUN",
                        help="another lever's run folders (one per seed): also report these runs minus those at "
                             "--stage, per question averaged over each set's seeds, with an interval over questions")
    parser.add_argument("--stage", default="after RL", help="the stage --against compares (default: after RL)")
    args = parser.parse_args(argv)

    def by_seed(runs: Sequence[Path]) -> dict[int, Path]:
        found: dict[int, Path] = {}
        for run in runs:
            params = run / "params.yaml"
            if not params.is_file():
                parser.error(f"{run} is not a run folder: it has no params.yaml")
            seed = int((yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("seed", 0))
            if seed in found:
                parser.error(f"{run} and {found[seed]} both ran seed {seed}: give one folder per seed")
            found[seed] = run
        return found

    run_dirs = by_seed(args.runs)
    against = by_seed(args.against) if args.against else {}
    if args.out is None:
        from searchrl.runs.folder import create_run_dir

        first = args.runs[0].resolve()
        folder = create_run_dir(first.parent.name, "seeds" + (f"-{args.name}" if args.name else ""),
                                first.parent.parent)
    else:
        folder = args.out
    print(report_seeds(run_dirs, folder))
    if against:
        from searchrl.analysis.pooled import format_interval, lever_difference

        difference = lever_difference(list(run_dirs.values()), list(against.values()), stage=args.stage)
        both = {**{f"run {s}": d for s, d in run_dirs.items()}, **{f"against {s}": d for s, d in against.items()}}
        print(compare_protocols({label: protocol_of(read_json(Path(d) / "eval" / f"{args.stage.replace(' ', '_')}.json"))
                                 for label, d in both.items()}).text())
        if not difference["questions"]:
            parser.error(f"the runs and --against share no question evaluated at stage {args.stage!r}")
        write_json(folder / "against.json", {"stage": args.stage, "runs": [str(r) for r in run_dirs.values()],
                                             "against": [str(r) for r in against.values()], **difference})
        print(f"{args.stage}, these runs (seeds {sorted(run_dirs)}) minus --against (seeds {sorted(against)}): "
              + format_interval(difference, "F1"))
    return 0


__all__ = ["format_curves", "format_spread", "format_types", "pooled_changes", "report_seeds", "run_type_table",
           "seed_curves", "seed_protocols", "seed_tables", "seed_types", "spread", "spread_figure",
           "write_seed_report"]


if __name__ == "__main__":
    raise SystemExit(main())

"""Run a notebook with a parameter file into a new run folder: ``python -m searchrl.runner NOTEBOOK -f PARAMS.yaml``.

Everything that can be checked is checked before anything heavy starts: the notebook exists and has a cell tagged
``parameters`` holding only ``name = literal`` lines whose names are RunConfig fields; each parameter file is a
mapping meant for this notebook (its ``notebook:`` key, or its folder ``params/<notebook>/``); every key and value
fits :class:`~searchrl.config.RunConfig`. Then a run folder is created, ``params.yaml`` and ``provenance.json`` are
written, and the notebook is executed by papermill with ``SEARCHRL_RUN_DIR`` pointing at the folder. The executed
notebook is saved in the folder whether the run completes, fails or is interrupted, and ``status.json`` says which.

Precedence, lowest first: RunConfig defaults, the notebook's parameters cell, ``-f`` files in order, ``-p`` values,
``--run-name`` / ``--output-root``. Papermill receives only the values that differ from what the notebook would
use by itself, so the injected cell shows exactly what this run changed.

This module is the command line (``--seeds`` included) and its report of where a run's results are; the checks and
the plan are in `searchrl.experiments.runner_plan`, the execution in `searchrl.experiments.runner_exec`.

Examples::

    python -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml
    python -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml -p rl_steps 5 -p rewards "[em, f1]"
    python -m searchrl.runner --resume outputs/quickstart/20250101-120000-ab12
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchrl.config import ConfigError
from searchrl.core.files import read_json
from searchrl.experiments.runner_exec import RunError, run_notebook
from searchrl.experiments.runner_plan import NotebookError, RunPlan, _parse_overrides, plan_run

__all__ = ["main"]


def summarize(run_dir: Path) -> str:
    """Where the results of a run are: folder, notebook, parameters, metrics, evaluation files and figures."""
    lines = [f"run folder: {run_dir}"]
    notebooks = sorted(run_dir.glob("*.ipynb"))
    attempts = [p for p in notebooks if ".attempt-" in p.name]  # each resume keeps the earlier executed notebook
    for path in notebooks:
        if path not in attempts:
            lines.append(f"  {'notebook':<10} {path}"
                         + (f" (earlier attempts: {len(attempts)} *.attempt-N.ipynb beside it)" if attempts else ""))
    for pattern, label in (("metrics.*", "metrics"), ("eval/*.json", "evaluation"), ("*.csv", "table")):
        for path in sorted(run_dir.glob(pattern)):
            lines.append(f"  {label:<10} {path}")
    figures = sorted(run_dir.glob("figures/*.png"))
    if figures:
        lines.append(f"  figures    {run_dir / 'figures'} ({', '.join(p.name for p in figures)})")
    return "\n".join(lines)


def result_table(run_dir: Path) -> str | None:
    """The run's stage table (eval/table.json) as text, the headline numbers first; None when there is none."""
    from searchrl.evaluation.protocol import stage_rows

    rows = stage_rows(read_json(run_dir / "eval" / "table.json"))
    if not rows:
        return None
    import pandas as pd

    table = pd.DataFrame(rows).set_index("stage")
    first = [c for c in ("EM", "F1", "F1 multi-hop", "searches/question", "format-valid rate") if c in table]
    table = table[first + [c for c in table if c not in first]]
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        return str(table)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m searchrl.runner",
        description="Execute a notebook with parameter files into a new run folder (outputs/<notebook>/<run id>/).",
    )
    parser.add_argument("notebook", nargs="?", help="the notebook to run, e.g. notebooks/quickstart.ipynb")
    parser.add_argument(
        "-f", "--file", dest="files", action="append", default=[], metavar="PARAMS.yaml",
        help="parameter file (repeatable; later files win)",
    )  # fmt: skip
    parser.add_argument(
        "-p", "--param", dest="params", action="append", nargs=2, default=[], metavar=("KEY", "VALUE"),
        help="one parameter, value parsed as YAML (e.g. -p rl_steps 5 -p rewards '[em, f1]'); wins over files",
    )  # fmt: skip
    parser.add_argument("--run-name", help="label appended to the run folder's id")
    parser.add_argument("--output-root", help="folder that holds run folders (default: the output_root parameter)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="re-execute an earlier run into its folder, resume=true")
    parser.add_argument("--dry-run", action="store_true", help="check and print the resolved parameters; run nothing")
    parser.add_argument("--timeout", type=int, default=None, help="seconds a single cell may run (default: no limit)")
    parser.add_argument("--cell-progress", action="store_true",
                        help="also show papermill's bar over notebook cells (each stage shows its own bar anyway)")
    parser.add_argument("--quiet", action="store_true", help="do not stream cell output to the terminal")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="N",
                        help="run once per seed (each its own folder), then write the spread over seeds "
                             "(searchrl.seeds)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 1 failed, 2 bad input, 130 interrupted)."""
    args = _parser().parse_args(argv)
    command = [sys.executable, "-m", "searchrl.runner", *(sys.argv[1:] if argv is None else argv)]
    try:
        overrides = _parse_overrides(args.params)
        if args.dry_run:
            plan = plan_run(
                args.notebook, args.files, overrides,
                run_name=args.run_name, output_root=args.output_root, resume_dir=args.resume,
            )  # fmt: skip
            print(plan.describe())
            return 0
        if args.seeds:
            return _run_seeds(args, overrides, command)
        run_dir = run_notebook(
            args.notebook, args.files, overrides,
            run_name=args.run_name, output_root=args.output_root, resume_dir=args.resume,
            progress_bar=args.cell_progress, log_output=not args.quiet,
            execution_timeout=args.timeout, command=command,
        )  # fmt: skip
    except (ConfigError, NotebookError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RunError as err:
        print(f"\n{err.status}: {err}", file=sys.stderr)
        print(summarize(err.run_dir), file=sys.stderr)
        return 130 if err.status == "interrupted" else 1
    table = result_table(run_dir)
    print("\ncompleted." + (f"\n\n{table}\n" if table else "") + "\n" + summarize(run_dir))
    return 0


def _seeds_flag_problem(plan: RunPlan) -> str | None:
    """Why --seeds cannot run `plan`'s notebook, or None. An ablation notebook (the only kind with `arms`; the others
    never read `seeds`) runs every arm over its own `seeds` parameter, which wins over the `seed` --seeds sets: each
    run would repeat the whole ablation, and none writes the eval/table.json the spread over seeds is built from."""
    cfg = plan.config
    if not cfg.arms:
        return None
    return (f"--seeds cannot run {plan.name}, an ablation whose arms ({', '.join(map(str, cfg.arms))}) all run over "
            f"its own seeds parameter (now {cfg.seeds or [cfg.seed]}), so give the seeds with -p seeds \"[0, 1, 2]\" "
            "instead of --seeds")


def _run_seeds(args: argparse.Namespace, overrides: dict[str, Any], command: list[str]) -> int:
    """One run per seed; a failed seed is reported and the others still run. Then the spread over seeds."""
    from searchrl.analysis.seeds import report_seeds
    from searchrl.runs.folder import create_run_dir

    if args.resume:
        raise ConfigError("--seeds starts new runs; resume each seed's folder with --resume on its own")
    if "seed" in overrides:
        raise ConfigError("give the seeds with --seeds only, not also -p seed")
    names = {seed: f"{args.run_name or 'seeds'}-seed{seed}" for seed in args.seeds}
    plans = [plan_run(args.notebook, args.files, {**overrides, "seed": seed}, output_root=args.output_root,
                      run_name=names[seed]) for seed in args.seeds]  # every seed checked before the first runs
    problem = _seeds_flag_problem(plans[0])
    if problem:
        raise ConfigError(problem)
    run_dirs, failed = {}, []
    for seed in args.seeds:
        print(f"\n=== seed {seed} ({len(run_dirs) + len(failed) + 1} of {len(args.seeds)}) ===", flush=True)
        try:
            run_dirs[seed] = run_notebook(
                args.notebook, args.files, {**overrides, "seed": seed},
                run_name=names[seed], output_root=args.output_root,
                progress_bar=args.cell_progress, log_output=not args.quiet,
                execution_timeout=args.timeout, command=command,
            )  # fmt: skip
        except RunError as err:
            print(f"\nseed {seed} {err.status}: {err}\n{summarize(err.run_dir)}", file=sys.stderr)
            failed.append(seed)
            if err.status == "interrupted":
                break
    if not run_dirs:
        return 1
    folder = create_run_dir(plans[0].name, "seeds" + (f"-{args.run_name}" if args.run_name else ""),
                            plans[0].output_root)
    print("\n" + report_seeds(run_dirs, folder, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The report: finished ablation run folders collected into one table of the papers' claims (ours beside theirs),
with each run's per-arm table and curves.

A run folder is one the ablation notebooks wrote (it holds ablation.json); `latest_runs` finds the newest finished
one of each notebook under an output root, so `report_runs: []` reports whatever has been run.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from searchrl.core.files import read_json
from searchrl.evaluation.protocol import markdown_table

CLAIM_COLUMNS = ("notebook", "paper", "claim", "metric", "better", "worse", "difference", "verdict",
                 "questions", "pairs", "seeds", "per seed", "warning", "run")


def is_ablation_run(folder: Path) -> bool:
    return (folder / "ablation.json").is_file()


def _finished(folder: Path) -> bool:
    status = read_json(folder / "status.json") or {}
    return status.get("status") == "completed" and (folder / "verdicts.csv").exists()


def latest_runs(output_root: str | Path = "outputs") -> list[Path]:
    """The newest finished ablation run of each notebook under `output_root` (run ids start with their time)."""
    root = Path(output_root)
    found = []
    for notebook in sorted(p for p in root.glob("*") if p.is_dir()):
        runs = sorted((r for r in notebook.glob("*") if r.is_dir() and is_ablation_run(r) and _finished(r)),
                      key=lambda r: r.name)
        if runs:
            found.append(runs[-1])
    return found


def resolve_runs(runs: Sequence[str], output_root: str | Path = "outputs") -> list[Path]:
    """`runs` as folders (each must be an ablation run), or the latest of each notebook when `runs` is empty."""
    if not runs:
        found = latest_runs(output_root)
        if not found:
            raise FileNotFoundError(f"no finished ablation run under {Path(output_root).resolve()}; run an ablation "
                                    "notebook first, or list run folders in report_runs")
        return found
    folders = [Path(r).expanduser() for r in runs]
    bad = [_not_a_run(f) for f in folders if not is_ablation_run(f)]
    if bad:
        raise FileNotFoundError(f"not ablation run folders (no ablation.json): {'; '.join(bad)}; list in report_runs "
                                "the run folders outputs/<ablation notebook>/<run>, the ones holding ablation.json")
    return folders


def _not_a_run(folder: Path) -> str:
    """`folder`, and the ablation run folder above it when it lies inside one (an arm's or a cold start's folder)."""
    enclosing = next((parent for parent in folder.resolve().parents if is_ablation_run(parent)), None)
    return str(folder) if enclosing is None else f"{folder} (inside the run folder {enclosing}: give that instead)"


def _notebook_of(run: Path) -> str:
    provenance = read_json(run / "provenance.json") or {}
    return str(provenance.get("notebook") or run.parent.name).removesuffix(".ipynb")


def _verdicts(run: Path) -> pd.DataFrame | None:
    """The run's verdicts, worked out again from its per-question records and claims with today's code (so a
    warning added since the run was made shows too), else as the run saved them; None when it has none."""
    from searchrl.experiments.ablation.tables import read_records
    from searchrl.experiments.ablation.verdict import Claim, verdict_table

    claims = [Claim(**c) for c in (read_json(run / "ablation.json") or {}).get("claims", [])]
    records = read_records(run) if claims else None
    if records is not None and not records.empty:
        return verdict_table(records, claims)
    path = run / "verdicts.csv"
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None


def claims_table(runs: Sequence[Path]) -> pd.DataFrame:
    """One row per claim of every run: the paper's claim and source, our difference with its interval, the verdict."""
    frames = []
    for run in runs:
        frame = _verdicts(run)
        if frame is None or frame.empty:
            continue
        frame.insert(0, "notebook", _notebook_of(run))
        frame["run"] = run.name
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(CLAIM_COLUMNS))
    table = pd.concat(frames, ignore_index=True)
    interval = [c for c in table.columns if c.endswith(("% low", "% high"))]
    keep = [c for c in CLAIM_COLUMNS if c in table.columns]
    return table[keep[:7] + interval + keep[7:]]


def arm_tables(runs: Sequence[Path]) -> dict[str, pd.DataFrame]:
    """Each run's per-arm evaluation table, by notebook name."""
    out = {}
    for run in runs:
        path = run / "eval_table.csv"
        if path.exists():
            out[f"{_notebook_of(run)} ({run.name})"] = pd.read_csv(path, index_col=0)
    return out


def arm_protocol_blocks(runs: Sequence[Path]) -> dict[str, str]:
    """Each run's arms' evaluation protocols compared, as the markdown block under its arm table, by the names
    `arm_tables` uses ("protocol: not recorded" for runs made before evaluations recorded one)."""
    from searchrl.experiments.ablation.tables import arm_protocols

    return {f"{_notebook_of(run)} ({run.name})": arm_protocols(run).markdown() for run in runs}


def curve_figures(runs: Sequence[Path]) -> dict[str, Path]:
    """Each run's curves figure (figures/curves.png), by notebook name."""
    return {f"{_notebook_of(r)} ({r.name})": r / "figures" / "curves.png" for r in runs
            if (r / "figures" / "curves.png").exists()}


LABEL_WIDTH = 60  # characters a claim label is wrapped at
VERDICT_COLOURS = {"reproduced": "tab:green", "opposite": "tab:red", "inconclusive": "tab:gray"}


def claims_figure(claims: pd.DataFrame):
    """One row per claim: our difference (the arm the paper says is better minus the other) with its interval,
    coloured by verdict, beside the zero line the paper's direction must clear, with each seed's own difference as a
    tick below it; a claim with a warning is marked with "*". None when no claim has a measured difference."""
    from searchrl.analysis.plots import ReportFigure

    low = next((c for c in claims.columns if c.endswith("% low")), None)
    high = next((c for c in claims.columns if c.endswith("% high")), None)
    rows = claims.dropna(subset=["difference"]) if low and high else claims.iloc[0:0]
    if rows.empty:
        return None
    labels = []
    for _, row in rows.iterrows():
        warned = isinstance(row.get("warning"), str) and row["warning"].strip()
        label = f"{row['notebook']}: {row['claim']} ({row['metric']}){' *' if warned else ''}"
        labels.append(textwrap.fill(label, LABEL_WIDTH))
    # the labels get their own width, so long claims do not squeeze the axis the intervals are read on
    longest = max(len(line) for label in labels for line in label.splitlines())
    fig = ReportFigure(figsize=(4.5 + 0.065 * longest, 0.9 + 0.55 * len(rows)), layout="constrained")
    ax = fig.subplots()
    y = list(range(len(rows)))[::-1]  # the first claim on top
    for yi, (_, row) in zip(y, rows.iterrows()):
        diff = row["difference"]
        colour = VERDICT_COLOURS.get(str(row["verdict"]), "black")
        ax.errorbar(diff, yi, xerr=[[diff - row[low]], [row[high] - diff]], fmt="o", capsize=3, color=colour)
        seeds = _per_seed(row.get("per seed"))
        if len(seeds) > 1:  # each seed's own difference: the spread between training runs the interval leaves out
            ax.plot(seeds, [yi - 0.22] * len(seeds), "|", color=colour, markersize=7, alpha=0.8, gid="seeds")
    ax.set_yticks(y, labels, fontsize="small")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"better arm minus worse arm ({low.removesuffix(' low')} interval)")
    handles = [ax.plot([], [], "o", color=c, label=v)[0] for v, c in VERDICT_COLOURS.items()]
    handles.append(ax.plot([], [], "|", color="black", label="each seed")[0])
    fig.legend(handles=handles, fontsize="x-small", loc="outside lower center", ncols=len(handles))  # off the data
    ax.set_title("The papers' claims, measured here (* = see the warning column)", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _per_seed(text) -> list[float]:
    """The per-seed differences of a claims row ("+0.000, +0.200"; empty or missing in older verdict files)."""
    if not isinstance(text, str) or not text.strip():
        return []
    return [float(part) for part in text.split(",")]


def write_report(runs: Sequence[Path], folder: str | Path) -> Path:
    """report.md (the claims table and figure, then each run's arm table), claims.csv and figures/claims.png in
    `folder`."""
    from searchrl.core.files import save_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    claims = claims_table(runs)
    claims.to_csv(folder / "claims.csv", index=False)
    lines = ["# Ablation report", "", "## The papers' claims, ours beside theirs", "",
             markdown_table(claims, index=False) if len(claims) else "(no claims in these runs)", ""]
    figure = claims_figure(claims)
    if figure is not None:
        save_figure(figure, folder / "figures" / "claims.png")
        lines += ["![claims](figures/claims.png)", ""]
    protocols = arm_protocol_blocks(runs)
    for name, table in arm_tables(runs).items():
        lines += [f"## {name}", "", markdown_table(table), "", protocols.get(name, ""), ""]
    (folder / "report.md").write_text("\n".join(lines), encoding="utf-8")
    (folder / "runs.json").write_text(json.dumps([str(r) for r in runs], indent=2) + "\n", encoding="utf-8")
    return folder / "report.md"


__all__ = ["arm_protocol_blocks", "arm_tables", "claims_figure", "claims_table", "curve_figures", "latest_runs",
           "markdown_table", "resolve_runs", "write_report"]

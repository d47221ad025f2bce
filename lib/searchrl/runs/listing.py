"""Finished and running run folders, listed as a table and loaded back as plain data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from searchrl.config import RunConfig
from searchrl.core.files import read_json
from searchrl.runs.folder import resolve_output_root
from searchrl.runs.history import _read_table
from searchrl.runs.status import read_status

__all__ = ["list_runs", "load_run"]


# Parameters shown as their own columns in list_runs (the rest appear in the `changed` summary).
_SUMMARY_PARAMS = ("run_name", "model", "dataset", "protocol", "rewards", "rl_steps", "seed")


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "params.yaml").is_file() or (path / "status.json").is_file())


def _read_params(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "params.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def list_runs(root: str | Path = "outputs", notebook: str | None = None) -> pd.DataFrame:
    """One row per run folder under ``root`` (optionally one notebook's): id, status, commit and key parameters.

    Columns: notebook, run_id, status, started, commit, dirty, the parameters in ``_SUMMARY_PARAMS``, ``changed``
    (every non-default parameter as ``name=value``) and path. Sorted by start time.
    """
    root = resolve_output_root(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no outputs folder at {root}; run a notebook first (python -m searchrl.runner ...)")
    from searchrl.runs.ownership import effective_status

    columns = ["notebook", "run_id", "status", "started", "commit", "dirty", *_SUMMARY_PARAMS, "changed", "path"]
    folders = [root / notebook] if notebook else sorted(p for p in root.iterdir() if p.is_dir())
    defaults = RunConfig.defaults()
    rows = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for run_dir in sorted(p for p in folder.iterdir() if _is_run_dir(p)):
            params = _read_params(run_dir)
            status = read_status(run_dir) or {}
            prov = read_json(run_dir / "provenance.json") or {}
            git = prov.get("git") or {}
            changed = ", ".join(f"{k}={v}" for k, v in params.items() if k in defaults and defaults[k] != v)
            rows.append(
                {
                    "notebook": folder.name,
                    "run_id": run_dir.name,
                    "status": effective_status(run_dir, status),
                    "started": prov.get("started") or status.get("started"),
                    "commit": (git.get("commit") or "")[:10] or None,
                    "dirty": git.get("dirty"),
                    **{k: params.get(k) for k in _SUMMARY_PARAMS},
                    "changed": changed,
                    "path": str(run_dir),
                }
            )
    # Ids start with the start second; the recorded start time orders runs begun within the same second.
    rows.sort(key=lambda row: (row["run_id"][:15], str(row["started"] or ""), row["run_id"]))
    return pd.DataFrame(rows, columns=columns)


def load_run(path: str | Path) -> dict[str, Any]:
    """Everything a report needs from one run folder.

    Returns a dict with: ``path``, ``params`` (dict), ``config`` (RunConfig, or None when the parameters no longer
    fit the schema), ``provenance``, ``status``, ``history`` (DataFrame, empty when nothing was logged), ``eval``
    ({name: object} from ``eval/*.json``), ``trajectories`` ({name: path}) and ``figures`` ({name: path}).
    """
    run_dir = Path(path)
    if not _is_run_dir(run_dir):
        raise FileNotFoundError(f"{run_dir} is not a run folder (no params.yaml or status.json in it)")
    params = _read_params(run_dir)
    try:
        config = RunConfig.from_params(params)
    except ValueError:  # written by an older schema; the raw params are still there
        config = None
    history = pd.DataFrame()
    for name in ("metrics.parquet", "metrics.csv"):
        if (run_dir / name).is_file():
            history = _read_table(run_dir / name)
            break
    return {
        "path": run_dir,
        "params": params,
        "config": config,
        "provenance": read_json(run_dir / "provenance.json"),
        "status": read_status(run_dir),
        "history": history,
        "eval": {p.stem: read_json(p) for p in sorted((run_dir / "eval").glob("*.json"))},
        "trajectories": {p.stem: p for p in sorted((run_dir / "trajectories").glob("*.jsonl"))},
        "figures": {p.stem: p for p in sorted((run_dir / "figures").glob("*.png"))},
    }

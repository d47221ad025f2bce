"""Provenance of a run: the git commit and dirty flag, library versions, host, start time and command line, and
the record of each resume."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from searchrl.config import ConfigError, RunConfig, load_params_file, measured_changes
from searchrl.core.files import read_json, write_json
from searchrl.runs.status import now_iso

__all__ = ["git_state", "record_resume", "write_provenance"]


# Libraries whose versions decide what a number means; read from package metadata (no heavy imports).
def project_root(start: str | Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: cwd) that holds ``lib/searchrl``; None outside the repo."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "lib" / "searchrl").is_dir():
            return folder
    return None


_TRACKED_PACKAGES = (
    "searchrl", "torch", "trl", "transformers", "accelerate", "peft", "datasets", "vllm", "bm25s",
    "sentence-transformers", "faiss-cpu", "papermill",
)  # fmt: skip


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):  # git not installed, or hung
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(start: str | Path | None = None) -> dict[str, Any]:
    """Commit, branch and dirty flag of the repository holding ``start``; Nones when git or the repo is absent."""
    cwd = project_root(start) or Path(start or Path.cwd())
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return {"commit": None, "branch": None, "dirty": None, "changed_files": None}
    # Porcelain lines are "XY path"; the leading status column may be a space, so no stripping before slicing.
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd) or ""
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {
        "commit": commit.strip(),
        "branch": (_git(["rev-parse", "--abbrev-ref", "HEAD"], cwd) or "").strip() or None,
        "dirty": bool(changed),
        "changed_files": changed,
    }


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def write_provenance(
    run_dir: str | Path,
    cfg: RunConfig,
    notebook: str | Path | None = None,
    command: list[str] | None = None,
    extra: Mapping[str, Any] | None = None,
    repo: str | Path | None = None,
) -> Path:
    """Write ``params.yaml`` (resolved) and ``provenance.json`` (git, versions, host, time, command) into ``run_dir``.

    Returns the path of ``provenance.json``. ``extra`` adds fields (e.g. the parameter files used); ``repo`` is a
    folder inside the repository whose commit is recorded (default: the cwd).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = list(command) if command is not None else list(sys.argv)
    cfg.to_yaml(run_dir / "params.yaml", header=f"Resolved parameters of run {run_dir.name}")
    info = {
        "run_id": run_dir.name,
        "notebook": str(notebook) if notebook is not None else None,
        "started": now_iso(),
        "command": cmd,
        "cwd": str(Path.cwd()),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "git": git_state(repo),
        "versions": _versions(),
        "changed_params": cfg.changed(),
        **(dict(extra) if extra else {}),
    }
    return write_json(run_dir / "provenance.json", info)


def record_resume(run_dir: str | Path, cfg: RunConfig, command: list[str], repo: str | Path | None = None) -> Path:
    """A resumed run's record: ``params.yaml`` rewritten with the parameters it resumes with, and the resume (time,
    command, git state of ``repo``, default the cwd) appended to ``provenance.json``'s "resumed" list, which keeps
    the first launch's record. Returns the path of ``provenance.json``."""
    run_dir = Path(run_dir)
    try:
        changes = measured_changes(load_params_file(run_dir / "params.yaml")[0], cfg)
    except ConfigError:  # parameters unreadable, or of an older schema: nothing to compare with
        changes = {}
    if changes:
        changed = ", ".join(f"{k} {was!r} -> {now!r}" for k, (was, now) in changes.items())
        print(f"warning: this resume changes what the run measures ({changed}); the steps before its last checkpoint "
              "were made with the earlier values, which provenance.json keeps under 'resumed'", file=sys.stderr)
    cfg.to_yaml(run_dir / "params.yaml", header=f"Resolved parameters of run {run_dir.name} (resumed)")
    provenance = read_json(run_dir / "provenance.json") or {}
    record = {"time": now_iso(), "command": list(command), "git": git_state(repo)}
    if changes:
        record["changed"] = {k: list(pair) for k, pair in changes.items()}
    provenance.setdefault("resumed", []).append(record)
    return write_json(run_dir / "provenance.json", provenance)

"""Run folders: one self-describing folder per run, and the writers and readers that fill and read it.

Layout (``<root>/<notebook>/<run_id>/``)::

    <notebook>.ipynb        the executed notebook (written by searchrl.runner)
    params.yaml             resolved parameters
    provenance.json         git commit and dirty flag, library versions, host, start time, command line
    status.json             running / completed / failed (with error and traceback) / interrupted / died,
                            the owner and its heartbeat (see searchrl.ownership)
    metrics.parquet         training history, one row per logged step (metrics.csv without pyarrow)
    memory.json             peak memory of the cold start, each RL stage and each evaluation (searchrl.memory_use)
    eval/<name>.json        evaluation results
    trajectories/<name>.jsonl
    figures/<name>.png

``run_id`` is ``YYYYmmdd-HHMMSS-<4 hex>[-<run_name>]``; the folder is created with an exclusive ``mkdir``, so two
runs started in the same second still get different folders and never overwrite each other.

The runner (``python -m searchrl.runner``) creates the folder and exports its path as ``SEARCHRL_RUN_DIR`` before the
notebook starts; :func:`current_run_dir` returns that folder inside the notebook, or creates a fresh one when the
notebook is run by hand.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import secrets
import shutil
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from searchrl.config import ConfigError, RunConfig, load_params_file, measured_changes

if TYPE_CHECKING:  # matplotlib is only needed by callers that save figures
    from matplotlib.figure import Figure

__all__ = [
    "RUN_DIR_ENV",
    "STATUSES",
    "MetricsHistory",
    "atomic_write_text",
    "checkpoint_space_problem",
    "create_run_dir",
    "current_run_dir",
    "folder_size",
    "git_state",
    "history_callback",
    "last_complete_checkpoint",
    "list_runs",
    "load_run",
    "mark_status",
    "now_iso",
    "project_root",
    "read_json",
    "read_status",
    "record_resume",
    "resolve_output_root",
    "save_figure",
    "stage_trajectories_path",
    "update_status",
    "write_json",
    "write_provenance",
    "write_trajectories",
]

RUN_DIR_ENV = "SEARCHRL_RUN_DIR"
STATUSES = ("running", "completed", "failed", "interrupted", "died")
# Libraries whose versions decide what a number means; read from package metadata (no heavy imports).
_TRACKED_PACKAGES = (
    "searchrl", "torch", "trl", "transformers", "accelerate", "peft", "datasets", "vllm", "bm25s",
    "sentence-transformers", "faiss-cpu", "papermill",
)  # fmt: skip
# Parameters shown as their own columns in list_runs (the rest appear in the `changed` summary).
_SUMMARY_PARAMS = ("run_name", "model", "dataset", "protocol", "rewards", "rl_steps", "seed")


# --------------------------------------------------------------------------------------------------------------
# Locating and creating run folders
# --------------------------------------------------------------------------------------------------------------


def project_root(start: str | Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: cwd) that holds ``lib/searchrl``; None outside the repo."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "lib" / "searchrl").is_dir():
            return folder
    return None


def resolve_output_root(root: str | Path) -> Path:
    """``root`` as an absolute path; a relative one is taken from the project root (else from the cwd).

    Notebooks opened in Jupyter run with ``notebooks/`` as their cwd; anchoring at the project root keeps their
    outputs in the same ``outputs/`` the runner uses.
    """
    root = Path(root).expanduser()
    if root.is_absolute():
        return root
    return (project_root() or Path.cwd()) / root


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-.")
    return slug[:60]


def create_run_dir(notebook_name: str, run_name: str = "", root: str | Path = "outputs") -> Path:
    """Create and return a new, empty ``<root>/<notebook_name>/<run_id>/`` that no other run can share.

    The final ``mkdir`` is exclusive; on a collision (two runs in the same second drawing the same suffix) a new
    suffix is drawn.
    """
    notebook = _slug(Path(notebook_name).stem) or "notebook"
    parent = resolve_output_root(root) / notebook
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        raise ConfigError(f"output_root: cannot create a run folder in {parent} ({err.strerror or err}); "
                          "set output_root to a folder you can write") from None
    label = _slug(run_name)
    for _ in range(100):
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_id = f"{stamp}-{secrets.token_hex(2)}" + (f"-{label}" if label else "")
        path = parent / run_id
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a unique run folder under {parent} after 100 attempts")


_OWNED: list = []  # ownerships this process holds (kept referenced so their locks and heartbeats live on)


def current_run_dir(notebook_name: str = "interactive", cfg: RunConfig | None = None) -> Path:
    """The folder this notebook writes into.

    Under the runner, ``SEARCHRL_RUN_DIR`` names it (parameters and provenance are already written). Run by hand,
    a fresh folder is created under ``cfg.output_root`` and ``params.yaml``, ``provenance.json`` and a "running"
    status are written, so a hand-run leaves the same kind of folder; under plain papermill the executed notebook is
    copied in when papermill exits (see ``searchrl.kernel_watch``). Each call by hand creates a new folder: call
    it once per notebook and pass the path on.
    """
    from searchrl import kernel_watch

    env = os.environ.get(RUN_DIR_ENV)
    if env:
        path = Path(env)
        path.mkdir(parents=True, exist_ok=True)
    else:
        from searchrl.ownership import RunOwnership

        cfg = cfg or RunConfig()
        path = create_run_dir(notebook_name, cfg.run_name, cfg.output_root)
        write_provenance(path, cfg, notebook=notebook_name)
        mark_status(path, "running")
        # Run by hand (or by plain papermill), this process owns the folder for as long as it lives.
        _OWNED.append(RunOwnership(path).acquire())
    kernel_watch.install(path, notebook_name)  # a failing cell marks the run failed, under any executor
    return path


# --------------------------------------------------------------------------------------------------------------
# Writers (all atomic: write a temporary file, then rename, so a crash never leaves half a file)
# --------------------------------------------------------------------------------------------------------------


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) at `path` through a temporary file in the same folder and a rename, so a reader, or a
    resume after a crash, sees the old file or the new one, never a truncated one; folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def _json_default(obj: Any) -> Any:
    """Make numpy/torch scalars and arrays, paths, sets and dataclasses JSON-serialisable."""
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, torch tensors
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON; convert it to numbers, strings, lists or dicts")


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON at ``path`` (folders created); numpy values and dataclasses are converted."""
    return atomic_write_text(path, json.dumps(obj, indent=2, default=_json_default, allow_nan=True) + "\n")


def stage_trajectories_path(run_dir: str | Path, stage: str) -> Path:
    """Where a run keeps an evaluation stage's per-question records: trajectories/<stage, spaces as underscores>.jsonl
    ("after cold start" -> trajectories/after_cold_start.jsonl)."""
    return Path(run_dir) / "trajectories" / f"{stage.replace(' ', '_')}.jsonl"


def write_trajectories(path: str | Path, records: Iterable[Mapping[str, Any]]) -> Path:
    """Write one JSON object per line (``.jsonl``) at ``path``; returns the path."""
    path = Path(path)
    if path.suffix != ".jsonl":
        path = path.with_name(path.name + ".jsonl")
    lines = [json.dumps(dict(r), default=_json_default, ensure_ascii=False) for r in records]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Save ``fig`` as PNG at ``path`` (``.png`` added when missing); the figure stays open for display."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        path = path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


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


def now_iso() -> str:
    # Microseconds: runs started within the same second still sort in the order they started.
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="microseconds")


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


def mark_status(run_dir: str | Path, status: str, error: BaseException | str | None = None, **info: Any) -> Path:
    """Write ``status.json``: ``status`` (running / completed / failed / interrupted / died), time, and the error.

    ``error`` may be an exception (its message and traceback are stored) or a message. ``info`` adds fields, such
    as the failing cell. The first "running" time is kept as ``started`` across updates.
    """
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")

    def build(previous: dict[str, Any]) -> dict[str, Any]:
        record: dict[str, Any] = {
            "status": status,
            "started": previous.get("started") or now_iso(),
            "updated": now_iso(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            # Who owns the run and when it last showed life (see searchrl.ownership): kept across updates.
            **{k: previous[k] for k in ("owner", "heartbeat") if k in previous},
        }
        if isinstance(error, BaseException):
            record["error"] = f"{type(error).__name__}: {error}"
            record["traceback"] = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        elif error is not None:
            record["error"] = str(error)
        record.update(info)
        return record

    return update_status(run_dir, build)


def update_status(run_dir: str | Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Path:
    """Replace ``status.json`` with ``change(current content)``, serialised with every other writer of it (the
    owner, its kernel, the heartbeat thread) by a lock beside it."""
    from filelock import FileLock

    run_dir = Path(run_dir)
    with FileLock(str(run_dir / ".status.lock"), timeout=30):
        return write_json(run_dir / "status.json", change(read_status(run_dir) or {}))


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """The content of ``status.json``, or None when the run has none."""
    path = Path(run_dir) / "status.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# --------------------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------------------


def folder_size(folder: str | Path) -> int:
    """Bytes in the files under `folder`."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def drop_resume_state(run_dir: str | Path) -> int:
    """Delete what only a resume needs from a completed run folder: every `checkpoints/<stage>/checkpoint-N` (trainer
    state with the optimizer) and the `checkpoints/*_start` copies of each RL stage's start weights. Final policies
    (`checkpoints/<stage>` itself, the cold start) stay. Returns the bytes freed."""
    freed = 0
    for stage in sorted(Path(run_dir, "checkpoints").glob("*")):
        if not stage.is_dir():
            continue
        # An RL stage saves its start weights as "<stage>_start" beside its final "<stage>" (the KL reference of a
        # resume); "cold_start" has no such sibling and is a final policy.
        is_start_copy = stage.name.endswith("_start") and (stage.parent / stage.name[: -len("_start")]).is_dir()
        doomed = [stage] if is_start_copy else sorted(stage.glob("checkpoint-*"))
        for folder in doomed:
            freed += folder_size(folder)
            shutil.rmtree(folder, ignore_errors=True)
    return freed


def release_resume_state(run_dir: str | Path) -> int:
    """`drop_resume_state` on a run that just completed, saying what it freed; returns the bytes."""
    freed = drop_resume_state(run_dir)
    if freed:
        print(f"removed {freed / 1e9:.1f} GB of resume state (trainer checkpoints, stage start weights) from the "
              "completed run; its final policies stay (keep it all with -p keep_resume_state true)")
    return freed


def last_complete_checkpoint(output_dir: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest `checkpoint-N` in `output_dir` that a resume can use, and the newer ones skipped, with why.

    The Trainer writes a checkpoint file by file; one cut short by a crash lacks `trainer_state.json` (written last)
    or holds a truncated weights file. Those are skipped, so a resume falls back to the last complete one instead of
    failing.
    """
    folder = Path(output_dir)
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    skipped: list[tuple[Path, str]] = []
    for candidate in sorted(found, key=lambda p: int(p.name.split("-")[-1]), reverse=True):
        problem = _checkpoint_problem(candidate)
        if problem is None:
            return candidate, skipped
        skipped.append((candidate, problem))
    return None, skipped


def _checkpoint_problem(folder: Path) -> str | None:
    state = folder / "trainer_state.json"
    if not state.is_file():
        return "no trainer_state.json (cut short while saving)"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "trainer_state.json is not valid JSON"
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        return "no weights (*.safetensors)"
    from safetensors import safe_open

    for path in weights:
        try:
            with safe_open(str(path), framework="pt") as handle:
                keys = list(handle.keys())
                if keys:
                    handle.get_slice(keys[-1])[:]  # the last tensor is the first to be missing from a cut file
        except Exception as err:  # noqa: BLE001  (safetensors raises its own error types for a damaged file)
            return f"{path.name} is damaged ({type(err).__name__})"
    return None


def checkpoint_space_problem(folder: str | Path, need_bytes: int) -> str | None:
    """Why a checkpoint of `need_bytes` may not fit on the disk holding `folder` (None when it fits).

    A full disk otherwise surfaces mid-write as a cryptic serialization error ("unexpected pos ..."), leaving a
    cut-short checkpoint behind; checked before writing, the run stops with a message that says what to do.
    """
    probe = Path(folder).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free >= need_bytes:
        return None
    return (f"{free / 1e9:.1f} GB free on the disk holding {folder}, and a checkpoint of this run needs about "
            f"{need_bytes / 1e9:.1f} GB (weights and optimizer state). Free some space (the largest files are usually "
            "earlier runs' checkpoints, their optimizer.pt above all) or save less often (save_steps); a stopped run "
            "continues from its last complete checkpoint with `python -m searchrl.runner --resume <run folder>`.")


# --------------------------------------------------------------------------------------------------------------
# Metrics history
# --------------------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A value parquet can store: numbers, strings, bools, None (numpy/torch scalars unwrapped)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        try:
            return value.item()
        except (ValueError, RuntimeError):  # arrays with more than one element
            pass
    if isinstance(value, (list, tuple, dict)) or hasattr(value, "tolist"):
        return json.dumps(value, default=_json_default)
    return str(value)


class MetricsHistory:
    """Training metrics, one row per logged step, flushed to disk after every row so a crash keeps the history.

    Rows go to ``metrics.parquet`` (``metrics.csv`` when pyarrow is unavailable). An existing file is loaded, so a
    resumed run keeps appending to the same history; :meth:`truncate_after` drops rows logged after the checkpoint
    the run resumes from.
    """

    def __init__(self, run_dir: str | Path, name: str = "metrics", step_col: str = "step") -> None:
        self.run_dir = Path(run_dir)
        self.step_col = step_col
        self.use_parquet = _have_pyarrow()
        self.path = self.run_dir / f"{name}.{'parquet' if self.use_parquet else 'csv'}"
        self.rows: list[dict[str, Any]] = []
        existing = _read_table(self.path) if self.path.exists() else None
        if existing is None and self.use_parquet and (self.run_dir / f"{name}.csv").exists():
            existing = _read_table(self.run_dir / f"{name}.csv")  # history written earlier without pyarrow
        if existing is not None:
            rows = [{k: v for k, v in row.items() if not _is_missing(v)} for row in existing.to_dict("records")]
            self.rows = _continuous_steps(rows, step_col)

    def __len__(self) -> int:
        return len(self.rows)

    def append(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Add one row (``step`` defaults to the previous step + 1; values logged again at the last row's step are
        merged into it) and write the whole history to disk."""
        row = {k: _plain(v) for k, v in metrics.items()}
        if step is not None:
            row[self.step_col] = int(step)
        elif self.step_col not in row:
            last = self.rows[-1].get(self.step_col, -1) if self.rows else -1
            row[self.step_col] = int(last) + 1
        if self.rows and self.rows[-1].get(self.step_col) == row[self.step_col]:
            # A second log at the same step (the trainer's end-of-training summary) joins that step's row, so
            # every step is one row.
            self.rows[-1].update(row)
        else:
            self.rows.append(row)
        self.flush()

    def truncate_after(self, step: int) -> None:
        """Drop rows with step > ``step`` (logged after the checkpoint a resumed run starts from)."""
        self.rows = [r for r in self.rows if r.get(self.step_col, -math.inf) <= step]
        self.flush()

    def to_frame(self) -> pd.DataFrame:
        """The history as a DataFrame, ``step`` first."""
        frame = pd.DataFrame(self.rows)
        if self.step_col in frame.columns:
            frame = frame[[self.step_col] + [c for c in frame.columns if c != self.step_col]]
        return frame

    def flush(self) -> Path:
        """Write the history atomically (temporary file, then rename)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        frame = self.to_frame()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        if self.use_parquet:
            try:
                frame.to_parquet(tmp, index=False)
            except (TypeError, ValueError, ImportError):
                # A column mixing strings and numbers cannot be typed; store such columns as text.
                mixed = [c for c in frame.columns if frame[c].dtype == object]
                frame[mixed] = frame[mixed].astype("string")
                frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        os.replace(tmp, self.path)
        return self.path


def _continuous_steps(rows: list[dict[str, Any]], step_col: str) -> list[dict[str, Any]]:
    """Histories written before stages were numbered on from each other restart their step count at each RL stage;
    number such rows on from the stage before (a step never goes down in one run's history)."""
    offset, last_raw, out = 0, None, []
    for row in rows:
        raw = row.get(step_col)
        if raw is not None:
            if last_raw is not None and raw < last_raw:
                offset += last_raw  # the earlier stage's last step, renumbered
            last_raw = raw
            row = {**row, step_col: int(raw) + offset}
        out.append(row)
    return out


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _read_table(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def history_callback(history: MetricsHistory, offset: int = 0, stage: str = "") -> Any:
    """A transformers ``TrainerCallback`` that appends every logged dict to ``history`` at the trainer's step plus
    ``offset`` (the steps of the stages trained before this one), with the stage's name in a ``stage`` column."""
    from transformers import TrainerCallback  # imported here: rundir.py stays light for report notebooks

    class _HistoryCallback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                history.append({**logs, **({"stage": stage} if stage else {})}, step=offset + state.global_step)

    return _HistoryCallback()


# --------------------------------------------------------------------------------------------------------------
# Readers for report notebooks
# --------------------------------------------------------------------------------------------------------------


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
    from searchrl.ownership import effective_status

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


def read_json(path: str | Path) -> Any:
    """The parsed JSON file at ``path``, or None when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


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

"""Run folders: one self-describing folder per run, and the writers and readers that fill and read it.

Layout (``<root>/<notebook>/<run_id>/``)::

    <notebook>.ipynb        the executed notebook (written by searchrl.experiments.runner)
    params.yaml             resolved parameters
    provenance.json         git commit and dirty flag, library versions, host, start time, command line
    status.json             running / completed / failed (with error and traceback) / interrupted / died,
                            the owner and its heartbeat (see searchrl.runs.ownership)
    metrics.parquet         training history, one row per logged step (metrics.csv without pyarrow)
    memory.json             peak memory of the cold start, each RL stage and each evaluation (searchrl.runs.memory)
    eval/<name>.json        evaluation results
    trajectories/<name>.jsonl
    retrieval/              every search asked and answered (searchrl.config.replay), for retriever: replay:<run folder>
    figures/<name>.png

``run_id`` is ``YYYYmmdd-HHMMSS-<4 hex>[-<run_name>]``; the folder is created with an exclusive ``mkdir``, so two
runs started in the same second still get different folders and never overwrite each other.

The runner (``python -m searchrl.runner``) creates the folder and exports its path as ``SEARCHRL_RUN_DIR`` before the
notebook starts; :func:`current_run_dir` returns that folder inside the notebook, or creates a fresh one when the
notebook is run by hand.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import secrets
from pathlib import Path

from searchrl.config import ConfigError, RunConfig
from searchrl.runs.provenance import project_root, write_provenance
from searchrl.runs.status import mark_status

__all__ = ["RUN_DIR_ENV", "create_run_dir", "current_run_dir", "project_root", "resolve_output_root", "stage_trajectories_path"]


RUN_DIR_ENV = "SEARCHRL_RUN_DIR"


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
    copied in when papermill exits (see ``searchrl.runs.kernel_watch``). Each call by hand creates a new folder: call
    it once per notebook and pass the path on.
    """
    from searchrl.runs import kernel_watch

    env = os.environ.get(RUN_DIR_ENV)
    if env:
        path = Path(env)
        path.mkdir(parents=True, exist_ok=True)
    else:
        from searchrl.runs.ownership import RunOwnership

        cfg = cfg or RunConfig()
        path = create_run_dir(notebook_name, cfg.run_name, cfg.output_root)
        write_provenance(path, cfg, notebook=notebook_name)
        mark_status(path, "running")
        # Run by hand (or by plain papermill), this process owns the folder for as long as it lives.
        _OWNED.append(RunOwnership(path).acquire())
    kernel_watch.install(path, notebook_name)  # a failing cell marks the run failed, under any executor
    return path


def stage_trajectories_path(run_dir: str | Path, stage: str) -> Path:
    """Where a run keeps an evaluation stage's per-question records: trajectories/<stage, spaces as underscores>.jsonl
    ("after cold start" -> trajectories/after_cold_start.jsonl)."""
    return Path(run_dir) / "trajectories" / f"{stage.replace(' ', '_')}.jsonl"

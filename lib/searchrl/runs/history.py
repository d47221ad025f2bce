"""A run's training history: one row per logged step, kept in metrics.parquet (metrics.csv without pyarrow), and
the Trainer callback that fills it."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from searchrl.core.files import _json_default

__all__ = ["MetricsHistory", "history_callback"]


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

"""A run's status.json: running / completed / failed / interrupted / died, written atomically and read back."""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchrl.core.files import write_json

__all__ = ["STATUSES", "mark_status", "now_iso", "read_status", "update_status"]


STATUSES = ("running", "completed", "failed", "interrupted", "died")


def now_iso() -> str:
    # Microseconds: runs started within the same second still sort in the order they started.
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="microseconds")


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
            # Who owns the run and when it last showed life (see searchrl.runs.ownership): kept across updates.
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

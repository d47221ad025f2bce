"""One live owner per run folder: an advisory lock held for the whole run, and a heartbeat in status.json.

The owner (the runner, or the notebook kernel when a notebook is run by hand or by plain papermill) holds an
advisory lock on `<run>/.owner.lock`. The operating system releases it when the owner dies, however it dies
(SIGKILL included), so "is the lock free?" answers "is the owner dead?" on this machine. A heartbeat thread also
stamps `status.json` every `HEARTBEAT_S` seconds, so a reader on another machine (a shared filesystem, where locks
may not be honoured) can tell a dead run by its stale heartbeat. `--resume` refuses a folder whose owner is alive
and takes over one whose owner is dead.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import threading
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from searchrl.config import ConfigError

LOCK_NAME = ".owner.lock"
HEARTBEAT_S = 15.0
STALE_S = 4 * HEARTBEAT_S  # a heartbeat older than this means the owner is gone


class RunBusyError(ConfigError):
    """The run folder has a live owner (another process is running it)."""


class RunOwnership:
    """Take ownership of `run_dir` with `acquire()`; `release()` (or process death) gives it up."""

    def __init__(self, run_dir: str | Path, interval_s: float = HEARTBEAT_S) -> None:
        self.run_dir = Path(run_dir)
        self.interval_s = interval_s
        self._lock = FileLock(str(self.run_dir / LOCK_NAME), timeout=0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> RunOwnership:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise RunBusyError(f"{self.run_dir} is being run by another live process ({describe_owner(self.run_dir)}); "
                               "wait for it to end or stop it first") from None
        self.beat()
        self._thread = threading.Thread(target=self._beat_forever, name="searchrl-heartbeat", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._lock.is_locked:
            self._lock.release()

    def beat(self) -> None:
        """Stamp status.json with this owner and the time."""
        from searchrl.runs.status import update_status

        owner = {"pid": os.getpid(), "hostname": socket.gethostname()}
        update_status(self.run_dir, lambda record: {**record, "owner": owner, "heartbeat": _now()})

    def _beat_forever(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except OSError:  # the folder became unwritable: the run itself will fail and say so
                pass


def owner_alive(run_dir: str | Path) -> bool:
    """Whether a live process on this machine owns `run_dir` (its lock is held)."""
    lock = FileLock(str(Path(run_dir) / LOCK_NAME), timeout=0)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def heartbeat_age_s(status: dict[str, Any]) -> float | None:
    """Seconds since the status's heartbeat, or None when it has none."""
    stamp = status.get("heartbeat")
    if not stamp:
        return None
    try:
        return (_dt.datetime.now(_dt.timezone.utc) - _dt.datetime.fromisoformat(stamp)).total_seconds()
    except ValueError:
        return None


def effective_status(run_dir: str | Path, status: dict[str, Any] | None) -> str:
    """The status a reader should believe: a "running" run whose owner is gone (lock free on this machine, or a
    heartbeat older than STALE_S elsewhere) has died."""
    if not status:
        return "unknown"
    if status.get("status") != "running":
        return str(status.get("status"))
    owner = status.get("owner") or {}
    if owner.get("hostname") in (None, socket.gethostname()):
        if not (Path(run_dir) / LOCK_NAME).exists():
            return "running"  # a folder from before ownership existed: nothing to check against
        return "running" if owner_alive(run_dir) else "died"
    age = heartbeat_age_s(status)
    return "died" if age is not None and age > STALE_S else "running"


def describe_owner(run_dir: str | Path) -> str:
    from searchrl.runs.status import read_status

    status = read_status(run_dir) or {}
    owner = status.get("owner") or {}
    age = heartbeat_age_s(status)
    beat = f", last heartbeat {age:.0f} s ago" if age is not None else ""
    return f"pid {owner.get('pid', '?')} on {owner.get('hostname', '?')}{beat}"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


__all__ = ["HEARTBEAT_S", "LOCK_NAME", "STALE_S", "RunBusyError", "RunOwnership", "describe_owner",
           "effective_status", "heartbeat_age_s", "owner_alive"]

"""Shared steps of the kill-and-resume tests: SIGKILL a launched run once it has saved its second RL checkpoint,
and compare a resumed run's metrics history with an uninterrupted one's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd

RESUMED_COLUMNS = ("reward", "loss", "grad_norm", "completions/mean_length")


def kill_after_checkpoint(victim: subprocess.Popen, output_root: Path, notebook: str, timeout: float) -> Path:
    """Wait until the run under `output_root/notebook/` has written RL checkpoint-2, SIGKILL its whole process
    group (the launcher and everything it started; the victim must run in a session of its own), and return the
    run folder."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not list(output_root.glob(f"{notebook}/*/checkpoints/rl/checkpoint-2")):
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    (run_dir,) = (output_root / notebook).iterdir()
    return run_dir


def history(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "metrics.parquet").set_index("step")


def assert_same_history(resumed_dir: Path, clean_dir: Path, steps: int = 4) -> None:
    """The resumed run logged every step once, with the uninterrupted run's rewards, losses and gradient norms."""
    got, want = history(resumed_dir), history(clean_dir)
    assert list(got.index) == list(want.index) == list(range(1, steps + 1))
    assert (want["grad_norm"] > 0).all()  # the optimizer really had something to restore
    for column in RESUMED_COLUMNS:
        pd.testing.assert_series_equal(got[column], want[column], check_exact=False, rtol=1e-4, atol=1e-6)

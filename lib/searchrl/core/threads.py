"""How many CPU threads torch uses, and a warning when torch's default would contend with processes already running.

torch starts one thread per core. On a small machine where another job already runs, its threads then share cores
and wait for each other, and a run can slow down many times over (measured: docs/speed.md). A run with
`torch_threads` set is left alone.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path


def contention_warning(load: float, cores: int, threads: int) -> str | None:
    """What to say when `threads` torch threads would share `cores` cores with `load` processes already running
    (:func:`busy_elsewhere`), or None when they fit."""
    busy = int(load)
    if busy < 1 or threads <= 1 or threads + busy <= cores:  # one thread is as few as it gets
        return None
    free = max(1, cores - busy)
    return (f"the CPU is busy: about {busy} process(es) already running on {cores} cores, and torch would start "
            f"{threads} threads; threads that wait for each other on shared cores can slow this run many times "
            f"over, so set torch_threads: {free} (or torch_threads: 0 to keep torch's default)")


# Linux's instantaneous count of runnable threads (4th field, "runnable/total"). Unlike the load average it does not
# remember this process's own work: in an ablation every arm after the first would otherwise see its predecessor's
# threads and warn about itself.
_LOADAVG = Path("/proc/loadavg")
_first_check = True


def busy_elsewhere(samples: int = 5, interval_s: float = 0.04) -> float | None:
    """About how many processes other than this one are running now (None when it cannot be told).

    On Linux: the fewest runnable threads over a few samples, less the one reading. Elsewhere: the 1-minute load
    average, but only on a process's first check, since later it includes this process's own work."""
    global _first_check
    first, _first_check = _first_check, False
    try:
        counts = []
        for i in range(samples):
            if i:
                time.sleep(interval_s)
            counts.append(int(_LOADAVG.read_text().split()[3].split("/")[0]))
        return float(max(0, min(counts) - 1))
    except (OSError, ValueError, IndexError):  # no /proc/loadavg here (macOS, Windows)
        pass
    if not first:
        return None
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average on this platform
        return None


def apply_torch_threads(torch_threads: int) -> None:
    """Set torch's CPU threads (0: torch's default, with a warning when that default would contend)."""
    import torch

    if torch_threads:
        torch.set_num_threads(torch_threads)
        return
    load = busy_elsewhere()
    message = None if load is None else contention_warning(load, os.cpu_count() or 1, torch.get_num_threads())
    if message:
        warnings.warn(message, stacklevel=3)


__all__ = ["apply_torch_threads", "busy_elsewhere", "contention_warning"]

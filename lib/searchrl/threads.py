"""How many CPU threads torch uses, and a warning when torch's default would contend with processes already running.

torch starts one thread per core. On a small machine where another job already runs, its threads then share cores
and wait for each other, and a run can slow down many times over: the demo's untrained evaluation, beside one other
one-thread job on 2 cores, took 18.6 s a question at torch's default of 2 threads against under 1 s at 1 thread
(outputs/LOG.md, 2026-11-29). A run with `torch_threads` set is left alone.
"""

from __future__ import annotations

import os
import warnings


def contention_warning(load: float, cores: int, threads: int) -> str | None:
    """What to say when `threads` torch threads would share `cores` cores with `load` processes already running
    (the 1-minute load average), or None when they fit."""
    busy = int(load)
    if busy < 1 or threads <= 1 or threads + busy <= cores:  # one thread is as few as it gets
        return None
    free = max(1, cores - busy)
    return (f"the CPU is busy: about {busy} process(es) already running on {cores} cores, and torch would start "
            f"{threads} threads; threads that wait for each other on shared cores can slow this run many times "
            f"over, so set torch_threads: {free} (or torch_threads: 0 to keep torch's default)")


def apply_torch_threads(torch_threads: int) -> None:
    """Set torch's CPU threads (0: torch's default, with a warning when that default would contend)."""
    import torch

    if torch_threads:
        torch.set_num_threads(torch_threads)
        return
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average on this platform
        return
    message = contention_warning(load, os.cpu_count() or 1, torch.get_num_threads())
    if message:
        warnings.warn(message, stacklevel=3)


__all__ = ["apply_torch_threads", "contention_warning"]

"""torch's thread count: a run's setting is applied as given; torch's default warns when other processes already
use the cores it would take."""

from __future__ import annotations

import warnings

import torch

from searchrl.core import threads
from searchrl.core.threads import apply_torch_threads, contention_warning


def test_the_warning_names_the_thread_count_that_fits():
    assert contention_warning(load=0.3, cores=2, threads=2) is None  # an idle machine
    assert contention_warning(load=1.2, cores=8, threads=4) is None  # room left for torch's threads
    assert contention_warning(load=4.0, cores=2, threads=1) is None  # nothing fewer to suggest
    message = contention_warning(load=1.1, cores=2, threads=2)
    assert message is not None and "about 1 process(es) already running on 2 cores" in message
    assert "set torch_threads: 1" in message
    assert "set torch_threads: 1" in contention_warning(load=3.0, cores=2, threads=2)  # never fewer than 1


def test_a_set_thread_count_is_applied_without_a_warning(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            apply_torch_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def _runnable(tmp_path, monkeypatch, runnable: int):
    """A /proc/loadavg whose instantaneous count says `runnable` threads are runnable (the reader among them)."""
    path = tmp_path / "loadavg"
    path.write_text(f"9.00 9.00 9.00 {runnable}/300 4242\n")
    monkeypatch.setattr(threads, "_LOADAVG", path)


def _default_threads_warnings(monkeypatch) -> list[str]:
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_torch_threads(0)
    return [str(w.message) for w in caught]


def test_the_default_warns_on_a_busy_machine(tmp_path, monkeypatch):
    _runnable(tmp_path, monkeypatch, 3)  # two other processes and the reader
    assert any("set torch_threads: 1" in message for message in _default_threads_warnings(monkeypatch))


def test_a_run_does_not_warn_about_its_own_earlier_work(tmp_path, monkeypatch):
    # an ablation's next arm: the load average still holds the previous arm's threads, but nothing else runs now
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.0, 2.0, 2.0))
    _runnable(tmp_path, monkeypatch, 1)
    assert threads.busy_elsewhere(samples=2, interval_s=0) == 0.0
    assert _default_threads_warnings(monkeypatch) == []


def test_without_an_instant_count_only_a_process_first_check_reads_the_load_average(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "_LOADAVG", tmp_path / "absent")
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setattr(threads, "_first_check", True)
    assert threads.busy_elsewhere() == 5.0
    assert threads.busy_elsewhere() is None  # later the average includes this process's own work

"""torch's thread count: a run's setting is applied as given; torch's default warns when other processes already
use the cores it would take."""

from __future__ import annotations

import warnings

import torch

from searchrl import threads
from searchrl.threads import apply_torch_threads, contention_warning


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


def test_the_default_warns_on_a_busy_machine(monkeypatch):
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_torch_threads(0)
    assert any("set torch_threads: 1" in str(w.message) for w in caught)

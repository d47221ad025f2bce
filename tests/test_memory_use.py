"""Each part of a run records its own peak memory, so a user can size a machine for a recipe."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from searchrl.runs import memory as memory_use
from searchrl.runs.memory import format_memory, measured, read_memory


def test_each_part_gets_its_own_peak(tmp_path: Path) -> None:
    if not memory_use.reset_peak():
        pytest.skip("the resident-set peak cannot be reset on this system")
    with measured(tmp_path, "big"):
        block = np.ones(40_000_000)  # 320 MB, written, so resident
        block[::4096] = 2.0
        del block
    with measured(tmp_path, "small"):
        np.ones(1000).sum()
    parts = read_memory(tmp_path)
    assert set(parts) == {"big", "small"} and parts["big"]["scope"] == "part"
    # the second part's peak was reset after the first freed its block: it does not carry the 320 MB
    assert parts["big"]["peak_rss_gb"] - parts["small"]["peak_rss_gb"] >= 0.25


def test_a_part_that_raises_is_still_recorded_and_others_are_kept(tmp_path: Path) -> None:
    with measured(tmp_path, "cold start"):
        pass
    with pytest.raises(RuntimeError), measured(tmp_path, "rl"):
        raise RuntimeError("killed")
    parts = read_memory(tmp_path)
    assert list(parts) == ["cold start", "rl"] and parts["rl"]["peak_rss_gb"] > 0


def test_only_the_first_launched_process_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    with measured(tmp_path, "rl"):
        pass
    assert read_memory(tmp_path) == {}


def test_the_summary_line_names_each_part() -> None:
    line = format_memory({"cold start": {"peak_rss_gb": 5.13}, "rl": {"peak_rss_gb": 6.3, "peak_gpu_gb": 2.04}})
    assert line == "peak memory: cold start 5.1 GB, rl 6.3 GB (GPU 2.0 GB)"
    assert format_memory({}) == "peak memory: not recorded"


def test_the_callback_adds_the_peak_to_each_logged_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in for transformers (importing it takes seconds); the callback only relies on on_log's signature.
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=object))
    logs = {"reward": 0.5}
    memory_use.memory_callback().on_log(None, None, None, logs=logs)
    assert logs["reward"] == 0.5 and logs["memory/peak_rss_gb"] > 0


def test_a_killed_run_is_told_its_recorded_peaks_and_what_lowers_them(tmp_path: Path) -> None:
    from searchrl.experiments import runner_exec as runner

    (tmp_path / "params.yaml").write_text("micro_batch_size: 0\neval_batch_size: 20\nprompts_per_step: 2\n"
                                          "num_generations: 8\n", encoding="utf-8")
    memory_use.record(tmp_path, "cold start", {"peak_rss_gb": 5.0, "scope": "part"})

    class DeadKernelError(RuntimeError):  # nbclient's error is recognised by its name
        pass

    message = runner._failure_message(DeadKernelError("dead"), tmp_path / "quickstart.ipynb")
    assert "peak memory: cold start 5.0 GB" in message
    assert "micro_batch_size (now 0: each step in one pass), eval_batch_size (now 20)" in message
    assert f"continue with: python -m searchrl.runner --resume {tmp_path}\n" in message
    # a quarter of the 16-rollout step, and half the evaluation batch
    assert message.rstrip().endswith(f"--resume {tmp_path} -p micro_batch_size 4 -p eval_batch_size 10")
    total, _ = memory_use.machine_memory_gb()
    assert total is None or f"this machine: {total:.1f} GB" in message


def test_the_smaller_micro_batch_divides_the_step_and_halves_the_pass() -> None:
    step = {"prompts_per_step": 3, "num_generations": 4}  # 12 rollouts a step
    assert memory_use.smaller_micro_batch({**step, "micro_batch_size": 0}) == 3
    assert memory_use.smaller_micro_batch({**step, "micro_batch_size": 6}) == 3
    assert memory_use.smaller_micro_batch({**step, "micro_batch_size": 4}) == 2
    assert memory_use.smaller_micro_batch({**step, "micro_batch_size": 1}) is None
    assert memory_use.smaller_micro_batch({}) is None  # parameters unknown


def test_the_lower_peak_settings_name_only_what_can_get_smaller() -> None:
    assert memory_use.lower_peak_settings({"prompts_per_step": 2, "num_generations": 4, "micro_batch_size": 1,
                                           "eval_batch_size": 1}) == {}
    assert memory_use.lower_peak_settings({"eval_batch_size": 5}) == {"eval_batch_size": 2}

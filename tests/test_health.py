"""Training health: collapse rules on synthetic metric streams, the callback's warn / stop actions and its record."""

from __future__ import annotations

import json
import random
import warnings
from types import SimpleNamespace

import pytest

from searchrl.config.health import HealthConfig, health_problems
from searchrl.trainer.monitors.health import (
    EMPTY_KEY,
    FORMAT_KEY,
    GARBLED_KEY,
    REPEAT_KEY,
    SEARCH_KEY,
    HealthMonitor,
    HealthWarning,
    alarms_in_history,
    garble_metrics,
    repeat_ratio,
    rollback_checkpoint,
)


def _feed(monitor, stream):
    """Feed {step: logs}; return [(step, rule)] of the alarms raised."""
    return [(step, alarm.rule) for step, logs in stream.items() for alarm in monitor.observe(step, logs)]


def _collapse_stream():
    # Reward 0.5 for steps 1-10, then 0.0. Window 4: the mean over steps 9-12 is 0.25, 0.25 below the best 0.5.
    return {step: {"reward": 0.5 if step <= 10 else 0.0} for step in range(1, 16)}


def test_reward_collapse_is_found_at_the_hand_worked_step():
    monitor = HealthMonitor(HealthConfig(health_window=4, health_reward_drop=0.2))
    assert _feed(monitor, _collapse_stream()) == [(12, "reward collapse")]  # step 11: 0.375, a drop of 0.125 only
    alarm = monitor.alarms[0]
    assert (alarm.window_start, alarm.value) == (9, 0.25)
    assert list(monitor.active) == ["reward collapse"]  # raised once, still holding at step 15


def test_noisy_stable_stream_raises_nothing_and_a_later_collapse_is_found_within_a_window():
    rng = random.Random(0)
    cfg = HealthConfig(health_window=20, health_reward_drop=0.2, health_min_format_rate=0.5)
    stable = {step: {"reward": 0.4 + rng.uniform(-0.15, 0.15), FORMAT_KEY: 0.9 + rng.uniform(-0.08, 0.08),
                     GARBLED_KEY: rng.uniform(0, 0.1), REPEAT_KEY: rng.uniform(0, 0.2)} for step in range(1, 501)}
    monitor = HealthMonitor(cfg)
    assert _feed(monitor, stable) == []
    # Rewards in [0.25, 0.55] until step 300, then in [0, 0.1]: the best window mean is >= 0.25 and every window
    # inside the collapse has a mean <= 0.1, so the alarm comes by step 320 (and not before the collapse).
    monitor = HealthMonitor(cfg)
    stream = {step: {"reward": 0.4 + rng.uniform(-0.15, 0.15) if step <= 300 else rng.uniform(0, 0.1)}
              for step in range(1, 401)}
    alarms = _feed(monitor, stream)
    assert len(alarms) == 1 and alarms[0][1] == "reward collapse" and 300 < alarms[0][0] <= 320


def test_format_collapse_needs_the_format_first():
    # 0.2 on steps 1-5 (never formatted: no alarm), 0.9 on 6-15, 0.0 from 16. Window 4 means: step 16 0.675,
    # step 17 0.45 < 0.5.
    stream = {step: {FORMAT_KEY: 0.2 if step <= 5 else 0.9 if step <= 15 else 0.0} for step in range(1, 21)}
    monitor = HealthMonitor(HealthConfig(health_window=4, health_min_format_rate=0.5))
    # Four steps at 0.0 (16-19) also mean no sample keeps the format at all: the format-lost rule's alarm.
    assert _feed(monitor, stream) == [(17, "format collapse"), (19, "format lost")]
    untrained = {step: {FORMAT_KEY: 0.1} for step in range(1, 30)}
    assert _feed(HealthMonitor(HealthConfig(health_window=4)), untrained) == []


def test_search_collapse_is_found_within_four_steps_even_with_a_long_window():
    # ablate_stages' two_stage seed 1 in stage 2: 1.31, 0.50, 0.25, then no search. The last-4 means: step 4 0.52,
    # step 5 0.19, step 6 0.06 < 0.1. A 20-step window (the default) would not have judged a 16-step run at all.
    searches = [1.31, 0.50, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0]
    stream = {step: {SEARCH_KEY: n} for step, n in enumerate(searches, start=1)}
    monitor = HealthMonitor(HealthConfig(health_window=20, health_min_searches=0.1))
    assert _feed(monitor, stream) == [(6, "search collapse")]
    assert "nearly stopped searching" in monitor.alarms[0].message and monitor.alarms[0].window_start == 3
    never = {step: {SEARCH_KEY: 0.0} for step in range(1, 10)}  # a policy that never searched has not collapsed
    assert _feed(HealthMonitor(HealthConfig()), never) == []
    assert _feed(HealthMonitor(HealthConfig(health_min_searches=0.0)), stream) == []


def test_empty_searches_are_found_where_the_search_count_looks_healthy():
    # ablate_evidence's cpu profile, no_evidence seed 2: the policy learned to search "and", which finds nothing.
    # Searches per sample stayed near 1 (no search collapse); the empty share of the last 4 steps' searches is 0.59
    # at step 9 (2.53 empty of 4.28) and 0.66 at step 10 (2.78 of 4.22), past 0.6.
    searches = [0.9375, 0.375, 0.6875, 0.375, 0.5, 1.0, 1.125, 1.0625, 1.09375, 0.9375, 0.9375, 1.125, 1.0, 1.125,
                1.125, 0.8125]
    empty = [0.1875, 0.125, 0.4375, 0.25, 0.125, 0.4375, 0.75, 0.75, 0.59375, 0.6875, 0.5, 0.75, 0.875, 0.8333, 1.0,
             0.75]
    stream = {step: {SEARCH_KEY: n, EMPTY_KEY: e} for step, (n, e) in enumerate(zip(searches, empty), start=1)}
    monitor = HealthMonitor(HealthConfig())
    assert _feed(monitor, stream) == [(10, "empty searches")]
    alarm = monitor.alarms[0]
    assert alarm.window_start == 7 and alarm.value == pytest.approx(2.78125 / 4.21875)
    assert "found no document" in alarm.message
    # An ordinary run: a third of the searches empty (this project's runs stay under 0.5) raises nothing
    ordinary = {step: {SEARCH_KEY: 1.2, EMPTY_KEY: 0.4} for step in range(1, 17)}
    assert _feed(HealthMonitor(HealthConfig()), ordinary) == []
    # Too few searches to judge: the last searches of a collapsing policy, all empty, are search collapse's alarm
    fading = {step: {SEARCH_KEY: 1.0 if step <= 4 else 0.05, EMPTY_KEY: 0.1 if step <= 4 else 0.05}
              for step in range(1, 12)}
    assert _feed(HealthMonitor(HealthConfig()), fading) == [(8, "search collapse")]  # steps 5-8: 0.05 a sample
    assert _feed(HealthMonitor(HealthConfig(health_max_empty_searches=1)), stream) == []  # 1: off


def test_format_lost_is_found_where_the_format_never_reached_the_collapse_rule():
    # ablate_algorithm's cpu profile, RLOO seed 0: sampled format 0.25 at step 1, 0.00 from step 2 on. The
    # format-collapse rule waits for 0.5 and never fires; the last-4 mean is 0.0625 at step 4 and 0 at step 5.
    formats = [0.25] + [0.0] * 15
    stream = {step: {FORMAT_KEY: rate} for step, rate in enumerate(formats, start=1)}
    monitor = HealthMonitor(HealthConfig())
    assert _feed(monitor, stream) == [(5, "format lost")]
    assert monitor.alarms[0].window_start == 2 and "no sampled rollout keeps the format" in monitor.alarms[0].message
    never = {step: {FORMAT_KEY: 0.0} for step in range(1, 10)}  # a policy that never had the format has not lost it
    assert _feed(HealthMonitor(HealthConfig()), never) == []
    assert _feed(HealthMonitor(HealthConfig(health_lost_format_rate=-1)), stream) == []
    # A rare well-formed sample keeps the window above 0.02: one in 8 at step 3 of 4 is a mean of 0.031.
    rare = {step: {FORMAT_KEY: 0.125 if step % 4 == 3 else 0.0} for step in range(1, 17)}
    assert _feed(HealthMonitor(HealthConfig()), rare) == []


def test_format_lost_clears_when_the_format_comes_back_and_can_alarm_again():
    formats = [0.3] * 4 + [0.0] * 4 + [0.4] * 4 + [0.0] * 4
    stream = {step: {FORMAT_KEY: rate} for step, rate in enumerate(formats, start=1)}
    # Last-4 means: step 8 is 0 (alarm); step 9 is 0.1 (cleared); steps 13-16 fall to 0 again at step 16.
    assert _feed(HealthMonitor(HealthConfig()), stream) == [(8, "format lost"), (16, "format lost")]


def test_alarms_are_replayed_from_a_metrics_history_one_monitor_per_stage():
    # Stage 1 loses the format at step 5; stage 2 (a new trainer, a new monitor) starts at 0 and never had it.
    rows = [{"step": s, "stage": "stage1", FORMAT_KEY: 0.25 if s == 1 else 0.0} for s in range(1, 7)]
    rows += [{"step": s, "stage": "stage2", FORMAT_KEY: 0.0, "reward": float("nan")} for s in range(7, 13)]
    alarms = alarms_in_history(list(reversed(rows)), HealthConfig())  # any order: replayed by step
    assert [(a.rule, a.step) for a in alarms] == [("format lost", 5)]
    assert alarms_in_history([{"step": 0, FORMAT_KEY: float("nan")}], HealthConfig()) == []


def test_gibberish_and_repetition_and_rules_that_are_off():
    stream = {step: {GARBLED_KEY: 0.0 if step < 8 else 0.8, REPEAT_KEY: 0.1 if step < 10 else 0.9}
              for step in range(1, 13)}
    # Window 2: garbled mean at step 8 is 0.4 > 0.3; repeat mean at step 10 is 0.5, at step 11 0.9 > 0.6.
    cfg = HealthConfig(health_window=2, health_max_garbled_rate=0.3, health_max_repeat_ratio=0.6)
    assert _feed(HealthMonitor(cfg), stream) == [(8, "gibberish"), (11, "repetition")]
    off = HealthConfig(health_window=2, health_max_garbled_rate=1.0, health_max_repeat_ratio=1.0,
                       health_reward_drop=0.0)
    assert _feed(HealthMonitor(off), {**stream, **_collapse_stream()}) == []


def test_an_alarm_is_raised_again_only_after_it_cleared():
    rewards = [0.5] * 6 + [0.0] * 4 + [0.5] * 6 + [0.0] * 4
    stream = {step: {"reward": r} for step, r in enumerate(rewards, start=1)}
    # Window 2, drop 0.2: steps 6-7 average 0.25, a drop of 0.25 -> alarm at 7. It holds through step 11 (0.25
    # again), clears at step 12 (back to 0.5), and the second fall raises it again at step 17.
    assert _feed(HealthMonitor(HealthConfig(health_window=2)), stream) == [(7, "reward collapse"),
                                                                           (17, "reward collapse")]


class _Tokenizer:
    def batch_decode(self, ids, skip_special_tokens=True):
        return ["".join(chr(0xFFFD) if t == 0 else chr(96 + t) for t in row) for row in ids]


def test_garble_metrics_judge_only_the_sampled_tokens():
    loop = SimpleNamespace(completion_ids=[1, 2, 3, 4] * 5, env_mask=[1] * 20)
    # Token 0 decodes to U+FFFD (garbled), but in the second sample it was retrieved (mask 0): not the model's text.
    garbled = SimpleNamespace(completion_ids=[0, 5, 6], env_mask=[1, 1, 1])
    retrieved = SimpleNamespace(completion_ids=[5, 0, 0, 6], env_mask=[1, 0, 0, 1])
    metrics = garble_metrics([loop, garbled, retrieved], _Tokenizer())
    assert metrics[GARBLED_KEY] == pytest.approx(1 / 3)
    # The loop: 17 four-grams, 4 distinct -> 13/17 repeated; the others are too short for a 4-gram.
    assert repeat_ratio([1, 2, 3, 4] * 5) == pytest.approx(13 / 17)
    assert metrics[REPEAT_KEY] == pytest.approx(13 / 17 / 3)
    assert repeat_ratio(list(range(30))) == 0.0


def _callback(cfg, **kwargs):
    from searchrl.trainer.monitors.health import HealthCallback

    return HealthCallback(cfg, **kwargs)


def _run(callback, tmp_path, stream, saves=(), history=(), start=0):
    from transformers import TrainerControl, TrainerState

    args = SimpleNamespace(output_dir=str(tmp_path))
    state = TrainerState(log_history=list(history), global_step=start)
    control = TrainerControl()
    callback.on_train_begin(args, state, control)
    stopped_at = None
    for step, logs in stream.items():
        state.global_step = step
        callback.on_log(args, state, control, logs=logs)
        if step in saves:
            (tmp_path / f"checkpoint-{step}").mkdir()
            callback.on_save(args, state, control)
        if control.should_training_stop:
            stopped_at = step
            break
    callback.on_train_end(args, state, control)
    return stopped_at


def test_stop_ends_training_and_names_the_last_good_checkpoint(tmp_path):
    lines = []
    callback = _callback(HealthConfig(health_window=4, health_action="stop"), sink=lines.append)
    with pytest.warns(HealthWarning, match="reward collapse at step 12"):
        stopped = _run(callback, tmp_path, _collapse_stream(), saves=(5, 10))
    assert stopped == callback.stopped_at == 12
    assert lines == [callback.lines[0]] and lines[0].endswith("stopping training")
    record = json.loads((tmp_path / "health.json").read_text())
    assert record["status"] == "stopped" and record["active"] == ["reward collapse"]
    # Checkpoint 10 was saved inside the window that raised the alarm (steps 9-12): checkpoint 5 is the last good.
    assert record["last_good_checkpoint"] == {"step": 5, "path": str(tmp_path / "checkpoint-5")}
    assert rollback_checkpoint(tmp_path) == tmp_path / "checkpoint-5"
    assert record["signals"] == ["reward"]


def test_warn_keeps_training_and_off_does_nothing(tmp_path):
    callback = _callback(HealthConfig(health_window=4, health_action="warn"))
    with pytest.warns(HealthWarning):
        assert _run(callback, tmp_path, _collapse_stream()) is None
    assert json.loads((tmp_path / "health.json").read_text())["status"] == "warned"
    quiet = tmp_path / "off"
    quiet.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run(_callback(HealthConfig(health_window=4, health_action="off")), quiet, _collapse_stream()) is None
    assert not (quiet / "health.json").exists()


def test_a_resumed_run_replays_its_log_history(tmp_path):
    # A first run saved checkpoints 5 and 10 and died; resumed from step 10, the restored history (steps 1-10)
    # fills the window, and the live steps 11 and 12 complete the collapse at step 12.
    _run(_callback(HealthConfig(health_window=4)), tmp_path, {s: {"reward": 0.5} for s in range(1, 11)}, saves=(5, 10))
    history = [{"reward": 0.5, "step": step} for step in range(1, 11)]
    callback = _callback(HealthConfig(health_window=4, health_action="stop"))
    with pytest.warns(HealthWarning):
        stopped = _run(callback, tmp_path, {11: {"reward": 0.0}, 12: {"reward": 0.0}}, history=history, start=10)
    assert stopped == 12
    assert rollback_checkpoint(tmp_path) == tmp_path / "checkpoint-5"


def test_settings_are_checked():
    with pytest.raises(ValueError, match="health_action must be one of off, warn, stop"):
        HealthConfig(health_action="halt")
    values = {**HealthConfig().__dict__, "health_window": 0, "health_min_format_rate": 1.5, "health_min_searches": -1,
              "health_lost_format_rate": 1.0, "health_max_empty_searches": -0.1}
    assert [key for key, _ in health_problems(values)] == ["health_window", "health_min_format_rate",
                                                           "health_max_empty_searches", "health_lost_format_rate",
                                                           "health_min_searches"]
    assert health_problems({**HealthConfig().__dict__, "health_lost_format_rate": -1}) == []  # -1: off

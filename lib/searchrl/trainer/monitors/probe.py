"""A fixed probe set scored during RL: a learning curve that does not move with the question draw.

Each RL step trains on a few questions (2 to 4 on a CPU), so the per-step training reward mostly says which
questions were drawn: two runs with the same seed rise and fall together whatever their settings. With
`probe_every` > 0 the trainer also scores the policy greedily, every that many steps (and before the first), on the
same `probe_questions` held-out questions of the training types, and logs `probe/f1`, `probe/em`, `probe/searches`
and `probe/format_ok` into the run's metrics history at that step (figure: `figures/probe_curve.png`; each probe's
per-question records: `probe/step-<N>.jsonl`).

The probe questions are the first of the run's evaluation questions, so the last probe equals the final evaluation
on them. They are only watched: nothing (no checkpoint, no stopping rule) is chosen by them, so the final evaluation
stays held out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PROBE_METRICS", "probe_callback", "probe_records_path", "probe_rows", "probe_summary"]


PROBE_METRICS = {"probe/f1": "f1", "probe/em": "em", "probe/searches": "searches", "probe/format_ok": "format_ok"}


def probe_rows(eval_rows: Sequence[Mapping], types: Sequence[str], n: int) -> list[Mapping]:
    """The first `n` evaluation rows whose question type is in `types` (every row when `types` is empty)."""
    chosen = [r for r in eval_rows if not types or str(r.get("metadata", {}).get("type", "unknown")) in types]
    return chosen[:n]


def probe_summary(records) -> dict[str, float]:
    """The logged probe metrics from one probe's per-question records (a DataFrame)."""
    return {name: float(records[column].mean()) for name, column in PROBE_METRICS.items() if column in records}


def probe_callback(every: int, score: Callable[[Any, int], Any], log: Callable[[dict, int], None]) -> Any:
    """A transformers ``TrainerCallback`` (imported here, so RunConfig, which inherits ProbeConfig, stays free of
    transformers) that probes before the first step, every `every` steps and at the last step."""
    from transformers import TrainerCallback

    class ProbeCallback(TrainerCallback):
        """Scores the policy on the probe rows before the first step and every `every` steps after.

        `score(model, step)` evaluates and returns the per-question records (a DataFrame); `log(metrics, step)`
        stores the summary (the run's MetricsHistory.append). Only the main process probes: the probe is a
        measurement, and the other processes never wait on it for long (it runs between two steps).
        """

        def __init__(self, every: int, score: Callable[[Any, int], Any], log: Callable[[dict, int], None]):
            self.every = every
            self.score = score
            self.log = log
            self.steps: list[int] = []

        def _probe(self, state, model) -> None:
            if not state.is_world_process_zero or state.global_step in self.steps:
                return
            self.log(probe_summary(self.score(model, state.global_step)), state.global_step)
            self.steps.append(state.global_step)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if state.global_step == 0:  # a resumed run already probed its start
                self._probe(state, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % self.every == 0 or state.global_step >= state.max_steps:
                self._probe(state, model)

    return ProbeCallback(every, score, log)


def probe_records_path(run_dir: str | Path, stage: str, step: int) -> Path:
    """Where one probe's per-question records go (a stage's own folder when a schedule has several stages)."""
    folder = Path(run_dir) / "probe" / (stage if stage != "rl" else "")
    return folder / f"step-{step:04d}.jsonl"

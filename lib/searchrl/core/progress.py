"""Progress bars that suit where the code runs, and the Trainer callback that shows one bar per training stage.

In JupyterLab a bar is a widget; in a terminal, and in a notebook executed headless by papermill (the runner, or
plain `papermill`), it is text on stderr, which the runner streams to the terminal (a widget there would show
nothing while the cold start runs for minutes).
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from tqdm import std as tqdm_std


@lru_cache(maxsize=1)
def headless() -> bool:
    """Whether nobody can see notebook widgets: outside a Jupyter kernel, or in a kernel papermill started."""
    if "ipykernel" not in sys.modules:
        return True
    if os.environ.get("SEARCHRL_RUN_DIR"):  # set by the runner, which executes through papermill
        return True
    from searchrl.core.papermill import papermill_arguments

    return papermill_arguments() is not None  # plain `papermill` starts the kernel as its own child


def progress_bar(*args, **kwargs):
    """A tqdm bar: a widget in interactive Jupyter, plain text elsewhere."""
    if headless():
        kwargs.setdefault("file", sys.stderr)
        kwargs.setdefault("dynamic_ncols", True)
        return tqdm_std.tqdm(*args, **kwargs)
    try:
        from tqdm.notebook import tqdm as notebook_tqdm

        return notebook_tqdm(*args, **kwargs)
    except ImportError:  # no ipywidgets: text
        return tqdm_std.tqdm(*args, **kwargs)


def say(text: str) -> None:
    """One line on stderr for a wait that has no bar of its own (a model converted or loaded mid-stage), written
    through tqdm so that an open text bar is redrawn below it rather than run into it."""
    tqdm_std.tqdm.write(text, file=sys.stderr)


def update_phase(micro_batch: int, of: int) -> str:
    """The phase text of an optimizer step's update, at micro-batch `micro_batch` (from 1) of `of`: the trainer shows
    the first when generation ends, the stage bar each next one as the previous finishes."""
    return f"update: micro-batch {micro_batch} of {of}"


def attach_stage_bar(trainer, desc: str, metrics: dict[str, str]) -> None:
    """Give a transformers Trainer (built with `disable_tqdm=True`) the stage bar of `stage_progress` in place of the
    PrinterCallback that prints every raw log dict."""
    from transformers import PrinterCallback

    callback = stage_progress(desc, metrics)
    trainer.add_callback(callback)
    trainer.remove_callback(PrinterCallback)
    if hasattr(trainer, "phase_listener"):  # SearchGRPOTrainer says what each step is doing
        trainer.phase_listener = callback.show_phase


def stage_progress(desc: str, metrics: dict[str, str]):
    """A transformers TrainerCallback drawing one bar over a training stage's steps, with the latest logged values
    of `metrics` ({log key: short label}) as its postfix (e.g. reward and searches per sample), and what the current
    step is doing: the phase a trainer reports through `show_phase`, and the micro-batches of the update."""
    from transformers import TrainerCallback

    class _StageProgress(TrainerCallback):
        def __init__(self):
            self.bar = None
            self.values: dict[str, str] = {}  # the latest logged metrics, by label
            self.phase = ""
            self.micro_batches = 0  # of the current optimizer step, done

        def show_phase(self, text: str) -> None:
            self.phase = text
            self._draw()

        def _draw(self) -> None:
            if self.bar is not None:
                self.bar.set_postfix({**self.values, **({"now": self.phase} if self.phase else {})})

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.bar = progress_bar(total=state.max_steps, initial=state.global_step, desc=desc, unit="step")

        def on_substep_end(self, args, state, control, **kwargs):
            self.micro_batches += 1
            self.show_phase(update_phase(self.micro_batches + 1, args.gradient_accumulation_steps))

        def on_step_end(self, args, state, control, **kwargs):
            self.micro_batches, self.phase = 0, ""
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)
                self._draw()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.bar is not None and logs:
                shown = {label: f"{logs[key]:.3g}" for key, label in metrics.items()
                         if isinstance(logs.get(key), (int, float))}
                if shown:
                    self.values = shown
                    self._draw()

        def on_train_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return _StageProgress()


__all__ = ["attach_stage_bar", "headless", "progress_bar", "say", "stage_progress", "update_phase"]

"""The work of one arm and seed, behind a small interface so that the ablation's bookkeeping can be tested without
training, and the real work is done by `searchrl.experiments.experiment.Experiment` in a folder the ablation chooses.

A work object has two methods:

- ``cold_start(cfg, folder) -> Path | None``: train `cfg`'s cold start into `folder` and return the saved model's
  folder (None when `cfg` has no cold start: RL then starts from `cfg.model`);
- ``train_and_evaluate(cfg, folder, start)``: RL from `start` (a saved model folder, or None), then evaluation on the
  held-out questions, writing into `folder` what an Experiment writes: ``metrics.parquet`` (or .csv) and
  ``trajectories/after_RL.jsonl`` (one record per question: id, em, f1, cem, searches, model_tokens, ...).

Both are called with `cfg.resume` on, so a folder left by an interrupted call continues from its last checkpoint.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from searchrl.config import RunConfig
from searchrl.experiments.ablation.layout import EVAL_STAGE, trained_policy
from searchrl.runs.folder import RUN_DIR_ENV


class ArmWork(Protocol):
    def cold_start(self, cfg: RunConfig, folder: Path) -> Path | None: ...

    def train_and_evaluate(self, cfg: RunConfig, folder: Path, start: Path | None) -> None: ...


class ExperimentWork:
    """The real work: an `Experiment` per cold start and per arm and seed, each in its own folder."""

    def __init__(self, notebook: str = "ablation"):
        self.notebook = notebook

    def cold_start(self, cfg: RunConfig, folder: Path) -> Path | None:
        if cfg.sft_examples <= 0:
            return None
        exp = experiment_in(folder, cfg, self.notebook)
        model = exp.cold_start(exp.load_model())
        del model, exp
        _free_memory()
        return Path(folder) / "checkpoints" / "cold_start"

    def train_and_evaluate(self, cfg: RunConfig, folder: Path, start: Path | None) -> None:
        exp = experiment_in(folder, cfg, self.notebook)
        trained = trained_policy(cfg, folder)
        if trained is not None:  # trained before an interruption during evaluation
            print(f"{folder.parent.name} seed {cfg.seed}: RL finished before; evaluating {trained}")
            model = exp.load_model(str(trained))
        else:
            model = exp.train_rl(exp.load_model(str(start) if start else None))
        exp.evaluate(model, EVAL_STAGE)
        exp.stage_table()
        del model, exp
        _free_memory()


def experiment_in(folder: Path, cfg: RunConfig, notebook: str):
    """An Experiment that writes into `folder` rather than a new run folder of its own.

    Experiment takes its folder from `current_run_dir`, which uses $SEARCHRL_RUN_DIR when set; the variable is set
    for the construction only. The kernel hooks that `current_run_dir` registers for the folder are removed again:
    the ablation's own run folder is the one whose status a failing cell should mark.
    """
    from searchrl.experiments.experiment import Experiment

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if "run_dir" in inspect.signature(Experiment).parameters:  # an Experiment that can be told its folder
        return Experiment(cfg, notebook=notebook, run_dir=folder)
    from searchrl.core.progress import headless

    headless()  # cached now: it reads $SEARCHRL_RUN_DIR, which must not decide how this notebook's bars look
    with _run_dir_env(folder), _no_new_cell_hooks():
        return Experiment(cfg, notebook=notebook)


@contextlib.contextmanager
def _run_dir_env(folder: Path) -> Iterator[None]:
    previous = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(RUN_DIR_ENV, None)
        else:
            os.environ[RUN_DIR_ENV] = previous


@contextlib.contextmanager
def _no_new_cell_hooks() -> Iterator[None]:
    shell = _ipython()
    before = list(shell.events.callbacks.get("post_run_cell", [])) if shell is not None else []
    try:
        yield
    finally:
        if shell is not None:
            for hook in list(shell.events.callbacks.get("post_run_cell", [])):
                if hook not in before:
                    shell.events.unregister("post_run_cell", hook)


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _free_memory() -> None:
    """Release the finished part's model before the next one loads (one GPU holds one policy at a time)."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


__all__ = ["ArmWork", "ExperimentWork", "experiment_in"]

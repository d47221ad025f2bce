"""Executing a checked run (`run_notebook`): the run folder, papermill, and what the folder records of the outcome.

A run folder is created (or a resumed one taken over, its earlier executed notebook kept beside the new one),
``params.yaml`` and ``provenance.json`` are written, and the notebook is executed by papermill with
``SEARCHRL_RUN_DIR`` pointing at the folder. The executed notebook is saved in the folder whether the run completes,
fails or is interrupted, and ``status.json`` says which (with the failing cell's error and traceback).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from searchrl.config import ConfigError, load_params_file
from searchrl.data.catalog import missing_data
from searchrl.experiments.runner_plan import NotebookError, RunPlan, plan_run
from searchrl.runs.folder import RUN_DIR_ENV, create_run_dir
from searchrl.runs.ownership import RunOwnership
from searchrl.runs.provenance import project_root, record_resume, write_provenance
from searchrl.runs.slim import copy_evidence
from searchrl.runs.status import mark_status

__all__ = ["KERNEL_NAME", "KERNEL_START_TIMEOUT_S", "RunError", "run_notebook"]


KERNEL_START_TIMEOUT_S = 180  # seconds a new kernel may take to answer before the run fails


KERNEL_NAME = "python3"


class RunError(RuntimeError):
    """The notebook started but did not complete; ``run_dir`` holds the executed notebook and ``status.json``."""

    def __init__(self, message: str, run_dir: Path, status: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir
        self.status = status


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an interrupt so the executed notebook is saved as for Ctrl-C."""


def _check_kernel() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise NotebookError(
            f"no Jupyter kernel named {KERNEL_NAME!r}; install one with: python -m ipykernel install --user"
        ) from None


def run_notebook(
    notebook: str | Path | None,
    params_files: Sequence[str | Path] = (),
    overrides: Mapping[str, Any] | None = None,
    *,
    run_name: str | None = None,
    output_root: str | Path | None = None,
    resume_dir: str | Path | None = None,
    progress_bar: bool = True,
    log_output: bool = True,
    execution_timeout: int | None = None,
    command: list[str] | None = None,
) -> Path:
    """Check, create the run folder, execute the notebook into it and return the folder.

    Raises :class:`NotebookError` / :class:`ConfigError` before anything is created, and :class:`RunError` (whose
    ``run_dir`` holds the executed notebook and ``status.json``) when the notebook fails or is interrupted.
    """
    plan = plan_run(
        notebook, params_files, overrides, run_name=run_name, output_root=output_root, resume_dir=resume_dir
    )
    cfg = plan.config
    missing = missing_data(cfg.dataset, cfg.corpus, cfg.eval_split, index=cfg.retriever_index,
                           stage1_dataset=cfg.stage1_dataset if cfg.two_stage else "")
    if missing:  # before the run folder, the kernel and any model
        raise ConfigError(missing)
    _check_kernel()
    ownership = RunOwnership(plan.resume_dir) if plan.resume_dir is not None else None
    if ownership is not None:
        ownership.acquire()  # a resume of a live run stops here: RunBusyError names its owner
    try:
        run_dir = _prepare_folder(plan, command)
        if ownership is None:
            ownership = RunOwnership(run_dir).acquire()
        return _run_owned(plan, run_dir, progress_bar, log_output, execution_timeout)
    finally:
        if ownership is not None:
            ownership.release()


def _run_owned(plan: RunPlan, run_dir: Path, progress_bar: bool, log_output: bool, execution_timeout: int | None
               ) -> Path:
    try:
        return _run_and_mark(plan, run_dir, progress_bar, log_output, execution_timeout)
    finally:
        copy_evidence(run_dir, plan.config.evidence_copy_dir)  # however the run ended


def _run_and_mark(plan: RunPlan, run_dir: Path, progress_bar: bool, log_output: bool, execution_timeout: int | None
                  ) -> Path:
    output = run_dir / f"{plan.name}.ipynb"
    started = time.monotonic()
    try:
        _execute(plan, output, run_dir, progress_bar, log_output, execution_timeout)
    except KeyboardInterrupt as err:
        why = "terminated (SIGTERM)" if isinstance(err, _Terminated) else "interrupted (Ctrl-C)"
        _mark(run_dir, "interrupted", why, notebook=output.name)
        raise RunError(f"run {why}; partial notebook: {output}", run_dir, "interrupted") from None
    except Exception as err:
        message = _failure_message(err, output)
        _mark(run_dir, "failed", **_failure_record(err), notebook=output.name)
        raise RunError(message, run_dir, "failed") from err
    _mark(run_dir, "completed", notebook=output.name, seconds=round(time.monotonic() - started, 1))
    return run_dir


def _mark(run_dir: Path, status: str, error: Any = None, **info: Any) -> None:
    """mark_status that survives a run folder gone unwritable (disk full, permissions): it says so on stderr
    instead, and the lock the runner releases on exit lets readers see the run as "died"."""
    try:
        mark_status(run_dir, status, error, **info)
    except OSError as err:
        print(f"warning: could not write {run_dir / 'status.json'} ({err.strerror or err}); the run ended "
              f"{status}", file=sys.stderr)


def _prepare_folder(plan: RunPlan, command: list[str] | None) -> Path:
    cmd = command if command is not None else list(sys.argv)
    root = project_root(plan.notebook.parent)
    nb_rel = _relative(plan.notebook, root) if root else str(plan.notebook)
    if plan.resume_dir is None:
        run_dir = create_run_dir(plan.name, plan.config.run_name, plan.output_root)
        extra = {"notebook_path": nb_rel, "params_files": [str(p) for p in plan.params_files]}
        write_provenance(run_dir, plan.config, notebook=plan.name, command=cmd, extra=extra, repo=plan.cwd)
    else:
        run_dir = plan.resume_dir
        # Keep the earlier attempt's executed notebook next to the new one instead of overwriting it.
        previous = run_dir / f"{plan.name}.ipynb"
        if previous.exists():
            attempt = 1
            while (run_dir / f"{plan.name}.attempt-{attempt}.ipynb").exists():
                attempt += 1
            previous.rename(run_dir / f"{plan.name}.attempt-{attempt}.ipynb")
        record_resume(run_dir, plan.config, cmd, repo=plan.cwd)
    mark_status(run_dir, "running", notebook=f"{plan.name}.ipynb")
    return run_dir


def _relative(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when inside it, else absolute."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def _execute(
    plan: RunPlan, output: Path, run_dir: Path, progress_bar: bool, log_output: bool, timeout: int | None
) -> None:
    import papermill as pm  # imported late: checks above stay fast and fail before papermill loads

    quiet = _QuietValidatedParameters()
    logging.getLogger("papermill").addFilter(quiet)

    previous_env = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(run_dir)  # the kernel inherits the environment
    in_main = threading.current_thread() is threading.main_thread()
    previous_handler = signal.signal(signal.SIGTERM, _raise_terminated) if in_main else None
    try:
        pm.execute_notebook(
            str(plan.notebook),
            str(output),
            parameters=plan.injected,
            kernel_name=KERNEL_NAME,
            language="python",
            progress_bar=progress_bar,
            # Stream cell prints straight to the terminal (papermill's log_output needs logging configured).
            stdout_file=sys.stdout if log_output else None,
            stderr_file=sys.stderr if log_output else None,
            cwd=str(plan.cwd),
            execution_timeout=timeout,
            # papermill waits 60 s for a new kernel; on a busy 2-core machine importing torch alone can take longer.
            start_timeout=KERNEL_START_TIMEOUT_S,
            kernel_manager_class=_local_kernel_manager(),
        )
    finally:
        logging.getLogger("papermill").removeFilter(quiet)
        if in_main:
            signal.signal(signal.SIGTERM, previous_handler)
        if previous_env is None:
            os.environ.pop(RUN_DIR_ENV, None)
        else:
            os.environ[RUN_DIR_ENV] = previous_env


def _local_kernel_manager():
    """A kernel manager that talks to its kernel over local sockets (IPC) where the platform has them: the kernel
    never listens on a network port, and it does not print its warning about unencrypted TCP on every run."""
    # The asynchronous manager, as nbclient's default is: with the blocking one, nbclient's wait for a cell's reply
    # blocks its event loop, so its once-a-second check that the kernel is alive never runs, and a kernel killed
    # mid-cell (out of memory, SIGKILL) leaves the run hanging forever instead of failing with DeadKernelError.
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum

    if os.name != "posix":
        return AsyncKernelManager

    class LocalKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        def _ip_default(self) -> str:
            # jupyter_client names IPC sockets "kernel-ipc-<n>" in the working directory unless a connection file is
            # already set: two kernels started at once from one folder (parallel runs, test workers) then race for
            # the same socket files and one never answers. A private folder per kernel cannot collide.
            return os.path.join(tempfile.mkdtemp(prefix="searchrl-kernel-"), "kernel-ipc")

    return LocalKernelManager


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _failure_record(err: BaseException) -> dict[str, Any]:
    """status.json fields for a failure: the cell's own error and traceback when a cell raised."""
    if hasattr(err, "ename") and hasattr(err, "exec_count"):  # papermill's PapermillExecutionError
        return {
            "error": f"{err.ename}: {err.evalue}",
            "traceback": _ANSI.sub("", "\n".join(getattr(err, "traceback", []) or [])),
            "cell_index": getattr(err, "cell_index", None),
            "execution_count": err.exec_count,
            "cell_source": getattr(err, "source", None),
        }
    if type(err).__name__ == "DeadKernelError":
        return {"error": "the notebook's kernel died mid-cell (killed: out of memory?); resume the run to continue"}
    return {"error": err}


class _QuietValidatedParameters(logging.Filter):
    """Drop papermill's "Passed unknown parameter" warning: every key was checked against RunConfig already, and
    the notebook's ``RunConfig.from_globals`` reads parameters its cell does not list."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passed unknown parameter" not in record.getMessage()


def _failure_message(err: BaseException, output: Path) -> str:
    if hasattr(err, "ename") and hasattr(err, "exec_count"):  # papermill's PapermillExecutionError
        first_line = next((ln for ln in str(getattr(err, "source", "")).splitlines() if ln.strip()), "")
        return (
            f"notebook failed in cell In [{err.exec_count}] ({first_line.strip()[:80]!r}): {err.ename}: {err.evalue}"
            f"\n  the executed notebook with the full traceback: {output}"
        )
    if type(err).__name__ == "DeadKernelError":  # nbclient's; the kernel process ended without answering
        advice, smaller = _memory_advice(output.parent)
        flags = " ".join(f"-p {name} {value}" for name, value in smaller.items())
        return (f"the notebook's kernel died mid-cell (killed: out of memory? `dmesg | tail` says); the cells "
                f"before it and the checkpoints are kept: {output}\n  {advice}"
                f"\n  continue with: python -m searchrl.runner --resume {output.parent}"
                + (f"\n  or, with about half the memory for each training pass and evaluation batch: "
                   f"python -m searchrl.runner --resume {output.parent} {flags}" if flags else ""))
    return f"notebook run failed: {type(err).__name__}: {err}\n  partial notebook (if any): {output}"


def _memory_advice(run_dir: Path) -> tuple[str, dict[str, int]]:
    """What to say about memory, and smaller compute-only settings to resume with."""
    from searchrl.runs.memory import killed_advice, lower_peak_settings

    try:
        params, _ = load_params_file(run_dir / "params.yaml")
    except ConfigError:  # a run killed before it wrote its parameters: advise without the run's values
        params = {}
    return killed_advice(run_dir, params), lower_peak_settings(params)

"""Run a notebook with a parameter file into a new run folder: ``python -m searchrl.runner NOTEBOOK -f PARAMS.yaml``.

Everything that can be checked is checked before anything heavy starts: the notebook exists and has a cell tagged
``parameters`` holding only ``name = literal`` lines whose names are RunConfig fields; each parameter file is a
mapping meant for this notebook (its ``notebook:`` key, or its folder ``params/<notebook>/``); every key and value
fits :class:`~searchrl.config.RunConfig`. Then a run folder is created, ``params.yaml`` and ``provenance.json`` are
written, and the notebook is executed by papermill with ``SEARCHRL_RUN_DIR`` pointing at the folder. The executed
notebook is saved in the folder whether the run completes, fails or is interrupted, and ``status.json`` says which.

Precedence, lowest first: RunConfig defaults, the notebook's parameters cell, ``-f`` files in order, ``-p`` values,
``--run-name`` / ``--output-root``. Papermill receives only the values that differ from what the notebook would
use by itself, so the injected cell shows exactly what this run changed.

Examples::

    python -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml
    python -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml -p rl_steps 5 -p rewards "[em, f1]"
    python -m searchrl.runner --resume outputs/quickstart/20250101-120000-ab12
"""

from __future__ import annotations

import argparse
import ast
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from searchrl.config import ConfigError, RunConfig, load_params_file, parse_scalar
from searchrl.core.files import read_json
from searchrl.runs.folder import RUN_DIR_ENV, create_run_dir, resolve_output_root
from searchrl.runs.ownership import RunOwnership
from searchrl.runs.provenance import project_root, record_resume, write_provenance
from searchrl.runs.slim import copy_evidence
from searchrl.runs.status import mark_status

__all__ = [
    "KERNEL_NAME",
    "NotebookError",
    "RunError",
    "RunPlan",
    "main",
    "parameters_cell_values",
    "plan_run",
    "run_notebook",
]

KERNEL_START_TIMEOUT_S = 180  # seconds a new kernel may take to answer before the run fails
KERNEL_NAME = "python3"


class NotebookError(ValueError):
    """The notebook cannot be run: missing, unreadable, or without a valid ``parameters`` cell."""


class RunError(RuntimeError):
    """The notebook started but did not complete; ``run_dir`` holds the executed notebook and ``status.json``."""

    def __init__(self, message: str, run_dir: Path, status: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir
        self.status = status


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an interrupt so the executed notebook is saved as for Ctrl-C."""


# --------------------------------------------------------------------------------------------------------------
# Checking the notebook and the parameters
# --------------------------------------------------------------------------------------------------------------


def _read_notebook(path: Path) -> nbformat.NotebookNode:
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.ipynb"))
            hint = f"; notebooks in {path.parent}: {', '.join(found)}" if found else ""
        raise NotebookError(f"notebook not found: {path}{hint}")
    if path.suffix != ".ipynb":
        raise NotebookError(f"{path} is not a notebook (.ipynb)")
    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError, nbformat.ValidationError) as err:  # unreadable, not JSON, not a notebook
        raise NotebookError(f"cannot read notebook {path}: {err}") from None


def parameters_cell_values(notebook: str | Path | nbformat.NotebookNode, label: str = "") -> dict[str, Any]:
    """The values assigned in the notebook's cell tagged ``parameters``, checked against RunConfig.

    The cell may hold only ``name = literal`` (or ``name: type = literal``) statements and comments, and every name
    must be a RunConfig field with a value of its type. Raises :class:`NotebookError` when there is no such cell or
    it holds anything else, and :class:`ConfigError` for unknown names or wrong types.
    """
    if isinstance(notebook, (str, Path)):
        label = label or str(notebook)
        notebook = _read_notebook(Path(notebook))
    label = label or "notebook"
    cells = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise NotebookError(
            f"{label} has no cell tagged 'parameters'; tag the cell holding the parameters "
            "(Jupyter: View > Cell Toolbar > Tags, add 'parameters') so parameter files can override it"
        )
    if len(cells) > 1:
        raise NotebookError(f"{label} has {len(cells)} cells tagged 'parameters'; keep exactly one")
    source = cells[0].source
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise NotebookError(f"{label}: parameters cell is not valid Python: {err}") from None
    values: dict[str, Any] = {}
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a bare string used as a comment
        if target is None:
            raise NotebookError(
                f"{label}: parameters cell line {node.lineno} is not 'name = value'; "
                "keep only flat parameter assignments there and move code to the next cell"
            )
        try:
            values[target] = ast.literal_eval(value)
        except ValueError:
            raise NotebookError(
                f"{label}: parameters cell line {node.lineno}: the value of {target!r} must be a literal "
                "(number, string, bool or list), not an expression"
            ) from None
    # Type and key checks, naming the cell; the notebook's own values must form a valid config too.
    RunConfig.merge((f"parameters cell of {label}", values))
    return values


def params_file_notebook(path: str | Path, declared: str | None) -> str | None:
    """The notebook a parameter file is for: its ``notebook:`` key, else its folder in ``params/<notebook>/``."""
    if declared:
        return Path(declared).stem
    path = Path(path).resolve()
    if path.parent.parent.name == "params":
        return path.parent.name
    return None


def _parse_overrides(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``-p key value`` pairs to typed values: YAML scalars, except that text fields keep the text as written."""
    out: dict[str, Any] = {}
    for key, raw in pairs:
        # "-p run_name 2024" means the name "2024", not the number; unknown keys are reported by RunConfig.merge.
        if key in RunConfig.field_names() and RunConfig.field_type(key) is str:
            out[key] = raw
        else:
            out[key] = parse_scalar(raw)
    return out


def _check_kernel() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise NotebookError(
            f"no Jupyter kernel named {KERNEL_NAME!r}; install one with: python -m ipykernel install --user"
        ) from None


@dataclass
class RunPlan:
    """Everything decided before execution: which notebook, with which parameters, into which folder."""

    notebook: Path
    name: str
    config: RunConfig
    injected: dict[str, Any]
    output_root: Path
    cwd: Path
    params_files: list[Path] = field(default_factory=list)
    resume_dir: Path | None = None

    def describe(self) -> str:
        """A human-readable summary, printed by ``--dry-run``."""
        lines = [
            f"notebook:     {self.notebook}",
            f"params files: {', '.join(map(str, self.params_files)) or '(none)'}",
            f"run folder:   {self.resume_dir or self.output_root / self.name / '<new run id>'}",
            f"injected:     {self.injected or '(nothing: notebook defaults)'}",
            "resolved parameters:",
            *("  " + line for line in self.config.to_yaml().splitlines()),
        ]
        return "\n".join(lines)


def plan_run(
    notebook: str | Path | None,
    params_files: Sequence[str | Path] = (),
    overrides: Mapping[str, Any] | None = None,
    *,
    run_name: str | None = None,
    output_root: str | Path | None = None,
    resume_dir: str | Path | None = None,
) -> RunPlan:
    """Check the notebook and parameters and decide the run, without creating or executing anything.

    ``overrides`` holds typed values (the CLI parses ``-p`` strings first). Raises :class:`NotebookError` or
    :class:`ConfigError` with a message that says what to fix.
    """
    resume = Path(resume_dir) if resume_dir else None
    if resume is not None:
        notebook = _notebook_of_run(resume, notebook)
    if notebook is None:
        raise NotebookError("name the notebook to run (or --resume RUN_DIR)")
    nb_path = Path(notebook).resolve()
    nb = _read_notebook(nb_path)
    name = nb_path.stem
    cell = parameters_cell_values(nb, label=str(notebook))

    sources: list[tuple[str, Mapping[str, Any]]] = [(f"parameters cell of {notebook}", cell)]
    if resume is not None:
        saved, _ = load_params_file(resume / "params.yaml")
        sources.append((str(resume / "params.yaml"), saved))
    for path in params_files:
        values, declared = load_params_file(path)
        meant_for = params_file_notebook(path, declared)
        if meant_for is not None and meant_for != name:
            raise ConfigError(
                f"{path} is a params file for another notebook ({meant_for!r}), not {name!r}; "
                f"use a file from params/{name}/"
            )
        sources.append((str(path), values))
    if overrides:
        sources.append(("-p", dict(overrides)))
    flags = {}
    if run_name is not None:
        flags["run_name"] = run_name
    if output_root is not None:
        flags["output_root"] = str(output_root)
    if resume is not None:
        flags["resume"] = True
    if flags:
        sources.append(("command-line flags", flags))
    cfg = RunConfig.merge(*sources)

    # Inject only what differs from what the notebook would use on its own.
    baseline = {**RunConfig.defaults(), **RunConfig.merge(("cell", cell)).to_dict()}
    injected = {k: v for k, v in cfg.to_dict().items() if baseline[k] != v}
    root = project_root(nb_path.parent)
    out_root = resolve_output_root(cfg.output_root) if root is None else _anchor(cfg.output_root, root)
    return RunPlan(
        notebook=nb_path,
        name=name,
        config=cfg,
        injected=injected,
        output_root=out_root,
        cwd=root or nb_path.parent,
        params_files=[Path(p) for p in params_files],
        resume_dir=resume,
    )


def _anchor(path: str | Path, root: Path) -> Path:
    path = Path(path).expanduser()
    return path if path.is_absolute() else root / path


def _notebook_of_run(run_dir: Path, notebook: str | Path | None) -> Path:
    if not (run_dir / "params.yaml").is_file():
        raise NotebookError(f"cannot resume {run_dir}: it is not a run folder (no params.yaml)")
    prov = read_json(run_dir / "provenance.json") or {}
    recorded = prov.get("notebook_path") or prov.get("notebook")
    chosen = Path(notebook) if notebook else None
    if chosen is None and recorded:
        chosen = Path(recorded)
        if not chosen.is_absolute():  # recorded relative to the project root
            chosen = (project_root(run_dir) or Path.cwd()) / chosen
    if chosen is None:
        raise NotebookError(f"cannot tell which notebook made {run_dir}; name it: python -m searchrl.runner NOTEBOOK ...")
    if chosen.stem != run_dir.parent.name:
        raise NotebookError(f"{run_dir} is a run of {run_dir.parent.name!r}, not of {chosen.stem!r}")
    return chosen


# --------------------------------------------------------------------------------------------------------------
# Executing
# --------------------------------------------------------------------------------------------------------------


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


def summarize(run_dir: Path) -> str:
    """Where the results of a run are: folder, notebook, parameters, metrics, evaluation files and figures."""
    lines = [f"run folder: {run_dir}"]
    notebooks = sorted(run_dir.glob("*.ipynb"))
    attempts = [p for p in notebooks if ".attempt-" in p.name]  # each resume keeps the earlier executed notebook
    for path in notebooks:
        if path not in attempts:
            lines.append(f"  {'notebook':<10} {path}"
                         + (f" (earlier attempts: {len(attempts)} *.attempt-N.ipynb beside it)" if attempts else ""))
    for pattern, label in (("metrics.*", "metrics"), ("eval/*.json", "evaluation"), ("*.csv", "table")):
        for path in sorted(run_dir.glob(pattern)):
            lines.append(f"  {label:<10} {path}")
    figures = sorted(run_dir.glob("figures/*.png"))
    if figures:
        lines.append(f"  figures    {run_dir / 'figures'} ({', '.join(p.name for p in figures)})")
    return "\n".join(lines)


def result_table(run_dir: Path) -> str | None:
    """The run's stage table (eval/table.json) as text, the headline numbers first; None when there is none."""
    rows = read_json(run_dir / "eval" / "table.json")
    if not rows:
        return None
    import pandas as pd

    table = pd.DataFrame(rows).set_index("stage")
    first = [c for c in ("EM", "F1", "F1 multi-hop", "searches/question", "format-valid rate") if c in table]
    table = table[first + [c for c in table if c not in first]]
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        return str(table)


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m searchrl.runner",
        description="Execute a notebook with parameter files into a new run folder (outputs/<notebook>/<run id>/).",
    )
    parser.add_argument("notebook", nargs="?", help="the notebook to run, e.g. notebooks/quickstart.ipynb")
    parser.add_argument(
        "-f", "--file", dest="files", action="append", default=[], metavar="PARAMS.yaml",
        help="parameter file (repeatable; later files win)",
    )  # fmt: skip
    parser.add_argument(
        "-p", "--param", dest="params", action="append", nargs=2, default=[], metavar=("KEY", "VALUE"),
        help="one parameter, value parsed as YAML (e.g. -p rl_steps 5 -p rewards '[em, f1]'); wins over files",
    )  # fmt: skip
    parser.add_argument("--run-name", help="label appended to the run folder's id")
    parser.add_argument("--output-root", help="folder that holds run folders (default: the output_root parameter)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="re-execute an earlier run into its folder, resume=true")
    parser.add_argument("--dry-run", action="store_true", help="check and print the resolved parameters; run nothing")
    parser.add_argument("--timeout", type=int, default=None, help="seconds a single cell may run (default: no limit)")
    parser.add_argument("--cell-progress", action="store_true",
                        help="also show papermill's bar over notebook cells (each stage shows its own bar anyway)")
    parser.add_argument("--quiet", action="store_true", help="do not stream cell output to the terminal")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="N",
                        help="run once per seed (each its own folder), then write the spread over seeds "
                             "(searchrl.analysis.seeds)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 1 failed, 2 bad input, 130 interrupted)."""
    args = _parser().parse_args(argv)
    command = [sys.executable, "-m", "searchrl.runner", *(sys.argv[1:] if argv is None else argv)]
    try:
        overrides = _parse_overrides(args.params)
        if args.dry_run:
            plan = plan_run(
                args.notebook, args.files, overrides,
                run_name=args.run_name, output_root=args.output_root, resume_dir=args.resume,
            )  # fmt: skip
            print(plan.describe())
            return 0
        if args.seeds:
            return _run_seeds(args, overrides, command)
        run_dir = run_notebook(
            args.notebook, args.files, overrides,
            run_name=args.run_name, output_root=args.output_root, resume_dir=args.resume,
            progress_bar=args.cell_progress, log_output=not args.quiet,
            execution_timeout=args.timeout, command=command,
        )  # fmt: skip
    except (ConfigError, NotebookError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RunError as err:
        print(f"\n{err.status}: {err}", file=sys.stderr)
        print(summarize(err.run_dir), file=sys.stderr)
        return 130 if err.status == "interrupted" else 1
    table = result_table(run_dir)
    print("\ncompleted." + (f"\n\n{table}\n" if table else "") + "\n" + summarize(run_dir))
    return 0


def _seeds_flag_problem(plan: RunPlan) -> str | None:
    """Why --seeds cannot run `plan`'s notebook, or None. An ablation notebook (the only kind with `arms`; the others
    never read `seeds`) runs every arm over its own `seeds` parameter, which wins over the `seed` --seeds sets: each
    run would repeat the whole ablation, and none writes the eval/table.json the spread over seeds is built from."""
    cfg = plan.config
    if not cfg.arms:
        return None
    return (f"--seeds cannot run {plan.name}, an ablation whose arms ({', '.join(map(str, cfg.arms))}) all run over "
            f"its own seeds parameter (now {cfg.seeds or [cfg.seed]}), so give the seeds with -p seeds \"[0, 1, 2]\" "
            "instead of --seeds")


def _run_seeds(args: argparse.Namespace, overrides: dict[str, Any], command: list[str]) -> int:
    """One run per seed; a failed seed is reported and the others still run. Then the spread over seeds."""
    from searchrl.analysis.seeds import report_seeds
    from searchrl.runs.folder import create_run_dir

    if args.resume:
        raise ConfigError("--seeds starts new runs; resume each seed's folder with --resume on its own")
    if "seed" in overrides:
        raise ConfigError("give the seeds with --seeds only, not also -p seed")
    names = {seed: f"{args.run_name or 'seeds'}-seed{seed}" for seed in args.seeds}
    plans = [plan_run(args.notebook, args.files, {**overrides, "seed": seed}, output_root=args.output_root,
                      run_name=names[seed]) for seed in args.seeds]  # every seed checked before the first runs
    problem = _seeds_flag_problem(plans[0])
    if problem:
        raise ConfigError(problem)
    run_dirs, failed = {}, []
    for seed in args.seeds:
        print(f"\n=== seed {seed} ({len(run_dirs) + len(failed) + 1} of {len(args.seeds)}) ===", flush=True)
        try:
            run_dirs[seed] = run_notebook(
                args.notebook, args.files, {**overrides, "seed": seed},
                run_name=names[seed], output_root=args.output_root,
                progress_bar=args.cell_progress, log_output=not args.quiet,
                execution_timeout=args.timeout, command=command,
            )  # fmt: skip
        except RunError as err:
            print(f"\nseed {seed} {err.status}: {err}\n{summarize(err.run_dir)}", file=sys.stderr)
            failed.append(seed)
            if err.status == "interrupted":
                break
    if not run_dirs:
        return 1
    folder = create_run_dir(plans[0].name, "seeds" + (f"-{args.run_name}" if args.run_name else ""),
                            plans[0].output_root)
    print("\n" + report_seeds(run_dirs, folder, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

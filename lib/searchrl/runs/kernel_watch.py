"""What a notebook kernel does for its run folder, so plain `papermill` leaves the same folder as the runner.

- A cell that raises marks the run "failed" in `status.json` (with the error), from inside the kernel: this works
  under the runner, plain papermill and JupyterLab alike.
- Under the runner, the kernel dies with its runner: it lives in a session of its own, so killing the runner (even
  its whole process group) would leave it training and writing into a folder nobody owns. A watchdog thread sees
  the runner gone, marks the run "died" and ends the kernel.
- Under plain papermill, a small watcher process outlives the kernel: when papermill exits it copies the executed
  notebook (papermill's output path) into the run folder, and marks a run still "running" as "failed" (the
  notebook stopped without finishing: a kill, or the kernel died). The runner does both itself.

    python -m searchrl.kernel_watch --pid PID --notebook OUTPUT.ipynb --run-dir DIR    (started by the kernel)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from searchrl.core.papermill import papermill_output_path


def install(run_dir: Path, notebook_name: str) -> None:
    """Hook the current IPython kernel (if any) to `run_dir`; start the papermill watcher when papermill runs it."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from searchrl.runs.status import mark_status

    def after_cell(result) -> None:
        error = getattr(result, "error_in_exec", None)
        if error is not None and not isinstance(error, KeyboardInterrupt):
            mark_status(run_dir, "failed", error)
        elif isinstance(error, KeyboardInterrupt):
            mark_status(run_dir, "interrupted", "interrupted (Ctrl-C / kernel interrupt)")

    shell.events.register("post_run_cell", after_cell)
    if os.environ.get("SEARCHRL_RUN_DIR"):
        threading.Thread(target=_die_with_parent, args=(run_dir, os.getppid()), name="searchrl-runner-watchdog",
                         daemon=True).start()
        return
    output = papermill_output_path()
    if output is not None:
        subprocess.Popen(  # a new session: it must outlive the kernel, which papermill stops first
            [sys.executable, "-m", "searchrl.kernel_watch", "--pid", str(os.getppid()), "--notebook", str(output),
             "--run-dir", str(run_dir), "--name", notebook_name],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )


def _die_with_parent(run_dir: Path, parent: int, poll_s: float = 0.2) -> None:
    # ipykernel's own parent poller also ends an orphaned kernel, checking once a second; polling faster gives this
    # thread the chance to say why in status.json first. If ipykernel wins, readers still see "died" (the owner's
    # lock is free).
    from searchrl.runs.status import mark_status

    while os.getppid() == parent and _alive(parent):
        time.sleep(poll_s)
    try:
        mark_status(run_dir, "died", f"the runner (pid {parent}) ended while the notebook was running (killed?); "
                                     "its kernel stopped with it. Continue with: python -m searchrl.runner --resume "
                                     f"{run_dir}")
    finally:
        os._exit(1)  # no cleanup: nothing more may be written into a folder whose owner is gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(pid: int, notebook: Path, run_dir: Path, name: str, poll_s: float = 0.5) -> None:
    from searchrl.runs.status import mark_status, read_status

    while _alive(pid):
        time.sleep(poll_s)
    if notebook.is_file():
        shutil.copy2(notebook, run_dir / f"{name}.ipynb")
    status = read_status(run_dir) or {}
    if status.get("status") == "running":
        mark_status(run_dir, "failed", "papermill ended before the notebook finished (killed, or the kernel died)",
                    notebook=f"{name}.ipynb")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchrl.kernel_watch")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--notebook", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args(argv)
    watch(args.pid, args.notebook, args.run_dir, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

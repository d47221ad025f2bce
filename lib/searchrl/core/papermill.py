"""How this process was started: the arguments of the plain `papermill` command that is its parent, when there
is one, and the output notebook that command writes."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["papermill_arguments", "papermill_output_path"]


def papermill_arguments() -> list[str] | None:
    """The arguments of the plain `papermill` command that started this process (its parent), or None."""
    try:
        argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in argv if a]
    start = next((i + 1 for i, a in enumerate(args) if a.endswith("papermill") and "searchrl" not in a), None)
    return None if start is None else args[start:]


def papermill_output_path() -> Path | None:
    """The output notebook of the plain `papermill` command that started this kernel, or None."""
    args = papermill_arguments()
    if args is None:
        return None
    try:
        from papermill.cli import papermill as cli

        ctx = cli.make_context("papermill", args, resilient_parsing=True)
    except Exception:  # noqa: BLE001  (any parse failure: then there is simply no path to copy)
        return None
    output = ctx.params.get("output_path")
    if not output or output == "-" or "://" in output:
        return None
    cwd = Path(f"/proc/{os.getppid()}/cwd").resolve()
    return (cwd / output).resolve()

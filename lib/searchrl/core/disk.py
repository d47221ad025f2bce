"""Disk space: the size of a folder, and whether a checkpoint will fit before it is written."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["checkpoint_space_problem", "folder_size"]


def folder_size(folder: str | Path) -> int:
    """Bytes in the files under `folder`."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def checkpoint_space_problem(folder: str | Path, need_bytes: int) -> str | None:
    """Why a checkpoint of `need_bytes` may not fit on the disk holding `folder` (None when it fits).

    A full disk otherwise surfaces mid-write as a cryptic serialization error ("unexpected pos ..."), leaving a
    cut-short checkpoint behind; checked before writing, the run stops with a message that says what to do.
    """
    probe = Path(folder).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free >= need_bytes:
        return None
    return (f"{free / 1e9:.1f} GB free on the disk holding {folder}, and a checkpoint of this run needs about "
            f"{need_bytes / 1e9:.1f} GB (weights and optimizer state). Free some space (the largest files are usually "
            "earlier runs' checkpoints, their optimizer.pt above all) or save less often (save_steps); a stopped run "
            "continues from its last complete checkpoint with `python -m searchrl.runner --resume <run folder>`.")

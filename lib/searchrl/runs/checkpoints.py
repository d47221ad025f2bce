"""Checkpoints inside a run folder: the last complete one a resume can use, and the resume state a completed run
drops."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from searchrl.core.disk import folder_size

__all__ = ["drop_resume_state", "last_complete_checkpoint", "release_resume_state"]


def drop_resume_state(run_dir: str | Path) -> int:
    """Delete what only a resume needs from a completed run folder: every `checkpoints/<stage>/checkpoint-N` (trainer
    state with the optimizer) and the `checkpoints/*_start` copies of each RL stage's start weights. Final policies
    (`checkpoints/<stage>` itself, the cold start) stay. Returns the bytes freed."""
    freed = 0
    for stage in sorted(Path(run_dir, "checkpoints").glob("*")):
        if not stage.is_dir():
            continue
        # An RL stage saves its start weights as "<stage>_start" beside its final "<stage>" (the KL reference of a
        # resume); "cold_start" has no such sibling and is a final policy.
        is_start_copy = stage.name.endswith("_start") and (stage.parent / stage.name[: -len("_start")]).is_dir()
        doomed = [stage] if is_start_copy else sorted(stage.glob("checkpoint-*"))
        for folder in doomed:
            freed += folder_size(folder)
            shutil.rmtree(folder, ignore_errors=True)
    return freed


def release_resume_state(run_dir: str | Path) -> int:
    """`drop_resume_state` on a run that just completed, saying what it freed; returns the bytes."""
    freed = drop_resume_state(run_dir)
    if freed:
        print(f"removed {freed / 1e9:.1f} GB of resume state (trainer checkpoints, stage start weights) from the "
              "completed run; its final policies stay (keep it all with -p keep_resume_state true)")
    return freed


def last_complete_checkpoint(output_dir: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest `checkpoint-N` in `output_dir` that a resume can use, and the newer ones skipped, with why.

    The Trainer writes a checkpoint file by file; one cut short by a crash lacks `trainer_state.json` (written last)
    or holds a truncated weights file. Those are skipped, so a resume falls back to the last complete one instead of
    failing.
    """
    folder = Path(output_dir)
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    skipped: list[tuple[Path, str]] = []
    for candidate in sorted(found, key=lambda p: int(p.name.split("-")[-1]), reverse=True):
        problem = _checkpoint_problem(candidate)
        if problem is None:
            return candidate, skipped
        skipped.append((candidate, problem))
    return None, skipped


def _checkpoint_problem(folder: Path) -> str | None:
    state = folder / "trainer_state.json"
    if not state.is_file():
        return "no trainer_state.json (cut short while saving)"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "trainer_state.json is not valid JSON"
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        return "no weights (*.safetensors)"
    from safetensors import safe_open

    for path in weights:
        try:
            with safe_open(str(path), framework="pt") as handle:
                keys = list(handle.keys())
                if keys:
                    handle.get_slice(keys[-1])[:]  # the last tensor is the first to be missing from a cut file
        except Exception as err:  # noqa: BLE001  (safetensors raises its own error types for a damaged file)
            return f"{path.name} is damaged ({type(err).__name__})"
    return None

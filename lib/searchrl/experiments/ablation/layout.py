"""Where an ablation keeps its parts inside its run folder, and the markers that say a part is finished.

    <run>/ablation.json                        arms, seeds, claims and which cold start each arm uses
    <run>/shared/seed<k>/cold_start-<key>/     one cold start per seed and cold-start key (an Experiment folder:
                                               checkpoints/cold_start, sft/history.json), done.json when finished
    <run>/arms/<arm>/seed<k>/                  one arm and seed (an Experiment folder: params.yaml, metrics.parquet,
                                               eval/after_RL.json, trajectories/after_RL.jsonl), done.json when finished
    <run>/figures/curves.png                   training curves, mean over seeds with a band, one line per arm
    <run>/eval_table.csv|json, verdicts.csv|json

A part is finished exactly when its `done.json` exists; it is written atomically (temporary file, then rename) after
everything else of the part, so an interrupted part never looks finished.

A cold start also leaves `weights.json`, the SHA-256 of its weight files, every time it is made: a slim copy keeps
it (and drops the weights and the done marker), so when a resume has to make the cold start again, the digest says
whether the arms still to run start from the very policy the finished ones started from.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from searchrl.config import RunConfig
from searchrl.core.files import read_json, write_json
from searchrl.runs.folder import stage_trajectories_path

EVAL_STAGE = "after RL"  # the evaluation every arm is compared on
EVAL_SLUG = EVAL_STAGE.replace(" ", "_")
DONE = "done.json"
WEIGHTS = "weights.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def arm_folder(run_dir: Path, arm: str, seed: int) -> Path:
    return Path(run_dir) / "arms" / arm / f"seed{seed}"


def cold_start_folder(run_dir: Path, seed: int, key: str) -> Path:
    return Path(run_dir) / "shared" / f"seed{seed}" / f"cold_start-{key}"


def records_path(folder: Path) -> Path:
    """The per-question evaluation records of one arm and seed (one JSON object a line)."""
    return stage_trajectories_path(folder, EVAL_STAGE)


def trained_policy(cfg: RunConfig, folder: Path) -> Path | None:
    """The policy RL saved at the end of `cfg`'s last stage in an arm's folder, when it got that far (a run stopped
    during the evaluation after it need not train again)."""
    from searchrl.trainer.schedules import rl_schedule

    stages = rl_schedule(cfg)
    final = Path(folder) / "checkpoints" / stages[-1].name if stages else None
    return final if final is not None and (final / "config.json").is_file() else None


def is_done(folder: Path) -> bool:
    return (Path(folder) / DONE).is_file()


def mark_done(folder: Path, info: dict[str, Any]) -> Path:
    return write_json(Path(folder) / DONE, info)


def read_done(folder: Path) -> dict[str, Any] | None:
    return read_json(Path(folder) / DONE)


def weights_sha256(model: Path | None) -> str | None:
    """SHA-256 over the weight files of a saved model folder, in name order (None: no model or no weight file)."""
    files = sorted(f for f in Path(model).rglob("*") if f.is_file() and f.suffix in WEIGHT_SUFFIXES) if model else []
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(model).as_posix().encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def finished_arm_folders(run_dir: Path) -> dict[tuple[str, int], Path]:
    """{(arm, seed): folder} of every finished arm and seed under `run_dir`, whatever the current plan says."""
    found = {}
    for done in sorted((Path(run_dir) / "arms").glob(f"*/seed*/{DONE}")):
        folder = done.parent
        suffix = folder.name.removeprefix("seed")
        if suffix.isdigit():
            found[(folder.parent.name, int(suffix))] = folder
    return found


__all__ = ["DONE", "EVAL_SLUG", "EVAL_STAGE", "WEIGHTS", "arm_folder", "cold_start_folder", "finished_arm_folders",
           "is_done", "mark_done", "read_done", "records_path", "trained_policy", "weights_sha256"]

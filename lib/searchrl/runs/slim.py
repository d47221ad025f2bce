"""A run folder's evidence without its weights: `python -m searchrl.slim RUN ... --to DIR`.

A run folder holds hundreds of megabytes of checkpoints beside a few hundred kilobytes of what a report needs: the
parameters, provenance, metrics history, evaluation JSON and per-question records. The slim copy keeps the second
part, in the same layout, so the tools that read run folders (`python -m searchrl.seeds`, the ablation tables and
verdicts, an ablation's resume, which skips arms marked done) work on it wherever it is copied: into git beside the
log, or off a machine that will not be kept.

Left out: `checkpoints/` (weights and trainer state), the executed notebook and figures (both are rebuilt from what
is kept), `retrieval/` (the record of the run's searches: a replay needs it whole, and the trajectories keep the
queries and document ids), the lock file, and the done marker of a part whose product was a model inside the run
(an ablation's shared cold start): its weights are not copied, so a resume makes it again where an unfinished arm needs it, and
checks it against the digest of the first one's weights, which is kept (`weights.json`). Kept but shortened: every
`.jsonl` record's long text fields (completions, retrieved documents), cut to `keep_chars` characters, enough to
read the plan a completion opened with.

`refresh_slim_copy` keeps such a copy up to date while a run goes on (the `evidence_copy_dir` setting).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from searchrl.config.replay import RECORD_FOLDER
from searchrl.core.disk import folder_size

# RECORD_FOLDER (retrieval/): the record of the run's searches, which replays only whole; cut, its documents would
# answer a replay with wrong texts
LEFT_OUT_DIRS = ("checkpoints", "figures", ".ipynb_checkpoints", RECORD_FOLDER)
LEFT_OUT_SUFFIXES = (".ipynb", ".lock",  # .lock: the owner's lock (searchrl.runs.ownership.LOCK_NAME)
                      ".png", ".html", ".pt", ".bin", ".safetensors")
TEXT_FIELDS = ("completion", "text", "retrieved_text", "prompt")


def _shorten(line: str, keep_chars: int) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return line  # a half-written last line is copied as it is
    if isinstance(record, dict):
        for key in TEXT_FIELDS:
            if isinstance(record.get(key), str) and len(record[key]) > keep_chars:
                record[key] = record[key][:keep_chars]
    return json.dumps(record, ensure_ascii=False)


def _kept(path: Path, run_dir: Path) -> bool:
    parts = path.relative_to(run_dir).parts
    return not any(p in LEFT_OUT_DIRS for p in parts[:-1]) and path.suffix not in LEFT_OUT_SUFFIXES


def _names_dropped_model(path: Path, run_dir: Path) -> bool:
    """A done marker whose "model" lies inside the run folder (so is not copied)."""
    if path.name != "done.json":
        return False
    try:
        model = (json.loads(path.read_text(encoding="utf-8")) or {}).get("model")
    except (json.JSONDecodeError, AttributeError):
        return False
    return bool(model) and Path(model).resolve().is_relative_to(run_dir.resolve())


def slim_copy(run_dir: str | Path, dest: str | Path, keep_chars: int = 60) -> Path:
    """Copy `run_dir`'s evidence (everything but weights, notebook and figures; long record texts cut to
    `keep_chars`) to `dest`, which must not exist yet. Returns `dest`."""
    run_dir, dest = Path(run_dir), Path(dest)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    if dest.exists():
        raise FileExistsError(f"{dest} exists; slim copies never overwrite (remove it or choose another --to)")
    for path in sorted(run_dir.rglob("*")):
        if not path.is_file() or not _kept(path, run_dir) or _names_dropped_model(path, run_dir):
            continue
        target = dest / path.relative_to(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".jsonl":
            lines = path.read_text(encoding="utf-8").splitlines()
            target.write_text("".join(_shorten(line, keep_chars) + "\n" for line in lines if line), encoding="utf-8")
        else:
            shutil.copy2(path, target)
    dest.mkdir(parents=True, exist_ok=True)  # an empty run still leaves its folder
    return dest


def refresh_slim_copy(run_dir: str | Path, to_dir: str | Path, keep_chars: int = 60) -> Path:
    """Make or replace `to_dir`/<notebook>/<run name> as a slim copy of `run_dir` (<output root>/<notebook>/<run
    name>: the same layout, so `--resume` takes the copy once it is put under an output root). The new copy is
    written beside the old one and swapped in by renames, so a crash midway leaves the previous copy (or the new
    one), never half of one."""
    run_dir = Path(run_dir).resolve()
    dest = Path(to_dir) / run_dir.parent.name / run_dir.name
    if dest.resolve() == run_dir.resolve():
        raise ValueError(f"the evidence copy of {run_dir} would replace the run folder itself; choose another folder")
    fresh, old = dest.with_name(dest.name + ".new"), dest.with_name(dest.name + ".old")
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    slim_copy(run_dir, fresh, keep_chars)
    if dest.exists():
        dest.rename(old)
    fresh.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def copy_evidence(run_dir: str | Path, copy_dir: str) -> Path | None:
    """The `evidence_copy_dir` setting's copy of `run_dir` (None when it is empty). A failed copy is reported and
    the run goes on: the copy is insurance, not part of the measurement."""
    if not copy_dir:
        return None
    from searchrl.runs.folder import resolve_output_root

    try:
        return refresh_slim_copy(run_dir, resolve_output_root(copy_dir))
    except (OSError, ValueError) as err:
        print(f"warning: could not refresh the evidence copy of {Path(run_dir).name} in {copy_dir}: {err}")
        return None


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m searchrl.slim", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--to", type=Path, required=True, help="folder to put each run's slim copy in (by its name)")
    parser.add_argument("--keep-chars", type=int, default=60, help="characters kept of each record's long texts")
    args = parser.parse_args(argv)
    for run in args.runs:
        dest = slim_copy(run, args.to / run.resolve().name, args.keep_chars)
        print(f"{dest}  {folder_size(dest) / 1024:.0f} KiB (from {folder_size(run) / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

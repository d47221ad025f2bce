"""Fetching catalogue entries (`searchrl data fetch NAME`) and what `searchrl data list` shows about each.

The downloads go through `searchrl.data.hub` (the one module that opens connections) into
<data>/<name>/raw/; `searchrl.data.prepare` then writes the layout the loaders read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from searchrl.data import hub
from searchrl.data.catalog import (
    CATALOG,
    FLASHRAG_SPLITS,
    DataEntry,
    data_dirs,
    entry,
    entry_files,
    flashrag_url,
    write_dir,
)

__all__ = ["EntryStatus", "download_flashrag", "fetch", "fetch_plan", "human_bytes", "status"]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


@dataclass(frozen=True)
class EntryStatus:
    entry: DataEntry
    files: dict[str, Path | None]

    @property
    def present(self) -> str:
        found = sum(p is not None for p in self.files.values())
        return "yes" if found == len(self.files) else "no" if not found else f"{found}/{len(self.files)}"

    @property
    def where(self) -> str:
        folders = sorted({str(_folder_of(p)) for p in self.files.values() if p is not None})
        return ", ".join(folders) or "-"

    @property
    def bytes_on_disk(self) -> int:
        return sum(p.stat().st_size for p in self.files.values() if p is not None)


def _folder_of(path: Path) -> Path:
    for d in data_dirs():
        if path.is_relative_to(d):
            return d
    return path.parent


def status(dirs: list[Path] | None = None) -> list[EntryStatus]:
    return [EntryStatus(e, entry_files(e.name, dirs)) for e in CATALOG.values()]


def fetch_plan(name: str) -> list[tuple[hub.Remote, Path, str]]:
    """(what the server says, where it goes, url) for each file of `name`; the server is asked for sizes only.
    Where it cannot say, the size is the catalogue's estimate split evenly (marked by sha256 None)."""
    e = entry(name)
    if not e.files:
        raise NotImplementedError(f"{name} cannot be fetched automatically: {e.manual or 'it is built by prepare'}")
    raw = write_dir() / name / "raw"
    plan = []
    for f in e.files:
        remote = hub.remote_size(f.url)
        plan.append((hub.Remote(f.size or remote.size, f.sha256 or remote.sha256), raw / f.path, f.url))
    return plan


def fetch(name: str, *, yes: bool = False, ask: Callable[[str], str] = input, say: Callable[[str], None] = print,
          ) -> list[Path]:
    """Download `name`'s files into <data>/<name>/raw/ after showing their sizes and asking (unless `yes`);
    resumes partial files and verifies each. Returns the files; [] when the answer was no."""
    plan = fetch_plan(name)
    free = _free_bytes(write_dir())
    total = sum(r.size or 0 for r, _, _ in plan)
    for remote, path, url in plan:
        done = path.exists() or path.with_name(path.name + ".partial").exists()
        say(f"  {human_bytes(remote.size):>9}  {path}{'  (partly there: resumes)' if done else ''}  <- {url}")
    say(f"{name}: {human_bytes(total)} to {write_dir() / name} ({human_bytes(free)} free there)")
    if not yes and ask("download? [y/N] ").strip().lower() not in ("y", "yes"):
        say("nothing downloaded")
        return []
    return [hub.download(url, path, size=r.size, sha256=r.sha256, desc=f"{name}/{path.name}")
            for r, path, url in plan]


def _free_bytes(folder: Path) -> int | None:
    import shutil

    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def download_flashrag(dataset: str, split: str, out_dir: str | Path) -> Path:
    """Download one FlashRAG dataset split to `out_dir/<dataset>/<split>.jsonl`; returns that path.

    Raises ValueError for a dataset or split the hub does not hold (before any network access) and
    hub.DownloadError, with what to do instead, when the download fails.
    """
    if dataset not in FLASHRAG_SPLITS:
        raise ValueError(f"unknown FlashRAG dataset {dataset!r}; choose from {', '.join(FLASHRAG_SPLITS)}")
    if split not in FLASHRAG_SPLITS[dataset]:
        raise ValueError(
            f"FlashRAG has no {split!r} split of {dataset}; it has {', '.join(FLASHRAG_SPLITS[dataset])}"
        )
    url = flashrag_url(dataset, split)
    out = Path(out_dir).expanduser() / dataset / f"{split}.jsonl"
    try:
        return hub.download(url, out)
    except hub.DownloadError as err:
        raise hub.DownloadError(f"could not download {dataset}/{split}: {err}. Without internet access, copy the "
                                f"jsonl file onto this machine and read it with searchrl.data.loaders.load_qa.") from err

"""Files written whole or not at all: text, JSON, JSONL and figures through a temporary file and a rename,
so a crash or a reader never sees half a file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is only needed by callers that save figures
    from matplotlib.figure import Figure


__all__ = ["atomic_write_text", "read_json", "save_figure", "write_json", "write_trajectories"]


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) at `path` through a temporary file in the same folder and a rename, so a reader, or a
    resume after a crash, sees the old file or the new one, never a truncated one; folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def _json_default(obj: Any) -> Any:
    """Make numpy/torch scalars and arrays, paths, sets and dataclasses JSON-serialisable."""
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, torch tensors
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON; convert it to numbers, strings, lists or dicts")


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON at ``path`` (folders created); numpy values and dataclasses are converted."""
    return atomic_write_text(path, json.dumps(obj, indent=2, default=_json_default, allow_nan=True) + "\n")


def write_trajectories(path: str | Path, records: Iterable[Mapping[str, Any]]) -> Path:
    """Write one JSON object per line (``.jsonl``) at ``path``; returns the path."""
    path = Path(path)
    if path.suffix != ".jsonl":
        path = path.with_name(path.name + ".jsonl")
    lines = [json.dumps(dict(r), default=_json_default, ensure_ascii=False) for r in records]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Save ``fig`` as PNG at ``path`` (``.png`` added when missing); the figure stays open for display."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        path = path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def read_json(path: str | Path) -> Any:
    """The parsed JSON file at ``path``, or None when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

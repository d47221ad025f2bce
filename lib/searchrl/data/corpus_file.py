"""A passage file read by byte offset: a corpus of any size that is never held as Python objects.

`CorpusFile(path)` opens a jsonl corpus in the layouts the papers' releases use:

- Search-R1's wiki-18 (``wiki-18.jsonl``): ``{"id": "0", "contents": "\\"Title\\"\\ntext"}``, the quoted title on the
  first line of ``contents``;
- FlashRAG's corpora: the same ``id`` / ``contents`` rows, or ``id`` / ``title`` / ``text`` fields,

and behaves as a read-only sequence of `Doc` (``len``, ``corpus[i]``, iteration), so code written for a list of
passages (BM25 over a small file, the protocols that render passages, recall metrics) takes it unchanged. Passage
``i`` is the file's ``i``-th non-blank line, which is also row ``i`` of an index built over it (Search-R1's
``e5_Flat.index`` holds wiki-18's vectors in line order). A record without an id gets its position from 1, as
`load_corpus` numbers the lines of a file without blank lines.

The first open scans the file once for its line starts (about 1 GB/s from a warm page cache) and keeps them as an
int64 array, 8 bytes per passage (168 MB for wiki-18), in a sidecar beside the file (``NAME.offsets.npy`` and
``NAME.offsets.json``) or, when that folder is not writable, in ``~/.cache/searchrl/corpora`` (``cache_dir=``
elsewhere). Later opens memory-map the array; a sidecar whose recorded file size or modification time differs
from the file's is rebuilt. `fingerprint` is a digest of the file's size, its offsets table and its first and
last MiB: cheap to compute (the table is hashed once, when it is built) and different for any edit that moves a
line; it does not read the whole file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from searchrl.core.progress import progress_bar
from searchrl.data.loaders import doc_from_record
from searchrl.data.schema import Doc

logger = logging.getLogger(__name__)

OFFSETS_FORMAT = 1  # bump when the sidecar's layout changes: older sidecars are then rebuilt
SCAN_BLOCK = 64 * 1024 * 1024  # bytes read per step while scanning for line starts
EDGE_BYTES = 1024 * 1024  # head and tail bytes hashed into the fingerprint
SIDE_SUFFIX = ".offsets"


def default_corpus_cache_dir() -> Path:
    """Where offset tables go when the corpus's own folder is not writable: $XDG_CACHE_HOME/searchrl/corpora
    (~/.cache/searchrl/corpora)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "searchrl" / "corpora"


def scan_line_offsets(path: Path, *, show_progress: bool = True) -> np.ndarray:
    """Byte offsets of the file's non-blank lines, plus one final entry (the file size): line ``i`` is the bytes
    from ``offsets[i]`` up to ``offsets[i + 1]`` (trailing blank lines included, which JSON parsing ignores)."""
    size = path.stat().st_size
    ends: list[np.ndarray] = []
    bar = progress_bar(total=size, desc=f"indexing the lines of {path.name}", unit="B", unit_scale=True,
                       disable=not show_progress or size < SCAN_BLOCK)
    with path.open("rb") as handle:
        position = 0
        while True:
            block = handle.read(SCAN_BLOCK)
            if not block:
                break
            newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10).astype(np.int64) + position
            ends.append(newlines)
            position += len(block)
            bar.update(len(block))
    bar.close()
    line_ends = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    if size and (not len(line_ends) or line_ends[-1] != size - 1):
        line_ends = np.append(line_ends, size)  # the last line has no newline
    line_starts = np.concatenate(([0], line_ends[:-1] + 1)).astype(np.int64) if len(line_ends) else line_ends
    lengths = line_ends - line_starts  # without the newline
    keep = lengths > 0
    if keep.any():
        short = np.flatnonzero(keep & (lengths == 1))  # a lone "\r" (a blank line of a Windows file) is blank too
        if len(short):
            with path.open("rb") as handle:
                for row in short:
                    handle.seek(int(line_starts[row]))
                    keep[row] = handle.read(1) not in (b"\r", b" ", b"\t")
    return np.concatenate((line_starts[keep], np.array([size], dtype=np.int64)))


def _sidecar_candidates(path: Path, cache_dir: Path | None) -> list[Path]:
    """Where the offsets sidecar of `path` may live (without its .npy/.json suffix), preferred first."""
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:16]
    cached = (cache_dir or default_corpus_cache_dir()) / f"{path.name}.{digest}{SIDE_SUFFIX}"
    return [cached] if cache_dir is not None else [path.with_name(path.name + SIDE_SUFFIX), cached]


def _file_state(path: Path) -> dict[str, int]:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _fingerprint(path: Path, offsets: np.ndarray) -> str:
    digest = hashlib.sha256()
    size = path.stat().st_size
    digest.update(size.to_bytes(8, "little"))
    digest.update(np.ascontiguousarray(offsets).tobytes())
    with path.open("rb") as handle:
        digest.update(handle.read(EDGE_BYTES))
        handle.seek(max(0, size - EDGE_BYTES))
        digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()[:16]


def _read_sidecar(base: Path, state: dict[str, int]) -> tuple[np.ndarray, dict] | None:
    meta_path, table_path = base.with_suffix(base.suffix + ".json"), base.with_suffix(base.suffix + ".npy")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != OFFSETS_FORMAT or meta.get("file") != state:
            return None
        offsets = np.load(table_path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, json.JSONDecodeError):
        return None
    if offsets.dtype != np.int64 or offsets.shape != (meta.get("passages", -1) + 1,):
        return None
    return offsets, meta


def _write_sidecar(base: Path, offsets: np.ndarray, meta: dict) -> bool:
    """Write the table then its metadata (last: a sidecar without it is incomplete); False when not writable."""
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        for suffix, write in ((".npy", lambda h: np.save(h, offsets, allow_pickle=False)),
                              (".json", lambda h: h.write(json.dumps(meta, indent=1).encode("utf-8")))):
            target = base.with_suffix(base.suffix + suffix)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as stream:
                    write(stream)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
    except OSError:
        return False
    return True


class CorpusFile(Sequence[Doc]):
    """A jsonl passage file as a read-only sequence of `Doc`, each passage read from disk by its byte offset.

    Args:
        path: the jsonl file (Search-R1's wiki-18 layout, or FlashRAG's id/contents or id/title/text rows).
        cache_dir: folder for the offsets sidecar; None: beside the file when writable, else
            `default_corpus_cache_dir()`.
        show_progress: progress bar while the line offsets are scanned (the first open of a big file).

    Attributes: `path`, `fingerprint` (see the module docstring), `offsets_path` (the sidecar's table, None when it
    could be written nowhere) and `offsets_rebuilt` (whether this open scanned the file).
    """

    def __init__(self, path: str | Path, *, cache_dir: str | Path | None = None, show_progress: bool = True) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise FileNotFoundError(f"no corpus file at {self.path} (a jsonl of passages: id and contents, or id, "
                                    "title and text)")
        state = _file_state(self.path)
        candidates = _sidecar_candidates(self.path, None if cache_dir is None else Path(cache_dir).expanduser())
        found = next(((base, hit) for base in candidates if (hit := _read_sidecar(base, state)) is not None), None)
        self.offsets_rebuilt = found is None
        self.offsets_path: Path | None = None
        if found is None:
            offsets = scan_line_offsets(self.path, show_progress=show_progress)
            meta = {"format": OFFSETS_FORMAT, "file": state, "passages": len(offsets) - 1,
                    "fingerprint": _fingerprint(self.path, offsets)}
            for base in candidates:
                if _write_sidecar(base, offsets, meta):
                    self.offsets_path = base.with_suffix(base.suffix + ".npy")
                    break
            else:
                logger.warning("could not write the line offsets of %s anywhere (tried %s); the next open scans "
                               "the file again", self.path, ", ".join(str(c.parent) for c in candidates))
        else:
            base, (offsets, meta) = found
            self.offsets_path = base.with_suffix(base.suffix + ".npy")
        if len(offsets) < 2:
            raise ValueError(f"{self.path}: the corpus holds no passages")
        self._offsets = offsets
        self.fingerprint: str = meta["fingerprint"]
        self._fd = os.open(self.path, os.O_RDONLY)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, position: int) -> Doc: ...

    @overload
    def __getitem__(self, position: slice) -> list[Doc]: ...

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"corpus positions are integers, got {type(position).__name__}")
        size = len(self)
        index = int(position) + size if position < 0 else int(position)
        if not 0 <= index < size:
            raise IndexError(f"passage {position} is outside the corpus ({size} passages)")
        start, end = int(self._offsets[index]), int(self._offsets[index + 1])
        raw = os.pread(self._fd, end - start, start)  # pread: safe from several threads at once
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{self.path}, passage {index} (byte {start}): not one JSON object ({error}); was the "
                             "file changed while it was open?") from None
        if not isinstance(record, dict):
            raise ValueError(  # noqa: TRY004 - bad file content: callers catch ValueError for every kind of it
                f"{self.path}, passage {index} (byte {start}): a passage is a JSON object")
        return doc_from_record(record, self.path, index + 1)

    def __iter__(self) -> Iterator[Doc]:
        for position in range(len(self)):
            yield self[position]

    def __repr__(self) -> str:
        return f"CorpusFile({str(self.path)!r}, {len(self)} passages)"

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def __reduce__(self):  # pickled by path (worker processes reopen it; the sidecar makes that cheap)
        return type(self), (str(self.path),), None


def is_corpus_file(corpus: Sequence[Doc]) -> bool:
    """Whether `corpus` is read from disk by offset (and must not be copied into a list)."""
    return isinstance(corpus, CorpusFile)


__all__ = ["CorpusFile", "default_corpus_cache_dir", "is_corpus_file", "scan_line_offsets"]

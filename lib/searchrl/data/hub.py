"""The one module that talks to the network: resumable, verified downloads of single files over HTTP(S).

`download(url, dest)` writes to `dest.partial` and asks the server for the bytes it lacks (an HTTP Range request),
so an interrupted download continues where it stopped; when complete, the file is checked (its size, and its
sha256 when one is known: given, or the sha256 the Hugging Face hub reports as the etag of a large file) and only
then renamed to `dest`. A file that fails the check is kept as `dest.corrupt` and `VerificationError` says what
differed. `remote_size(url)` asks for the size without downloading. Tests run it against a local server.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from searchrl.core.progress import progress_bar

__all__ = ["DownloadError", "Remote", "VerificationError", "download", "remote_size", "sha256_of"]

_CHUNK = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
TIMEOUT_S = 60


class DownloadError(RuntimeError):
    """The server could not be reached or refused the file."""


class VerificationError(RuntimeError):
    """A downloaded file is not the file expected (size or sha256)."""


@dataclass(frozen=True)
class Remote:
    """What the server says about a file before its bytes: size and, where the hub gives one, its sha256."""

    size: int | None
    sha256: str | None


def _request(url: str, method: str = "GET", start: int = 0) -> urllib.request.Request:
    headers = {"User-Agent": "searchrl-data"}
    if start:
        headers["Range"] = f"bytes={start}-"
    return urllib.request.Request(url, method=method, headers=headers)


def _etag_sha256(headers) -> str | None:
    for key in ("X-Linked-ETag", "ETag"):  # the hub's etag of an LFS file is its sha256
        value = (headers.get(key) or "").strip().strip('"').removeprefix("W/").strip('"')
        if _SHA256.match(value):
            return value
    return None


def remote_size(url: str) -> Remote:
    """The file's size (Content-Length, or X-Linked-Size on the hub) and sha256 etag, from a HEAD request."""
    try:
        with urllib.request.urlopen(_request(url, "HEAD"), timeout=TIMEOUT_S) as response:
            headers = response.headers
    except (urllib.error.URLError, OSError) as err:
        raise DownloadError(f"could not reach {url}: {err}") from err
    size = headers.get("X-Linked-Size") or headers.get("Content-Length")
    return Remote(int(size) if size else None, _etag_sha256(headers))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, dest: str | Path, *, size: int | None = None, sha256: str | None = None,
             desc: str | None = None) -> Path:
    """Download `url` to `dest`, resuming `dest.partial` when present, and verify it; returns `dest`.

    `size` / `sha256`: what to check; None takes the server's Content-Length and sha256 etag (when it has one).
    A `dest` that already exists is verified and kept. Raises DownloadError (network, HTTP status) and
    VerificationError (wrong size or digest, the file kept as `dest.corrupt`).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        return _verify(dest, dest, size, sha256, url)
    partial = dest.with_name(dest.name + ".partial")
    start = partial.stat().st_size if partial.exists() else 0
    try:
        response = urllib.request.urlopen(_request(url, start=start), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and start:  # the partial file is already whole
            return _verify(partial, dest, size, sha256, url)
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, OSError) as err:
        raise DownloadError(f"could not reach {url}: {err}") from err
    with response:
        resumed = start and response.status == 206
        if start and not resumed:  # the server ignored the Range: start over
            start = 0
        length = response.headers.get("Content-Length")
        total = start + int(length) if length else size
        size = size if size is not None else total
        sha256 = sha256 or _etag_sha256(response.headers)
        with partial.open("ab" if resumed else "wb") as out, progress_bar(
                total=total, initial=start, unit="B", unit_scale=True, desc=desc or dest.name) as bar:
            reason = "the connection closed early"
            try:
                while block := response.read(_CHUNK):
                    out.write(block)
                    bar.update(len(block))
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                reason = str(err) or type(err).__name__
            if total is not None and out.tell() < total:
                raise DownloadError(f"{url}: the download stopped at {out.tell():,} of {total:,} bytes ({reason}); "
                                    f"run the same command again to resume")
    return _verify(partial, dest, size, sha256, url)


def _verify(path: Path, dest: Path, size: int | None, sha256: str | None, url: str) -> Path:
    actual = path.stat().st_size
    problem = None
    if size is not None and actual != size:
        problem = f"{actual:,} bytes where {size:,} were expected"
    elif sha256 is not None and (digest := sha256_of(path)) != sha256:
        problem = f"sha256 {digest} where {sha256} was expected"
    if problem:
        corrupt = dest.with_name(dest.name + ".corrupt")
        path.replace(corrupt)
        raise VerificationError(f"{dest.name} from {url} failed verification: {problem}; kept as {corrupt} "
                                f"(delete it and fetch again)")
    if path != dest:
        path.replace(dest)
    return dest

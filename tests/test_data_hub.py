"""The hub module against a stub hub on loopback: sizes before downloading, an interrupted download that resumes
with an HTTP Range request, a corrupt file that fails verification, and `searchrl data fetch` end to end. Nothing
here leaves this machine."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from searchrl.data import catalog, fetch, hub
from searchrl.data.catalog import DataEntry, RemoteFile

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class StubHub(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD at /file (sha256 etag, as the Hugging Face hub gives for large files), honours Range; with
    `cut_after` set, the first full response stops after that many bytes (a dropped connection). /corrupt serves
    bytes that differ from its etag."""

    cut_after: ClassVar[int | None] = None
    ranges: ClassVar[list[str]] = []

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> tuple[bytes, str]:
        if self.path == "/corrupt":
            return PAYLOAD[:-1] + b"X", SHA
        return PAYLOAD, SHA

    def do_HEAD(self):
        body, sha = self._body()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{sha}"')
        self.end_headers()

    def do_GET(self):
        body, sha = self._body()
        start = 0
        if "Range" in self.headers:
            type(self).ranges.append(self.headers["Range"])
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("ETag", f'"{sha}"')
        self.end_headers()
        chunk = body[start:]
        if type(self).cut_after is not None and not start:
            self.wfile.write(chunk[: type(self).cut_after])
            type(self).cut_after = None
            self.wfile.flush()
            self.connection.close()  # the rest never comes
            return
        self.wfile.write(chunk)


@pytest.fixture
def stub():
    StubHub.cut_after, StubHub.ranges = None, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_size_reads_the_size_and_the_sha256_etag(stub):
    assert hub.remote_size(f"{stub}/file") == hub.Remote(len(PAYLOAD), SHA)


def test_an_interrupted_download_resumes_where_it_stopped(stub, tmp_path):
    StubHub.cut_after = 300_000
    dest = tmp_path / "f.bin"
    with pytest.raises(hub.DownloadError, match="run the same command again to resume"):
        hub.download(f"{stub}/file", dest)
    partial = tmp_path / "f.bin.partial"
    assert partial.stat().st_size == 300_000 and not dest.exists()
    assert hub.download(f"{stub}/file", dest) == dest
    assert StubHub.ranges == ["bytes=300000-"]  # only the missing bytes were asked for
    assert dest.read_bytes() == PAYLOAD and not partial.exists()


def test_a_corrupt_download_fails_verification_with_what_differed(stub, tmp_path):
    dest = tmp_path / "c.bin"
    with pytest.raises(hub.VerificationError, match=rf"c.bin from .* failed verification: sha256 \w+ where {SHA} "
                                                    r"was expected; kept as .*c.bin.corrupt"):
        hub.download(f"{stub}/corrupt", dest)
    assert not dest.exists() and (tmp_path / "c.bin.corrupt").exists()
    with pytest.raises(hub.VerificationError, match="bytes where 5 were expected"):
        hub.download(f"{stub}/file", tmp_path / "s.bin", size=5)


def test_an_unreachable_hub_says_so(tmp_path):
    with pytest.raises(hub.DownloadError, match="could not reach"):
        hub.download("http://127.0.0.1:9/none", tmp_path / "x")  # port 9 (discard) on loopback: refused


def test_data_fetch_shows_sizes_asks_then_downloads_and_verifies(stub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(catalog.DATA_ENV_VAR, str(tmp_path))
    fake = DataEntry(name="r1searcher-stage1", kind="questions", description="d", source="s", licence="l",
                     approx_bytes=1, layout={"train": ("r1searcher-stage1/train.jsonl",)},
                     files=(RemoteFile(f"{stub}/file", "train.jsonl"),), prepare="move")
    monkeypatch.setitem(catalog.CATALOG, fake.name, fake)
    said: list[str] = []
    assert fetch.fetch(fake.name, ask=lambda _: "n", say=said.append) == []
    assert "1.0 MB" in said[0] and "nothing downloaded" in said[-1]
    assert not (tmp_path / fake.name / "raw" / "train.jsonl").exists()
    (path,) = fetch.fetch(fake.name, yes=True, say=said.append)
    assert path == tmp_path / fake.name / "raw" / "train.jsonl" and path.read_bytes() == PAYLOAD


def test_data_fetch_of_an_entry_without_a_url_says_how_to_get_it(capsys):
    from searchrl.cli import main

    assert main(["data", "fetch", "ircot-2wiki", "--yes"]) == 1
    assert "cannot be fetched automatically: run StonyBrookNLP/ircot's" in capsys.readouterr().err
    assert main(["data", "fetch", "wiki18"]) == 1
    assert "did you mean 'wiki-18'?" in capsys.readouterr().err


def test_download_flashrag_rejects_unknown_names_before_any_network(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "download", lambda *a, **k: pytest.fail("network"))
    with pytest.raises(ValueError, match="unknown FlashRAG dataset 'hotpot'.*2wikimultihopqa"):
        fetch.download_flashrag("hotpot", "dev", tmp_path)
    with pytest.raises(ValueError, match="no 'test' split of hotpotqa; it has train, dev"):
        fetch.download_flashrag("hotpotqa", "test", tmp_path)


def test_download_flashrag_failure_says_what_to_do(tmp_path, monkeypatch):
    def refuse(url, dest, **_):
        assert url.endswith("/RUC-NLPIR/FlashRAG_datasets/resolve/main/nq/test.jsonl") and Path(dest).name == "test.jsonl"
        raise hub.DownloadError("could not reach the hub")

    monkeypatch.setattr(hub, "download", refuse)
    with pytest.raises(hub.DownloadError, match="could not download nq/test.*load_qa"):
        fetch.download_flashrag("nq", "test", tmp_path)

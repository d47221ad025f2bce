"""Encode a large passage file into a flat faiss index, in chunks that survive a kill.

    searchrl index --corpus /data/wiki-18.jsonl --retriever-model intfloat/e5-base-v2 --out /data/e5_Flat.index
    python -m searchrl.retrieval.index_build ...        (the same)

The corpus is opened as a `searchrl.data.corpus_file.CorpusFile` (read by offset, never held whole) and encoded
``chunk_size`` passages at a time with the encoder's conventions (`searchrl.retrieval.encoders`: E5's "passage: "
prefix, the family's pooling, unit vectors), under a progress bar. Each finished chunk is written to
``OUT.parts/chunk-NNNNN.npy`` (temporary file, then rename), so a build that is killed resumes, when started again
with the same command, from the first missing chunk; ``OUT.parts/plan.json`` names the corpus, the encoder and the
chunk size, and a restart that differs in any of them is refused rather than mixing vectors. When every chunk is
there, the chunks are added to an exact inner-product index (IndexFlatIP, the kind Search-R1 ships), written to
``OUT`` with its record ``OUT.searchrl.json`` (`searchrl.retrieval.prebuilt`), and the parts are deleted
(``--keep-parts`` keeps them).

A run then searches it with ``retriever: dense``, ``corpus: CORPUS``, ``retriever_index: OUT`` and the same
``retriever_model``. Assembling the index holds it in memory once (4 x dimension bytes per passage: 64.5 GB for
wiki-18 at 768 dimensions); the encoding before it holds one chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from searchrl.core.progress import progress_bar
from searchrl.data.corpus_file import CorpusFile
from searchrl.data.schema import Doc
from searchrl.retrieval import dense  # its encoder helpers are looked up at call time (tests replace them)
from searchrl.retrieval.encoders import conventions_for
from searchrl.retrieval.prebuilt import index_record, record_path, write_index_record
from searchrl.retrieval.service import corpus_fingerprint

DEFAULT_CHUNK = 100_000  # passages per chunk: 307 MB of 768-dim vectors; minutes of GPU encoding lost at most
PLAN_NAME = "plan.json"


def parts_dir(out: str | Path) -> Path:
    """The folder of finished chunks beside the index file being built."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _chunk_path(parts: Path, number: int) -> Path:
    return parts / f"chunk-{number:05d}.npy"


def _save_atomic(path: Path, vectors: np.ndarray) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            np.save(stream, vectors, allow_pickle=False)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _finished(path: Path, rows: int, dimension: int) -> bool:
    """Whether `path` holds a whole chunk (a torn or foreign file is encoded again)."""
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return False
    return vectors.dtype == np.float32 and vectors.shape == (rows, dimension)


def _check_plan(parts: Path, plan: dict) -> None:
    path = parts / PLAN_NAME
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        if before != plan:
            changed = sorted(k for k in set(plan) | set(before) if plan.get(k) != before.get(k))
            raise ValueError(f"{parts} holds chunks of another build (it differs in {', '.join(changed)}): rerun "
                             f"with the same corpus, encoder and chunk size to resume it, or delete {parts} to start "
                             "over")
        return
    parts.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")


def build_index_file(corpus: str | Path | Sequence[Doc], out: str | Path, *, model_name_or_path: str | None = None,
                     chunk_size: int = DEFAULT_CHUNK, batch_size: int = 64, device: str | None = None,
                     normalize: bool | None = None, keep_parts: bool = False, show_progress: bool = True) -> Path:
    """Encode `corpus` (a passage file, or any sequence of Doc) into a flat faiss index at `out`, resumably (see the
    module docstring). Returns `out`."""
    if chunk_size < 1 or batch_size < 1:
        raise ValueError(f"chunk_size and batch_size must be at least 1, got {chunk_size} and {batch_size}")
    passages = CorpusFile(corpus, show_progress=show_progress) if isinstance(corpus, (str, Path)) else corpus
    if len(passages) == 0:
        raise ValueError("the corpus holds no passages")
    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    model = None if model_name_or_path in (None, "") else str(model_name_or_path)
    conventions = conventions_for(model)
    normalize = conventions.normalize if normalize is None else bool(normalize)
    faiss = dense._import_faiss()
    encoder = dense._load_encoder(model, device)
    dense._apply_pooling(encoder, conventions.pooling)
    dimension = dense._embedding_size(encoder)
    record = index_record(encoder=dense.encoder_name(model), conventions=conventions, normalize=normalize,
                          dimension=dimension, count=len(passages), corpus_fp=corpus_fingerprint(passages))
    parts = parts_dir(out)
    _check_plan(parts, {**record, "chunk_size": chunk_size})
    bounds = [(start, min(start + chunk_size, len(passages))) for start in range(0, len(passages), chunk_size)]
    done = [_finished(_chunk_path(parts, n), stop - start, dimension) for n, (start, stop) in enumerate(bounds)]
    already = sum(stop - start for (start, stop), finished in zip(bounds, done) if finished)
    bar = progress_bar(total=len(passages), initial=already, desc=f"encoding {len(passages)} passages",
                       unit="passage", disable=not show_progress)
    try:
        for number, ((start, stop), finished) in enumerate(zip(bounds, done)):
            if finished:
                continue
            texts = [passages[i].as_text() for i in range(start, stop)]
            vectors = dense.encode_texts(encoder, texts, "passage", conventions, batch_size=batch_size,
                                         normalize=normalize)
            _save_atomic(_chunk_path(parts, number), vectors)
            bar.update(stop - start)
    finally:
        bar.close()
    index = faiss.IndexFlatIP(dimension)
    for number in progress_bar(range(len(bounds)), desc="assembling the index", unit="chunk",
                               disable=not show_progress or len(bounds) < 2):
        index.add(np.ascontiguousarray(np.load(_chunk_path(parts, number), allow_pickle=False)))
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=out.name + ".", suffix=".tmp")
    os.close(handle)
    try:
        faiss.write_index(index, temporary)
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    write_index_record(out, record)
    if not keep_parts:
        shutil.rmtree(parts)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="searchrl index",
        description="Encode a jsonl passage file into a flat faiss index, in chunks that resume after a kill.")
    parser.add_argument("--corpus", required=True, help="jsonl passages (Search-R1's wiki-18 layout, or FlashRAG's)")
    parser.add_argument("--out", required=True, help="the index file to write (e.g. e5_Flat.index)")
    parser.add_argument("--retriever-model", default="",
                        help="the encoder (as retriever_model, e.g. intfloat/e5-base-v2); default: the bundled "
                             "all-MiniLM-L6-v2")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK, help="passages per resumable chunk")
    parser.add_argument("--batch-size", type=int, default=64, help="encoding batch size")
    parser.add_argument("--device", default=None, help="encoder device (cpu, cuda); default: as the encoder picks")
    parser.add_argument("--keep-parts", action="store_true", help="keep the chunk files after the index is written")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    out = build_index_file(args.corpus, args.out, model_name_or_path=args.retriever_model or None,
                           chunk_size=args.chunk_size, batch_size=args.batch_size, device=args.device,
                           keep_parts=args.keep_parts)
    print(f"wrote {out} and {record_path(out).name}; search it with retriever: dense, corpus: {args.corpus}, "
          f"retriever_index: {out}" + (f", retriever_model: {args.retriever_model}" if args.retriever_model else ""))


if __name__ == "__main__":
    main()


__all__ = ["DEFAULT_CHUNK", "build_index_file", "main", "parts_dir"]

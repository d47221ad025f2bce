"""Prebuilt dense indexes: a faiss index file searched in place over a passage file, checked before it is trusted.

A run points at one with ``retriever: dense``, ``corpus: /data/wiki-18.jsonl``, ``retriever_index:
/data/e5_Flat.index`` and ``retriever_model: intfloat/e5-base-v2`` (Search-R1's release: an exact inner-product
index of e5-base-v2 passage vectors, row ``i`` being line ``i`` of the corpus). The corpus is opened as a
`searchrl.data.corpus_file.CorpusFile` (passages read by offset) and the index is memory-mapped where faiss
supports it (`read_index`): opening costs seconds, not the minutes and the resident copy a full read of 64 GB takes;
the pages a search touches come from the page cache, which the kernel may drop and reread under pressure.

Before any search the index is refused, with what to do, when

- its vectors' dimension differs from the encoder's;
- its row count differs from the corpus's passage count;
- its record says it was built with another encoder, other conventions (prefixes, pooling, normalisation) or
  another corpus.

`DenseRetriever(corpus, index_file=...)` opens one (`make_retriever` passes `retriever_index` on as `index_file`).
The record is a small JSON sidecar, ``INDEX.searchrl.json``, that `searchrl.retrieval.index_build` writes beside
every index it builds (encoder, conventions, normalisation, dimension, count, corpus fingerprint). An index without
one (Search-R1's own) is checked for dimension and count only, and a warning says the encoder cannot be verified.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchrl.data.schema import Doc
from searchrl.retrieval.encoders import EncoderConventions

RECORD_SUFFIX = ".searchrl.json"
RECORD_FORMAT = 1


class IndexMismatch(ValueError):
    """A prebuilt index that does not fit the encoder or the corpus it is used with."""


def record_path(index_file: str | Path) -> Path:
    """Where the record of `index_file` lives: beside it, ``NAME.searchrl.json``."""
    index_file = Path(index_file)
    return index_file.with_name(index_file.name + RECORD_SUFFIX)


def index_record(*, encoder: str, conventions: EncoderConventions, normalize: bool, dimension: int, count: int,
                 corpus_fp: str, kind: str = "flat") -> dict[str, Any]:
    """What an index's record holds; `encoder` is the encoder's name (`searchrl.retrieval.dense.encoder_name`)."""
    return {"format": RECORD_FORMAT, "encoder": encoder,
            "conventions": conventions.to_dict(), "normalize": bool(normalize), "dimension": int(dimension),
            "count": int(count), "corpus_fingerprint": corpus_fp, "kind": kind}


def write_index_record(index_file: str | Path, record: dict[str, Any]) -> Path:
    path = record_path(index_file)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def read_index_record(index_file: str | Path) -> dict[str, Any] | None:
    """The record beside `index_file`, or None when it has none; a record that cannot be read raises."""
    path = record_path(index_file)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise IndexMismatch(f"{path} cannot be read ({error}); delete it to use the index unverified, or rebuild "
                            "the index with python -m searchrl.retrieval.index_build") from None
    if not isinstance(record, dict) or record.get("format", 0) > RECORD_FORMAT:
        raise IndexMismatch(f"{path} is not an index record this searchrl reads (written by a newer version?)")
    return record


def read_index(faiss, index_file: Path) -> tuple[Any, str]:
    """The faiss index in `index_file` and how it was opened: "mmap" (the vectors stay in the file and are paged in
    as searches touch them) or "read" (copied into memory) with the reason when mapping was not possible.

    IO_FLAG_MMAP_IFC is tried first (faiss-cpu 1.15.1 maps the storage of flat, HNSW and IVF indexes with it; flat
    is the kind Search-R1 ships), then IO_FLAG_MMAP (IVF inverted lists only); an index neither maps, or a faiss
    without these flags, is read whole."""
    flags = [(name, getattr(faiss, name)) for name in ("IO_FLAG_MMAP_IFC", "IO_FLAG_MMAP") if hasattr(faiss, name)]
    reasons = []
    for name, flag in flags:
        try:
            index = faiss.read_index(str(index_file), flag)
        except RuntimeError as error:
            reasons.append(f"{name}: {str(error).splitlines()[0][:120]}")
            continue
        if name == "IO_FLAG_MMAP" and faiss.try_extract_index_ivf(index) is None:
            # this flag maps only inverted lists: anything else has just been read whole
            return index, "read (faiss maps only flat-code and IVF indexes)"
        return index, "mmap"
    index = faiss.read_index(str(index_file))
    return index, "read (" + ("; ".join(reasons) or "this faiss has no memory-mapping flags") + ")"


def index_kind_of(faiss, index) -> str:
    """The project's name for the kind of a faiss index read from a file (flat, hnsw, ivf, ivf-pq)."""
    if faiss.try_extract_index_ivf(index) is not None:
        return "ivf-pq" if "PQ" in type(faiss.extract_index_ivf(index)).__name__ else "ivf"
    return "hnsw" if hasattr(index, "hnsw") else "flat"


def _same_encoder(recorded: str, wanted: str) -> bool:
    """Whether two encoder names are the same model: equal, or the same last path component (a hub id and a local
    copy in a folder of that name), case aside."""
    def last(name: str) -> str:
        return name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()

    return recorded == wanted or last(recorded) == last(wanted)


def check_index(index, record: dict[str, Any] | None, *, index_file: Path, corpus: Sequence[Doc], corpus_fp: str,
                dimension: int, encoder: str, conventions: EncoderConventions, normalize: bool) -> None:
    """Raise IndexMismatch, saying what to do, when the index does not fit the encoder (named `encoder`, with its
    `conventions`, making `dimension`-dimensional vectors) or the corpus."""
    wanted = encoder
    rebuild = (f"or build an index for this encoder and corpus: python -m searchrl.retrieval.index_build "
               f"--corpus CORPUS --retriever-model {wanted} --out INDEX")
    if record is not None:
        recorded = str(record.get("encoder", ""))
        if not _same_encoder(recorded, wanted):
            raise IndexMismatch(f"{index_file} was built with the encoder {recorded!r} but retriever_model is "
                                f"{wanted!r}: set retriever_model: {recorded}, {rebuild}")
        saved = record.get("conventions")
        if saved is not None and saved != conventions.to_dict():
            raise IndexMismatch(f"{index_file} was built with the conventions {saved} but {wanted!r} is encoded "
                                f"with {conventions.to_dict()} (searchrl.retrieval.encoders): queries would not match "
                                f"its passages; {rebuild}")
        if "normalize" in record and bool(record["normalize"]) != bool(normalize):
            raise IndexMismatch(f"{index_file} holds {'unit' if record['normalize'] else 'unnormalised'} vectors but "
                                f"the queries would be {'unit' if normalize else 'unnormalised'}; set normalize="
                                f"{bool(record['normalize'])}, {rebuild}")
    if index.d != dimension:
        raise IndexMismatch(f"{index_file} holds {index.d}-dimensional vectors but the encoder {wanted!r} makes "
                            f"{dimension}-dimensional ones: set retriever_model to the encoder the index was built "
                            f"with (Search-R1's e5_Flat.index: intfloat/e5-base-v2, 768), {rebuild}")
    if index.ntotal != len(corpus):
        raise IndexMismatch(f"{index_file} holds {index.ntotal} vectors but the corpus has {len(corpus)} passages: "
                            "point corpus at the passage file the index was built over (row i of the index is its "
                            f"passage i), {rebuild}")
    if record is not None and record.get("corpus_fingerprint") not in (None, corpus_fp):
        raise IndexMismatch(f"{index_file} was built over a corpus with fingerprint {record['corpus_fingerprint']} "
                            f"but this corpus's is {corpus_fp} (same size, other passages or order): point corpus "
                            f"at the file the index was built over, {rebuild}")


__all__ = ["RECORD_SUFFIX", "IndexMismatch", "check_index", "index_kind_of", "index_record", "read_index",
           "read_index_record", "record_path", "write_index_record"]

"""Prebuilt faiss indexes over passage files: Search-R1's and FlashRAG's layouts read by offset, the index searched
in place, every mismatch refused with what to do, and the chunked index build resumed after a kill.

A bag-of-words stand-in replaces sentence-transformers (tests/fakes.py); nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import faiss
import numpy as np
import pytest

import searchrl.retrieval.dense as dense_module
from fakes import BagOfWordsEncoder
from searchrl.config import RunConfig
from searchrl.data.corpus_file import CorpusFile
from searchrl.data.schema import Doc
from searchrl.retrieval import make_retriever
from searchrl.retrieval.index_build import build_index_file, parts_dir
from searchrl.retrieval.prebuilt import IndexMismatch, read_index_record, record_path
from searchrl.retrieval.service import corpus_fingerprint, service_options

SIZE = 384
E5 = "intfloat/e5-base-v2"
PASSAGES = [
    ("Velmora", "Velmora is a harbour city founded by fishermen."),
    ("Ostrand River", "The Ostrand River flows west into the Grey Sea."),
    ("Pellinor Bridge", "A stone bridge with nine arches over the Ostrand."),
    ("Quillon Observatory", "A telescope that maps comets and planets."),
    ("Ember Festival", "Bonfires, drums and lantern parades at harvest."),
    ("Tarn Academy", "A school of cartographers high in the mountains."),
    ("Saltmarsh Mill", "A tide mill grinding grain beside the estuary."),
]


@pytest.fixture
def encoders(monkeypatch):
    """Each load gets a fresh encoder of `sizes[model]` dimensions (SIZE by default); `made` lists (model, encoder)."""
    made: list[tuple[str | None, BagOfWordsEncoder]] = []
    sizes: dict[str, int] = {}

    def load(model_name_or_path, device):
        made.append((model_name_or_path, BagOfWordsEncoder(sizes.get(model_name_or_path, SIZE))))
        return made[-1][1]

    monkeypatch.setattr(dense_module, "_load_encoder", load)
    return SimpleNamespace(made=made, sizes=sizes)


def write_search_r1_corpus(path, passages=PASSAGES):
    """wiki-18's layout: {"id", "contents"} with the quoted title on the first line of contents."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"id": str(number), "contents": f'"{title}"\n{text}'}) + "\n" for number, (title, text) in enumerate(passages))
    return path


def write_foreign_index(path, passages=PASSAGES, size=SIZE):
    """An IndexFlatIP as another tool writes it: unit passage vectors in line order, and no record beside it."""
    vectors = BagOfWordsEncoder(size).encode([f"passage: {title}\n{text}" for title, text in passages], batch_size=8,
                                             show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True)
    index = faiss.IndexFlatIP(size)
    index.add(vectors)
    faiss.write_index(index, str(path))
    return path


def write_questions(path):
    rows = [{"id": str(i), "question": f"where is {title}?", "golden_answers": [title]}
            for i, (title, _) in enumerate(PASSAGES)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def ids(results):
    return [[doc.id for doc in docs] for docs in results]


def test_search_r1_release_loads_from_the_settings_a_user_writes(encoders, tmp_path):
    corpus = write_search_r1_corpus(tmp_path / "wiki-18.jsonl")
    index = write_foreign_index(tmp_path / "e5_Flat.index")
    cfg = RunConfig(retriever="dense", dataset=str(write_questions(tmp_path / "qa.jsonl")), corpus=str(corpus),
                    retriever_index=str(index), retriever_model=E5, n_train=2, n_eval=2)
    from searchrl.experiments.experiment_data import ExperimentData

    passages, _, _ = ExperimentData._load_data(SimpleNamespace(cfg=cfg))  # the run's own corpus loading
    assert isinstance(passages, CorpusFile) and len(passages) == len(PASSAGES)
    with pytest.warns(UserWarning, match="cannot be verified"):
        retriever = make_retriever(cfg.retriever, passages, **service_options(cfg))
    assert retriever.corpus is passages and retriever.index_opened == "mmap" and retriever.index_kind == "flat"
    results = retriever.search(["harbour city fishermen", "telescope comets planets", "tide mill estuary"], k=2)
    assert [docs[0] for docs in results] == [Doc("0", "Velmora", PASSAGES[0][1]),
                                             Doc("3", "Quillon Observatory", PASSAGES[3][1]),
                                             Doc("6", "Saltmarsh Mill", PASSAGES[6][1])]
    assert encoders.made[-1][1].encoded == ["query: harbour city fishermen", "query: telescope comets planets",
                                            "query: tide mill estuary"]  # E5's query prefix; no passage encoded
    with pytest.raises(ValueError, match="in place"):
        retriever.save(tmp_path / "copy")


def test_flashrag_layouts_split_title_and_text(tmp_path):
    path = tmp_path / "flashrag.jsonl"
    rows = [{"id": "a", "title": "Velmora", "text": "A harbour city."}, {"id": "b", "contents": '"Ostrand"\nA river.'},
            {"id": "c", "contents": "no title here"}]
    path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\r\n" + json.dumps(rows[2]), encoding="utf-8")
    corpus = CorpusFile(path)
    assert list(corpus) == [Doc("a", "Velmora", "A harbour city."), Doc("b", "Ostrand", "A river."),
                            Doc("c", "", "no title here")]
    assert corpus[-1].id == "c" and [d.id for d in corpus[1:]] == ["b", "c"]
    with pytest.raises(IndexError, match="3 passages"):
        corpus[3]


def test_offsets_are_cached_and_rebuilt_when_the_file_changes(tmp_path):
    path = write_search_r1_corpus(tmp_path / "wiki.jsonl")
    first = CorpusFile(path)
    assert first.offsets_rebuilt and first.offsets_path.is_file()
    again = CorpusFile(path)
    assert not again.offsets_rebuilt and again.fingerprint == first.fingerprint
    assert corpus_fingerprint(again) == first.fingerprint  # the service names it without reading it through
    write_search_r1_corpus(path, PASSAGES[:3] + [("Velmora", "Rewritten: a harbour town.")] + PASSAGES[4:])
    os.utime(path, ns=(first.path.stat().st_atime_ns, first.path.stat().st_mtime_ns + 10**9))
    changed = CorpusFile(path)
    assert changed.offsets_rebuilt and changed.fingerprint != first.fingerprint
    assert changed[3] == Doc("3", "Velmora", "Rewritten: a harbour town.")
    elsewhere = CorpusFile(path, cache_dir=tmp_path / "cache")  # an unwritable corpus folder's fallback
    assert elsewhere.offsets_path.parent == tmp_path / "cache" and elsewhere.fingerprint == changed.fingerprint


def test_an_index_of_another_dimension_is_refused(encoders, tmp_path):
    corpus = CorpusFile(write_search_r1_corpus(tmp_path / "wiki.jsonl"))
    index = write_foreign_index(tmp_path / "e5_Flat.index", size=SIZE * 2)
    with pytest.raises(IndexMismatch, match=f"holds {SIZE * 2}-dimensional vectors but the encoder .* makes {SIZE}"):
        make_retriever("dense", corpus, index_file=index, model_name_or_path=E5)


def test_an_index_of_another_size_is_refused(encoders, tmp_path):
    corpus = CorpusFile(write_search_r1_corpus(tmp_path / "wiki.jsonl", PASSAGES[:-1]))
    index = write_foreign_index(tmp_path / "e5_Flat.index")
    with pytest.raises(IndexMismatch, match=f"holds {len(PASSAGES)} vectors but the corpus has {len(PASSAGES) - 1}"):
        make_retriever("dense", corpus, index_file=index, model_name_or_path=E5)


def test_an_index_recorded_with_another_encoder_or_corpus_is_refused(encoders, tmp_path):
    path = write_search_r1_corpus(tmp_path / "wiki.jsonl")
    index = build_index_file(path, tmp_path / "bge.index", model_name_or_path="BAAI/bge-base-en-v1.5",
                             show_progress=False)
    assert read_index_record(index)["encoder"] == "BAAI/bge-base-en-v1.5"
    with pytest.raises(IndexMismatch, match="built with the encoder 'BAAI/bge-base-en-v1.5' but retriever_model is "
                                            "'intfloat/e5-base-v2': set retriever_model: BAAI/bge-base-en-v1.5"):
        make_retriever("dense", CorpusFile(path), index_file=index, model_name_or_path=E5)
    other = write_search_r1_corpus(tmp_path / "other.jsonl", [(t, text.upper()) for t, text in PASSAGES])
    with pytest.raises(IndexMismatch, match="other passages or order"):
        make_retriever("dense", CorpusFile(other), index_file=index, model_name_or_path="BAAI/bge-base-en-v1.5")
    # the same encoder from a local folder of that name is the same encoder
    retriever = make_retriever("dense", CorpusFile(path), index_file=index,
                               model_name_or_path=str(tmp_path / "models" / "bge-base-en-v1.5"))
    assert ids(retriever.search(["nine arches bridge"], k=1)) == [["2"]]


def test_the_schema_refuses_bad_index_settings_without_loading_anything(tmp_path):
    corpus = write_search_r1_corpus(tmp_path / "wiki.jsonl")
    index = write_foreign_index(tmp_path / "e5_Flat.index")
    qa = str(write_questions(tmp_path / "qa.jsonl"))
    base = {"dataset": qa, "corpus": str(corpus), "retriever_index": str(index), "n_train": 2, "n_eval": 2}
    with pytest.raises(Exception, match="retriever_index is searched by the dense retriever; set retriever: dense"):
        RunConfig(**base, retriever="bm25")
    with pytest.raises(Exception, match="retriever_index: no such file"):
        RunConfig(**{**base, "retriever_index": str(tmp_path / "missing.index")}, retriever="dense")
    with pytest.raises(Exception, match="dataset is synthetic"):
        RunConfig(retriever="dense", retriever_index=str(index))
    with pytest.raises(Exception, match="retriever_index"):  # a typo names the nearest setting
        RunConfig.merge(("params.yaml", {"retriever": "dense", "retriever_indx": str(index)}))
    assert RunConfig(**base, retriever="dense").retriever_index == str(index)


class Interrupted(Exception):
    """Stands in for the kill."""


def test_an_interrupted_build_resumes_from_its_last_chunk(encoders, tmp_path, monkeypatch):
    path = write_search_r1_corpus(tmp_path / "wiki.jsonl")
    out = tmp_path / "e5_Flat.index"
    real_encode, calls = dense_module.encode_texts, []

    def encode_then_die(*args, **kwargs):  # the kill comes while the third chunk is encoded
        calls.append(1)
        if len(calls) == 3:
            raise Interrupted
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(dense_module, "encode_texts", encode_then_die)
    with pytest.raises(Interrupted):
        build_index_file(path, out, model_name_or_path=E5, chunk_size=2, show_progress=False)
    monkeypatch.setattr(dense_module, "encode_texts", real_encode)
    assert not out.exists() and sorted(p.name for p in parts_dir(out).glob("chunk-*")) == ["chunk-00000.npy",
                                                                                          "chunk-00001.npy"]
    with pytest.raises(ValueError, match="another build .* chunk_size"):
        build_index_file(path, out, model_name_or_path=E5, chunk_size=3, show_progress=False)
    build_index_file(path, out, model_name_or_path=E5, chunk_size=2, show_progress=False)
    resumed = encoders.made[-1][1].encoded
    assert resumed == [f"passage: {title}\n{text}" for title, text in PASSAGES[4:]]  # only the unfinished chunks
    assert not parts_dir(out).exists() and record_path(out).is_file()
    whole = build_index_file(path, tmp_path / "whole.index", model_name_or_path=E5, show_progress=False)
    assert np.array_equal(faiss.read_index(str(out)).reconstruct_n(0, len(PASSAGES)),
                          faiss.read_index(str(whole)).reconstruct_n(0, len(PASSAGES)))
    retriever = make_retriever("dense", CorpusFile(path), index_file=out, model_name_or_path=E5)
    assert ids(retriever.search(["lantern parades harvest"], k=1)) == [["4"]]


def test_a_prebuilt_index_is_served_and_named_by_its_file(encoders, tmp_path):
    from searchrl.retrieval.http import HTTPRetriever
    from searchrl.retrieval.serve import ServiceThread, create_app, main

    path = write_search_r1_corpus(tmp_path / "wiki-18.jsonl")
    index = build_index_file(path, tmp_path / "e5_Flat.index", model_name_or_path=E5, show_progress=False)
    retriever = make_retriever("dense", CorpusFile(path), index_file=index, model_name_or_path=E5)
    with ServiceThread(create_app(retriever)) as running:
        remote = HTTPRetriever(running.url, corpus=CorpusFile(path))  # the run's corpus: the same file, same name
        assert remote.health()["corpus_fingerprint"] == CorpusFile(path).fingerprint
        assert ids(remote.search(["nine arches bridge"], 1)) == [["2"]]
    with pytest.raises(SystemExit):  # the command line wants the passage file beside the index
        main(["--faiss-index", str(index)])


def test_an_index_faiss_cannot_map_is_read_whole_and_says_why(tmp_path):
    from searchrl.retrieval.prebuilt import read_index

    path = write_foreign_index(tmp_path / "e5_Flat.index")

    def faiss_refusing(*flags):
        def read(name, flag=0):
            if flag in flags:
                raise RuntimeError("Error in read_index: cannot map this index\n(the rest of faiss's message)")
            return faiss.read_index(name, flag)

        return SimpleNamespace(read_index=read, IO_FLAG_MMAP_IFC=faiss.IO_FLAG_MMAP_IFC,
                               IO_FLAG_MMAP=faiss.IO_FLAG_MMAP, try_extract_index_ivf=faiss.try_extract_index_ivf)

    assert read_index(faiss, path)[1] == "mmap"
    index, how = read_index(faiss_refusing(faiss.IO_FLAG_MMAP_IFC), path)  # the older flag maps IVF lists only
    assert index.ntotal == len(PASSAGES) and how == "read (faiss maps only flat-code and IVF indexes)"
    index, how = read_index(faiss_refusing(faiss.IO_FLAG_MMAP_IFC, faiss.IO_FLAG_MMAP), path)
    assert index.ntotal == len(PASSAGES)
    assert how == ("read (IO_FLAG_MMAP_IFC: Error in read_index: cannot map this index; IO_FLAG_MMAP: Error in "
                   "read_index: cannot map this index)")


SLOW_BUILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import searchrl.retrieval.dense as dense
from fakes import BagOfWordsEncoder
from searchrl.retrieval.index_build import build_index_file

class Slow(BagOfWordsEncoder):
    def encode(self, texts, **options):
        time.sleep(0.4)
        return super().encode(texts, **options)

dense._load_encoder = lambda model_name_or_path, device: Slow(int(sys.argv[4]))
build_index_file(sys.argv[2], sys.argv[3], model_name_or_path="intfloat/e5-base-v2", chunk_size=1, show_progress=False)
"""


def test_a_build_killed_by_sigkill_resumes_where_it_stopped(encoders, tmp_path):
    path = write_search_r1_corpus(tmp_path / "wiki.jsonl")
    out = tmp_path / "e5_Flat.index"
    victim = subprocess.Popen([sys.executable, "-c", SLOW_BUILD, str(Path(__file__).parent), str(path), str(out),
                               str(SIZE)], start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (parts_dir(out) / "chunk-00002.npy").exists():
        assert victim.poll() is None, "the build ended before it could be killed"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    finished = sorted(p.name for p in parts_dir(out).glob("chunk-*.npy"))
    assert 3 <= len(finished) < len(PASSAGES) and not out.exists()
    build_index_file(path, out, model_name_or_path=E5, chunk_size=1, show_progress=False)
    assert len(encoders.made[-1][1].encoded) == len(PASSAGES) - len(finished)  # nothing finished is encoded again
    whole = build_index_file(path, tmp_path / "whole.index", model_name_or_path=E5, show_progress=False)
    assert np.array_equal(faiss.read_index(str(out)).reconstruct_n(0, len(PASSAGES)),
                          faiss.read_index(str(whole)).reconstruct_n(0, len(PASSAGES)))
